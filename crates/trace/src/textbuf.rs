//! A big-chunk line buffer shared by the text readers: it reads megabytes at a time and
//! exposes a window that always ends just after a `\n`, so the line parsers can scan
//! byte by byte without bounds checks against the end of a line and without copying
//! lines into `String`s.

use std::io::{ErrorKind, Read};

use crate::TraceError;

/// Buffer size: megabytes at a time, and the longest line a trace may have (no trace
/// format has lines of more than a few dozen bytes; a longer one is not a trace, and
/// refusing it bounds the memory a reader of hostile input takes).
const CHUNK: usize = 1 << 20;

/// Buffered text with a window of complete lines.
pub(crate) struct TextBuf<R> {
    inner: R,
    /// File name for errors, or `<stdin>`.
    pub(crate) name: String,
    /// Bytes read; `buf[pos..end]` are complete lines, `buf[end..filled]` a partial one.
    pub(crate) buf: Vec<u8>,
    /// Start of the next unparsed line.
    pub(crate) pos: usize,
    /// Just past the last `\n` in the buffer.
    pub(crate) end: usize,
    filled: usize,
    eof: bool,
    /// 1-based number of the line starting at `pos`.
    pub(crate) line: u64,
}

impl<R: Read> TextBuf<R> {
    pub(crate) fn new(inner: R, name: String) -> Self {
        TextBuf {
            inner,
            name,
            buf: vec![0; CHUNK],
            pos: 0,
            end: 0,
            filled: 0,
            eof: false,
            line: 1,
        }
    }

    /// Makes at least one more complete line available in `buf[pos..end]`; returns false
    /// at the end of the input. A last line without `\n` gets one.
    pub(crate) fn refill(&mut self) -> Result<bool, TraceError> {
        if self.pos < self.end {
            return Ok(true);
        }
        // Move the partial line to the front so the window can grow behind it.
        self.buf.copy_within(self.end..self.filled, 0);
        self.filled -= self.end;
        self.pos = 0;
        self.end = 0;
        loop {
            if self.eof {
                if self.filled == 0 {
                    return Ok(false);
                }
                if self.filled == self.buf.len() {
                    // One byte more than the bound, once, for the missing last newline.
                    self.buf.push(b'\n');
                } else {
                    self.buf[self.filled] = b'\n';
                }
                self.filled += 1;
                self.end = self.filled;
                return Ok(true);
            }
            if self.filled == self.buf.len() {
                // The partial line at the front fills the whole buffer.
                return Err(self.error(
                    "line",
                    format!("longer than {CHUNK} bytes: not a trace line"),
                ));
            }
            let scan_from = self.filled;
            match self.inner.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.filled += n;
                    if let Some(last) = self.buf[scan_from..self.filled]
                        .iter()
                        .rposition(|&b| b == b'\n')
                    {
                        self.end = scan_from + last + 1;
                        return Ok(true);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(error) => {
                    return Err(TraceError::Io {
                        source_name: format!("{}:{}", self.name, self.line),
                        error,
                    });
                }
            }
        }
    }

    /// A syntax error at the current line.
    pub(crate) fn error(&self, field: &'static str, message: String) -> TraceError {
        TraceError::Syntax {
            source_name: self.name.clone(),
            line: self.line,
            field,
            message,
        }
    }
}

//! Writing traces: a format-agnostic sink, with compression chosen by file name.

use std::fs::File;
use std::io::{BufWriter, Write};

use crate::{BinaryWriter, DinWriter, Format, Ref, TraceError};

/// Something references can be written to.
pub trait RefSink {
    /// Writes `refs` in order.
    fn write_refs(&mut self, refs: &[Ref]) -> Result<(), TraceError>;
    /// Flushes everything (and ends any compressed stream).
    fn finish(self: Box<Self>) -> Result<(), TraceError>;
}

/// The byte stream under a trace writer: plain, xz or zstd.
enum Stream {
    Plain(BufWriter<Box<dyn Write + Send>>),
    Xz(xz2::write::XzEncoder<BufWriter<Box<dyn Write + Send>>>),
    Zstd(zstd::Encoder<'static, BufWriter<Box<dyn Write + Send>>>),
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(w) => w.write(buf),
            Stream::Xz(w) => w.write(buf),
            Stream::Zstd(w) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Plain(w) => w.write_all(buf),
            Stream::Xz(w) => w.write_all(buf),
            Stream::Zstd(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(w) => w.flush(),
            Stream::Xz(w) => w.flush(),
            Stream::Zstd(w) => w.flush(),
        }
    }
}

impl Stream {
    fn finish(self) -> std::io::Result<()> {
        let mut inner = match self {
            Stream::Plain(w) => w,
            Stream::Xz(w) => w.finish()?,
            Stream::Zstd(w) => w.finish()?,
        };
        inner.flush()
    }
}

/// The format-specific encoder.
enum Encoder {
    Binary(BinaryWriter<Stream>),
    Din(DinWriter<Stream>),
}

/// A trace writer for any writable format, over a possibly compressed stream.
pub struct TraceWriter {
    encoder: Encoder,
    name: String,
}

impl TraceWriter {
    fn io(&self, error: std::io::Error) -> TraceError {
        TraceError::Io {
            source_name: self.name.clone(),
            error,
        }
    }
}

impl RefSink for TraceWriter {
    fn write_refs(&mut self, refs: &[Ref]) -> Result<(), TraceError> {
        let result = match &mut self.encoder {
            Encoder::Binary(w) => w.write_refs(refs),
            Encoder::Din(w) => w.write_refs(refs),
        };
        result.map_err(|e| self.io(e))
    }

    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        let name = self.name;
        let result = match self.encoder {
            Encoder::Binary(w) => w.into_inner().and_then(Stream::finish),
            Encoder::Din(w) => w.into_inner().and_then(Stream::finish),
        };
        result.map_err(|error| TraceError::Io {
            source_name: name,
            error,
        })
    }
}

/// Creates a trace writer at `path` (`-` for standard output) in `format` (binary or
/// extended din). A path ending in `.zst` is zstd-compressed at `zstd_level`, one ending
/// in `.xz` xz-compressed (preset 6).
pub fn create_trace_writer(
    path: &str,
    format: Format,
    zstd_level: i32,
) -> Result<Box<dyn RefSink>, TraceError> {
    let io = |error| TraceError::Io {
        source_name: path.to_string(),
        error,
    };
    let raw: Box<dyn Write + Send> = if path == "-" {
        Box::new(std::io::stdout())
    } else {
        Box::new(File::create(path).map_err(io)?)
    };
    let buffered = BufWriter::with_capacity(1 << 20, raw);
    let stream = if path.ends_with(".zst") {
        let mut z = zstd::Encoder::new(buffered, zstd_level).map_err(io)?;
        // A content checksum, as xz has by default, so that a damaged file is refused
        // rather than read as other references.
        z.include_checksum(true).map_err(io)?;
        Stream::Zstd(z)
    } else if path.ends_with(".xz") {
        Stream::Xz(xz2::write::XzEncoder::new(buffered, 6))
    } else {
        Stream::Plain(buffered)
    };
    let encoder = match format {
        Format::Binary => Encoder::Binary(BinaryWriter::new(stream).map_err(io)?),
        Format::DinExtended => Encoder::Din(DinWriter::new(stream)),
        Format::DinTraditional | Format::Lackey => {
            return Err(TraceError::Format {
                source_name: path.to_string(),
                message: format!(
                    "pmlab writes only the bin and D formats, not {}",
                    format.name()
                ),
            });
        }
    };
    Ok(Box::new(TraceWriter {
        encoder,
        name: path.to_string(),
    }))
}

/// Collecting references in memory.
impl RefSink for Vec<Ref> {
    fn write_refs(&mut self, refs: &[Ref]) -> Result<(), TraceError> {
        self.extend_from_slice(refs);
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        Ok(())
    }
}

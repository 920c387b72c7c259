//! Dinero's text formats: extended din (`-informat D`, read and written) and
//! traditional din (`-informat d`, read).
//!
//! Both readers follow Dinero IV's own parsers (`xdinfmt.c`, `dinfmt.c`): one record
//! per line, fields separated by blanks or tabs, hex numbers with an optional `0x`
//! prefix, anything after the last field ignored (so it may hold a comment).
//!
//! * Extended din: `TYPE ADDR SIZE`, TYPE one of `r w i m` (either case). Dinero's
//!   `c` (copy-back) and `v` (invalidate) are cache-control records that pmlab's [`Kind`]
//!   does not carry; they are rejected with an error naming them.
//! * Traditional din: `LABEL ADDR`, LABEL 0 read, 1 write, 2 instruction fetch, 3 misc;
//!   label 4 (flush) is rejected like `c`. The size is implicit: Dinero IV's `dinfmt.c`
//!   treats every reference as a 4-byte word and clears the address's two low bits
//!   ("dineroIII is pretty much word-oriented"); this reader does the same, so a trace
//!   simulates identically here and under `dineroIV -informat d`.
//!
//! An empty line is an error, as it is in Dinero IV (a "short line"); so is a size of 0.

use std::io::{Read, Write};

use crate::dinfast::parse_common_line;
use crate::hex::{end_access_type, push_hex, scan_hex, show, skip_blanks, skip_line};
use crate::textbuf::TextBuf;
use crate::{DEFAULT_BATCH, Kind, Ref, RefSource, TraceError};

/// A field error: which field, and what is wrong with it.
type FieldError = (&'static str, String);

/// Reads extended (`D`) or traditional (`d`) din text.
pub struct DinReader<R> {
    text: TextBuf<R>,
    extended: bool,
}

impl<R: Read> DinReader<R> {
    /// An extended-din (`-informat D`) reader over `inner`; `name` is used in errors.
    pub fn extended(inner: R, name: impl Into<String>) -> Self {
        DinReader {
            text: TextBuf::new(inner, name.into()),
            extended: true,
        }
    }

    /// A traditional-din (`-informat d`) reader over `inner`; `name` is used in errors.
    pub fn traditional(inner: R, name: impl Into<String>) -> Self {
        DinReader {
            text: TextBuf::new(inner, name.into()),
            extended: false,
        }
    }
}

impl<R: Read> RefSource for DinReader<R> {
    fn next_batch(&mut self, out: &mut Vec<Ref>) -> Result<usize, TraceError> {
        // Two monomorphic loops rather than a function pointer, so the line parser is
        // inlined into the loop.
        if self.extended {
            fill(&mut self.text, out, parse_common_line, parse_extended)
        } else {
            fill(&mut self.text, out, |_, _| None, parse_traditional)
        }
    }
}

/// Clears `out` and fills it with references, one per line: parsed by `common` when it
/// takes the line, else by `parse` (which also reports errors).
#[inline(always)]
fn fill<R: Read>(
    t: &mut TextBuf<R>,
    out: &mut Vec<Ref>,
    common: impl Fn(&[u8], &mut usize) -> Option<Ref>,
    parse: impl Fn(&[u8], &mut usize) -> Result<Ref, FieldError>,
) -> Result<usize, TraceError> {
    out.clear();
    if out.capacity() == 0 {
        out.reserve(DEFAULT_BATCH);
    }
    let cap = out.capacity();
    while out.len() < cap {
        if !t.refill()? {
            break;
        }
        let buf = &t.buf[..t.end];
        let mut pos = t.pos;
        let mut line = t.line;
        while pos < buf.len() && out.len() < cap {
            if let Some(r) = common(buf, &mut pos) {
                out.push(r);
                line += 1;
                continue;
            }
            match parse(buf, &mut pos) {
                Ok(r) => out.push(r),
                Err((field, message)) => {
                    t.line = line;
                    return Err(t.error(field, message));
                }
            }
            line += 1;
        }
        t.pos = pos;
        t.line = line;
    }
    Ok(out.len())
}

/// Parses one extended-din line at `buf[*pos..]` (which holds a `\n`), leaving `*pos`
/// at the start of the next line.
#[inline(always)]
fn parse_extended(buf: &[u8], pos: &mut usize) -> Result<Ref, FieldError> {
    skip_blanks(buf, pos);
    let c = buf[*pos];
    let kind = match c | 0x20 {
        b'r' => Kind::Read,
        b'w' => Kind::Write,
        b'i' => Kind::Instr,
        b'm' => Kind::Misc,
        b'c' | b'v' if !matches!(c, b'\n' | b'\r') => {
            let what = if c | 0x20 == b'c' {
                "copy-back"
            } else {
                "invalidate"
            };
            return Err((
                "access type",
                format!(
                    "'{}' ({what}) records are not supported by pmlab",
                    c as char
                ),
            ));
        }
        _ if c == b'\n' => return Err(("access type", "short line (no access type)".into())),
        _ => {
            return Err((
                "access type",
                format!("unknown access type {} (expected r, w, i or m)", show(c)),
            ));
        }
    };
    end_access_type(buf, pos, c)?;
    if buf[*pos] == b'\n' {
        return Err(("address", "short line (no address)".into()));
    }
    let addr = scan_hex(buf, pos, b'\n').map_err(|e| ("address", e.message("hex")))?;
    skip_blanks(buf, pos);
    if buf[*pos] == b'\n' {
        return Err(("size", "missing size".into()));
    }
    let size = scan_hex(buf, pos, b'\n').map_err(|e| ("size", e.message("hex")))?;
    let size = check_size(size)?;
    skip_line(buf, pos);
    Ok(Ref {
        addr,
        size,
        kind,
        asid: 0,
    })
}

/// Parses one traditional-din line at `buf[*pos..]`.
#[inline(always)]
fn parse_traditional(buf: &[u8], pos: &mut usize) -> Result<Ref, FieldError> {
    skip_blanks(buf, pos);
    if buf[*pos] == b'\n' {
        return Err(("label", "short line (no label)".into()));
    }
    let label = scan_hex(buf, pos, b'\n').map_err(|e| ("label", e.message("hex")))?;
    let kind = match label {
        0..=3 => Kind::from_code(label as u8).expect("codes 0..=3 are kinds"),
        4 => {
            return Err((
                "label",
                "label 4 (cache flush) is not supported by pmlab".into(),
            ));
        }
        _ => return Err(("label", format!("unknown label {label:x} (expected 0..4)"))),
    };
    skip_blanks(buf, pos);
    if buf[*pos] == b'\n' {
        return Err(("address", "short line (no address)".into()));
    }
    let addr = scan_hex(buf, pos, b'\n').map_err(|e| ("address", e.message("hex")))?;
    skip_line(buf, pos);
    // Dinero IV's dinfmt.c: word-oriented, address & ~3, size 4.
    Ok(Ref {
        addr: addr & !3,
        size: 4,
        kind,
        asid: 0,
    })
}

/// Rejects sizes of 0 and sizes that do not fit the record.
fn check_size(size: u64) -> Result<u32, FieldError> {
    if size == 0 {
        return Err((
            "size",
            "size 0 (a reference covers at least one byte)".into(),
        ));
    }
    u32::try_from(size).map_err(|_| ("size", format!("size 0x{size:x} exceeds 32 bits")))
}

/// Writes extended din (`-informat D`): `TYPE ADDR SIZE` with lower-case hex, no prefix.
/// The process id is not representable and is dropped.
pub struct DinWriter<W: Write> {
    inner: W,
    line: Vec<u8>,
}

impl<W: Write> DinWriter<W> {
    /// A writer into `inner` (buffer it, or pass a [`std::io::BufWriter`]).
    pub fn new(inner: W) -> Self {
        DinWriter {
            inner,
            line: Vec::with_capacity(1 << 16),
        }
    }

    /// Writes `refs`.
    pub fn write_refs(&mut self, refs: &[Ref]) -> std::io::Result<()> {
        for r in refs {
            self.line.push(r.kind.letter());
            self.line.push(b' ');
            push_hex(&mut self.line, r.addr);
            self.line.push(b' ');
            push_hex(&mut self.line, r.size as u64);
            self.line.push(b'\n');
            if self.line.len() > (1 << 16) - 64 {
                self.inner.write_all(&self.line)?;
                self.line.clear();
            }
        }
        Ok(())
    }

    /// Flushes buffered lines and returns the inner writer.
    pub fn into_inner(mut self) -> std::io::Result<W> {
        self.inner.write_all(&self.line)?;
        self.line.clear();
        self.inner.flush()?;
        Ok(self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_all;

    fn read_ext(text: &str) -> Result<Vec<Ref>, TraceError> {
        read_all(&mut DinReader::extended(text.as_bytes(), "t.din"))
    }

    fn read_trad(text: &str) -> Result<Vec<Ref>, TraceError> {
        read_all(&mut DinReader::traditional(text.as_bytes(), "t.din"))
    }

    #[test]
    fn extended_parses_dinero_examples() {
        let refs =
            read_ext("i 04936970 2\nr 1ffefff158 8\nW 0x10 0x4 comment\n\tm\t20\t1").unwrap();
        assert_eq!(
            refs,
            vec![
                Ref {
                    addr: 0x4936970,
                    size: 2,
                    kind: Kind::Instr,
                    asid: 0
                },
                Ref {
                    addr: 0x1ffefff158,
                    size: 8,
                    kind: Kind::Read,
                    asid: 0
                },
                Ref {
                    addr: 0x10,
                    size: 4,
                    kind: Kind::Write,
                    asid: 0
                },
                Ref {
                    addr: 0x20,
                    size: 1,
                    kind: Kind::Misc,
                    asid: 0
                },
            ]
        );
    }

    fn syntax(e: TraceError) -> (u64, &'static str, String) {
        match e {
            TraceError::Syntax {
                line,
                field,
                message,
                source_name,
            } => {
                assert_eq!(source_name, "t.din");
                (line, field, message)
            }
            other => panic!("not a syntax error: {other}"),
        }
    }

    #[test]
    fn extended_errors_name_line_and_field() {
        let (line, field, _) = syntax(read_ext("r 10 4\nr 1g 4\n").unwrap_err());
        assert_eq!((line, field), (2, "address"));
        let (line, field, _) = syntax(read_ext("r 10 4\nr 10 4\nx 10 4\n").unwrap_err());
        assert_eq!((line, field), (3, "access type"));
        let (_, field, msg) = syntax(read_ext("c 10 4\n").unwrap_err());
        assert_eq!(field, "access type");
        assert!(msg.contains("copy-back"), "{msg}");
        let (_, field, _) = syntax(read_ext("r 10 0\n").unwrap_err());
        assert_eq!(field, "size");
        let (_, field, _) = syntax(read_ext("r 10\n").unwrap_err());
        assert_eq!(field, "size");
        let (line, _, _) = syntax(read_ext("r 10 4\n\n").unwrap_err());
        assert_eq!(line, 2);
        let (_, field, _) = syntax(read_ext("rw 10 4\n").unwrap_err());
        assert_eq!(field, "access type");
    }

    #[test]
    fn the_common_line_parser_agrees_with_the_general_one() {
        // Lines near the common shape (type, blank, address, blank, size, end), each
        // part drawn from right and wrong choices by a deterministic xorshift stream.
        let kinds: [&[u8]; 6] = [b"r", b"W", b"i", b"m", b"c", b"rw"];
        let blanks: [&[u8]; 4] = [b" ", b" ", b"  ", b"\t"];
        let numbers: [&[u8]; 12] = [
            b"0",
            b"7",
            b"1f",
            b"ABC",
            b"10f78d",
            b"1fff000148",
            b"0x40",
            b"12345678",
            b"123456789",
            b"fffffffffffffff",
            b"ffffffffffffffff",
            b"1g",
        ];
        let ends: [&[u8]; 5] = [b"", b"", b" junk", b"\r", b" "];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut pick = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as usize % n
        };
        let mut text = Vec::new();
        for _ in 0..100_000 {
            text.extend_from_slice(kinds[pick(kinds.len())]);
            text.extend_from_slice(blanks[pick(blanks.len())]);
            text.extend_from_slice(numbers[pick(numbers.len())]);
            text.extend_from_slice(blanks[pick(blanks.len())]);
            text.extend_from_slice(numbers[pick(numbers.len())]);
            text.extend_from_slice(ends[pick(ends.len())]);
            text.push(b'\n');
        }
        let (mut taken, mut pos) = (0, 0);
        while pos + crate::dinfast::WINDOW < text.len() {
            let mut fast_pos = pos;
            let fast = parse_common_line(&text, &mut fast_pos);
            let mut slow_pos = pos;
            let slow = parse_extended(&text, &mut slow_pos);
            if let Some(r) = fast {
                assert_eq!((Ok(r), fast_pos), (slow, slow_pos), "at byte {pos}");
                taken += 1;
            } else {
                assert_eq!(fast_pos, pos);
            }
            pos = text[pos..].iter().position(|&b| b == b'\n').unwrap() + pos + 1;
        }
        assert!(taken > 1000, "only {taken} common lines");
    }

    #[test]
    fn traditional_is_word_oriented_like_dinero() {
        let refs = read_trad("0 1003 junk\n1 0x20\n2 7\n3 ffff\n").unwrap();
        assert_eq!(
            refs[0],
            Ref {
                addr: 0x1000,
                size: 4,
                kind: Kind::Read,
                asid: 0
            }
        );
        assert_eq!(refs[1].kind, Kind::Write);
        assert_eq!(
            refs[2],
            Ref {
                addr: 4,
                size: 4,
                kind: Kind::Instr,
                asid: 0
            }
        );
        assert_eq!(refs[3].kind, Kind::Misc);
        let (line, field, msg) = syntax(read_trad("0 10\n4 10\n").unwrap_err());
        assert_eq!((line, field), (2, "label"));
        assert!(msg.contains("flush"));
        let (_, field, _) = syntax(read_trad("9 10\n").unwrap_err());
        assert_eq!(field, "label");
    }

    #[test]
    fn writer_output_reads_back() {
        let refs = vec![
            Ref {
                addr: 0,
                size: 1,
                kind: Kind::Read,
                asid: 0,
            },
            Ref {
                addr: u64::MAX,
                size: u32::MAX,
                kind: Kind::Misc,
                asid: 0,
            },
        ];
        let mut w = DinWriter::new(Vec::new());
        w.write_refs(&refs).unwrap();
        let bytes = w.into_inner().unwrap();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            "r 0 1\nm ffffffffffffffff ffffffff\n"
        );
        assert_eq!(
            read_all(&mut DinReader::extended(&bytes[..], "x")).unwrap(),
            refs
        );
    }
}

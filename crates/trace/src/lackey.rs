//! valgrind lackey's memory trace (`valgrind --tool=lackey --trace-mem=yes`).
//!
//! Lackey prints one access per line: `I  ADDR,SIZE` for an instruction fetch and
//! ` L ADDR,SIZE`, ` S ADDR,SIZE`, ` M ADDR,SIZE` for a data load, store and modify,
//! the address in hex and the size in decimal. A modify is a read followed by a write
//! of the same bytes, and is returned as those two references. valgrind's own lines
//! (`==PID== ...` banners, `--PID-- ...` warnings) and empty lines are skipped.

use std::io::Read;

use crate::hex::{end_access_type, scan_dec, scan_hex, show, skip_blanks, skip_line};
use crate::textbuf::TextBuf;
use crate::{DEFAULT_BATCH, Kind, Ref, RefSource, TraceError};

/// Reads lackey `--trace-mem=yes` output.
pub struct LackeyReader<R> {
    text: TextBuf<R>,
}

impl<R: Read> LackeyReader<R> {
    /// A reader over `inner`; `name` is used in errors.
    pub fn new(inner: R, name: impl Into<String>) -> Self {
        LackeyReader {
            text: TextBuf::new(inner, name.into()),
        }
    }
}

/// What one line held.
enum Line {
    Skip,
    One(Ref),
    Modify(Ref),
}

impl<R: Read> RefSource for LackeyReader<R> {
    fn next_batch(&mut self, out: &mut Vec<Ref>) -> Result<usize, TraceError> {
        out.clear();
        if out.capacity() < 2 {
            out.reserve(DEFAULT_BATCH);
        }
        // A modify line yields two references; stop one short so the batch never grows.
        let cap = out.capacity() - 1;
        while out.len() < cap {
            if !self.text.refill()? {
                break;
            }
            let t = &mut self.text;
            let buf = &t.buf[..t.end];
            let mut pos = t.pos;
            let mut line = t.line;
            while pos < buf.len() && out.len() < cap {
                match parse_line(buf, &mut pos) {
                    Ok(Line::Skip) => {}
                    Ok(Line::One(r)) => out.push(r),
                    Ok(Line::Modify(r)) => {
                        out.push(r);
                        out.push(Ref {
                            kind: Kind::Write,
                            ..r
                        });
                    }
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
}

#[inline(always)]
fn parse_line(buf: &[u8], pos: &mut usize) -> Result<Line, (&'static str, String)> {
    let first = buf[*pos];
    if first == b'=' || first == b'-' || first == b'\n' || first == b'\r' {
        skip_line(buf, pos);
        return Ok(Line::Skip);
    }
    skip_blanks(buf, pos);
    let c = buf[*pos];
    let modify = c == b'M';
    let kind = match c {
        b'I' => Kind::Instr,
        b'L' | b'M' => Kind::Read,
        b'S' => Kind::Write,
        _ => {
            return Err((
                "access type",
                format!("unknown access type {} (expected I, L, S or M)", show(c)),
            ));
        }
    };
    end_access_type(buf, pos, c)?;
    let addr = scan_hex(buf, pos, b',').map_err(|e| ("address", e.message("hex")))?;
    if buf[*pos] != b',' {
        return Err((
            "size",
            format!("expected ',' before the size, found {}", show(buf[*pos])),
        ));
    }
    *pos += 1;
    let size = scan_dec(buf, pos, b'\n').map_err(|e| ("size", e.message("decimal")))?;
    if size == 0 {
        return Err((
            "size",
            "size 0 (a reference covers at least one byte)".into(),
        ));
    }
    let size = u32::try_from(size).map_err(|_| ("size", format!("size {size} exceeds 32 bits")))?;
    skip_line(buf, pos);
    let r = Ref {
        addr,
        size,
        kind,
        asid: 0,
    };
    Ok(if modify {
        Line::Modify(r)
    } else {
        Line::One(r)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_all;

    #[test]
    fn parses_lackey_output_and_skips_banners() {
        let text = "==123== Lackey, an example Valgrind tool\n==123== Copyright\nI  04001090,3\n L 1ffefffe88,8\n S 04a2c000,4\n M 0421e4a8,16\n--123-- warning\n\n";
        let refs = read_all(&mut LackeyReader::new(text.as_bytes(), "l")).unwrap();
        assert_eq!(
            refs,
            vec![
                Ref {
                    addr: 0x4001090,
                    size: 3,
                    kind: Kind::Instr,
                    asid: 0
                },
                Ref {
                    addr: 0x1ffefffe88,
                    size: 8,
                    kind: Kind::Read,
                    asid: 0
                },
                Ref {
                    addr: 0x4a2c000,
                    size: 4,
                    kind: Kind::Write,
                    asid: 0
                },
                Ref {
                    addr: 0x421e4a8,
                    size: 16,
                    kind: Kind::Read,
                    asid: 0
                },
                Ref {
                    addr: 0x421e4a8,
                    size: 16,
                    kind: Kind::Write,
                    asid: 0
                },
            ]
        );
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = read_all(&mut LackeyReader::new(&b"I  10,4\n X 10,4\n"[..], "l")).unwrap_err();
        assert!(
            matches!(
                e,
                TraceError::Syntax {
                    line: 2,
                    field: "access type",
                    ..
                }
            ),
            "{e}"
        );
        let e = read_all(&mut LackeyReader::new(&b"I  10,0\n"[..], "l")).unwrap_err();
        assert!(
            matches!(
                e,
                TraceError::Syntax {
                    line: 1,
                    field: "size",
                    ..
                }
            ),
            "{e}"
        );
        let e = read_all(&mut LackeyReader::new(&b" L 10;4\n"[..], "l")).unwrap_err();
        assert!(
            matches!(
                e,
                TraceError::Syntax {
                    line: 1,
                    field: "address",
                    ..
                }
            ),
            "{e}"
        );
    }
}

//! The common extended-din line, parsed without the general parser's branches:
//! `TYPE ADDR SIZE\n` with single blanks, ADDR of 1 to 15 hex digits and SIZE of 1 to
//! 8, no `0x` prefix and nothing after SIZE — the shape pmlab and Dinero's own tools
//! write. Any other line (and any error) is left to the general parser in `din.rs`,
//! which accepts every line this one does with the same result, so the two agree by
//! construction: this parser only ever declines.
//!
//! Each number is read as one or two little-endian words (`hex::hex_word`), and the
//! result is an `Option<Ref>`, which fits in two registers: returning the general
//! parser's `Result` (whose error carries a `String`) through memory, then copying the
//! reference out of it, cost as much as the parsing.

use crate::hex::{HEX_VALUE, INVALID, hex_word};
use crate::{Kind, Ref};

/// The kind of each access letter (`r w i m`, either case), or `NOT_A_KIND`.
const KIND_OF: [u8; 256] = {
    let mut t = [NOT_A_KIND; 256];
    t[b'r' as usize] = Kind::Read as u8;
    t[b'R' as usize] = Kind::Read as u8;
    t[b'w' as usize] = Kind::Write as u8;
    t[b'W' as usize] = Kind::Write as u8;
    t[b'i' as usize] = Kind::Instr as u8;
    t[b'I' as usize] = Kind::Instr as u8;
    t[b'm' as usize] = Kind::Misc as u8;
    t[b'M' as usize] = Kind::Misc as u8;
    t
};
const NOT_A_KIND: u8 = 0xff;

/// Longest line this parser reads: type, blank, 16 bytes of address window, blank,
/// 8 bytes of size window and the byte after it.
pub(crate) const WINDOW: usize = 2 + 16 + 1 + 8 + 1;

/// Parses the line at `buf[*pos..]` if it has the common shape, advancing `*pos` past
/// its `\n`; `None`, with `*pos` unchanged, otherwise (including the last lines of a
/// buffer, closer than [`WINDOW`] bytes to its end).
#[inline(always)]
pub(crate) fn parse_common_line(buf: &[u8], pos: &mut usize) -> Option<Ref> {
    let line: &[u8; WINDOW] = buf.get(*pos..*pos + WINDOW)?.try_into().ok()?;
    let kind = Kind::from_code(KIND_OF[line[0] as usize])?;
    if line[1] != b' ' {
        return None;
    }
    let (addr, addr_digits) = hex_run_15(word(line, 2), word(line, 10))?;
    let size_at = 2 + addr_digits + 1;
    if line[size_at - 1] != b' ' {
        return None;
    }
    // Most sizes are one digit: take those without the word arithmetic.
    let first = HEX_VALUE[line[size_at] as usize];
    let (size, size_digits) = if first != INVALID && line[size_at + 1] == b'\n' {
        (u64::from(first), 1)
    } else {
        hex_word(word(line, size_at))
    };
    let end = size_at + size_digits;
    if size_digits == 0 || size == 0 || line[end] != b'\n' {
        return None;
    }
    *pos += end + 1;
    Some(Ref {
        addr,
        // At most 8 hex digits.
        size: size as u32,
        kind,
        asid: 0,
    })
}

/// The little-endian word at `line[at..at + 8]`.
#[inline(always)]
fn word(line: &[u8; WINDOW], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&line[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The value and length of a run of 1 to 15 hex digits spread over the words `hi`
/// (first) and `lo`; `None` for an empty run or one of 16 or more digits.
#[inline(always)]
fn hex_run_15(hi: u64, lo: u64) -> Option<(u64, usize)> {
    let (v, n) = hex_word(hi);
    if n < 8 {
        return (n > 0).then_some((v, n));
    }
    let (w, m) = hex_word(lo);
    if m == 8 {
        return None;
    }
    Some(((v << (4 * m)) | w, 8 + m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Option<(Ref, usize)> {
        let mut text = line.as_bytes().to_vec();
        text.resize(text.len() + WINDOW, b'\n');
        let mut pos = 0;
        parse_common_line(&text, &mut pos).map(|r| (r, pos))
    }

    #[test]
    fn takes_the_common_shape() {
        let (r, next) = parse("i 10f78d 5\n").unwrap();
        assert_eq!(
            r,
            Ref {
                addr: 0x10f78d,
                size: 5,
                kind: Kind::Instr,
                asid: 0
            }
        );
        assert_eq!(next, 11);
        let (r, _) = parse("W 1FFF000148 ffffffff\n").unwrap();
        assert_eq!(
            (r.addr, r.size, r.kind),
            (0x1fff000148, u32::MAX, Kind::Write)
        );
        let (r, _) = parse("m fffffffffffffff 1\n").unwrap();
        assert_eq!(r.addr, 0xfff_ffff_ffff_ffff);
    }

    #[test]
    fn declines_everything_else() {
        for line in [
            "x 10 4\n",
            "r  10 4\n",
            "r\t10 4\n",
            "r 0x10 4\n",
            "r 10  4\n",
            "r 10 4 comment\n",
            "r 10 4\r\n",
            "r 10 0\n",
            "r 10 100000000\n",
            "r ffffffffffffffff 4\n",
            "r 10\n",
            "rw 10 4\n",
            "c 10 4\n",
            "\n",
        ] {
            assert_eq!(parse(line), None, "{line:?}");
        }
        // Too close to the end of the buffer.
        let mut pos = 0;
        assert_eq!(parse_common_line(b"r 10 4\n", &mut pos), None);
        assert_eq!(pos, 0);
    }
}

//! Hand-written number scanning for the text readers: a table lookup per digit and no
//! allocation, because `u64::from_str_radix` over a `&str` would need UTF-8 checks and
//! separate tokenising for every one of tens of millions of lines.

/// Digit value of every byte, or `INVALID` for non-hex bytes.
const HEX_VALUE: [u8; 256] = {
    let mut table = [INVALID; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

const INVALID: u8 = 0xff;

/// Why a number field did not scan.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NumError {
    /// The field is empty or starts with a non-digit (the byte is given).
    NotANumber(u8),
    /// A non-digit, non-separator byte inside the field.
    BadDigit(u8),
    /// The value does not fit in 64 bits.
    Overflow,
}

impl NumError {
    /// A message for [`crate::TraceError`].
    pub(crate) fn message(&self, what: &str) -> String {
        match self {
            NumError::NotANumber(b) => format!("expected a {what} number, found {}", show(*b)),
            NumError::BadDigit(b) => format!("non-{what} digit {} in number", show(*b)),
            NumError::Overflow => "value does not fit in 64 bits".to_string(),
        }
    }
}

/// A byte as the user would recognise it in a message.
pub(crate) fn show(b: u8) -> String {
    match b {
        b'\n' => "end of line".to_string(),
        0x21..=0x7e => format!("'{}'", b as char),
        _ => format!("byte 0x{b:02x}"),
    }
}

/// Whether `b` ends a field: blank, tab, carriage return or newline.
#[inline(always)]
pub(crate) fn is_separator(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Scans a hexadecimal number (optional `0x`/`0X` prefix, as Dinero IV accepts) starting
/// at `line[*pos]`, stopping at a separator or at `stop`. `line` must contain a `\n` at or
/// after `*pos`, which bounds the scan.
#[inline(always)]
pub(crate) fn scan_hex(line: &[u8], pos: &mut usize, stop: u8) -> Result<u64, NumError> {
    let mut i = *pos;
    let first = line[i];
    if HEX_VALUE[first as usize] == INVALID {
        return Err(NumError::NotANumber(first));
    }
    if first == b'0' && matches!(line.get(i + 1), Some(b'x' | b'X')) {
        i += 2;
    }
    // Iterating the slice (rather than indexing) keeps bounds checks out of the
    // per-digit loop; overflow is checked once, from the digit count, not per digit.
    let mut value = 0u64;
    let mut digits = 0usize;
    for &b in &line[i..] {
        let d = HEX_VALUE[b as usize];
        if d == INVALID {
            break;
        }
        value = (value << 4) | d as u64;
        digits += 1;
    }
    let end = i + digits;
    let b = line[end];
    if !(is_separator(b) || b == stop) {
        return Err(NumError::BadDigit(b));
    }
    if digits > 16 && line[i..end - 16].iter().any(|&b| b != b'0') {
        return Err(NumError::Overflow);
    }
    *pos = end;
    Ok(value)
}

/// Scans a decimal number starting at `line[*pos]`, stopping at a separator or `stop`.
#[inline(always)]
pub(crate) fn scan_dec(line: &[u8], pos: &mut usize, stop: u8) -> Result<u64, NumError> {
    let i = *pos;
    let b = line[i];
    if !b.is_ascii_digit() {
        return Err(NumError::NotANumber(b));
    }
    let mut value: u64 = 0;
    let mut digits = 0usize;
    for &b in &line[i..] {
        if !b.is_ascii_digit() {
            break;
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add((b - b'0') as u64))
            .ok_or(NumError::Overflow)?;
        digits += 1;
    }
    let end = i + digits;
    let b = line[end];
    if !(is_separator(b) || b == stop) {
        return Err(NumError::BadDigit(b));
    }
    *pos = end;
    Ok(value)
}

/// Advances past blanks and tabs (and a stray carriage return).
#[inline(always)]
pub(crate) fn skip_blanks(line: &[u8], pos: &mut usize) {
    // Fields are almost always separated by a single blank: test that first.
    if !matches!(line[*pos], b' ' | b'\t' | b'\r') {
        return;
    }
    *pos += 1 + line[*pos + 1..]
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\r'))
        .unwrap_or(line.len() - *pos - 1);
}

/// Advances to just past the next `\n`.
#[inline(always)]
pub(crate) fn skip_line(line: &[u8], pos: &mut usize) {
    // Most lines end right after their last field.
    if line[*pos] == b'\n' {
        *pos += 1;
        return;
    }
    *pos += 1 + line[*pos..]
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(line.len() - *pos - 1);
}

/// Appends `value` in lower-case hex without leading zeros (at least one digit).
#[inline(always)]
pub(crate) fn push_hex(out: &mut Vec<u8>, value: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut tmp = [0u8; 16];
    let mut n = 0;
    let mut v = value;
    loop {
        tmp[15 - n] = DIGITS[(v & 15) as usize];
        n += 1;
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[16 - n..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_scans_with_and_without_prefix() {
        let line = b"0x1fF rest\n";
        let mut pos = 0;
        assert_eq!(scan_hex(line, &mut pos, b'\n'), Ok(0x1ff));
        assert_eq!(pos, 5);
        let mut pos = 0;
        assert_eq!(
            scan_hex(b"ffffffffffffffff\n", &mut pos, b'\n'),
            Ok(u64::MAX)
        );
        let mut pos = 0;
        assert_eq!(
            scan_hex(b"1ffffffffffffffff\n", &mut pos, b'\n'),
            Err(NumError::Overflow)
        );
        let mut pos = 0;
        assert_eq!(
            scan_hex(b"12g4\n", &mut pos, b'\n'),
            Err(NumError::BadDigit(b'g'))
        );
        let mut pos = 0;
        assert_eq!(
            scan_hex(b"g\n", &mut pos, b'\n'),
            Err(NumError::NotANumber(b'g'))
        );
    }

    #[test]
    fn leading_zeros_do_not_overflow_and_bare_prefix_is_zero() {
        let mut pos = 0;
        assert_eq!(
            scan_hex(b"0000000000000000000001 x\n", &mut pos, b'\n'),
            Ok(1)
        );
        assert_eq!(pos, 22);
        let mut pos = 0;
        assert_eq!(scan_hex(b"0x\n", &mut pos, b'\n'), Ok(0));
        let mut pos = 0;
        assert_eq!(
            scan_hex(b"10000000000000000\n", &mut pos, b'\n'),
            Err(NumError::Overflow)
        );
    }

    #[test]
    fn decimal_scans_and_overflows() {
        let mut pos = 0;
        assert_eq!(scan_dec(b"123,\n", &mut pos, b','), Ok(123));
        let mut pos = 0;
        assert_eq!(
            scan_dec(b"99999999999999999999\n", &mut pos, b'\n'),
            Err(NumError::Overflow)
        );
    }

    #[test]
    fn hex_formats_round_trip() {
        for v in [0u64, 1, 0xabc, u64::MAX, 0x1000] {
            let mut out = Vec::new();
            push_hex(&mut out, v);
            out.push(b'\n');
            let mut pos = 0;
            assert_eq!(scan_hex(&out, &mut pos, b'\n'), Ok(v));
        }
    }
}

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
    let first = HEX_VALUE[line[i] as usize];
    if first == INVALID {
        return Err(NumError::NotANumber(line[i]));
    }
    i += 1;
    if first == 0 && (line[i] == b'x' || line[i] == b'X') {
        i += 1;
    }
    let mut value = first as u64;
    loop {
        let b = line[i];
        let d = HEX_VALUE[b as usize];
        if d == INVALID {
            if is_separator(b) || b == stop {
                break;
            }
            return Err(NumError::BadDigit(b));
        }
        if value >> 60 != 0 {
            return Err(NumError::Overflow);
        }
        value = (value << 4) | d as u64;
        i += 1;
    }
    *pos = i;
    Ok(value)
}

/// Scans a decimal number starting at `line[*pos]`, stopping at a separator or `stop`.
#[inline(always)]
pub(crate) fn scan_dec(line: &[u8], pos: &mut usize, stop: u8) -> Result<u64, NumError> {
    let mut i = *pos;
    let b = line[i];
    if !b.is_ascii_digit() {
        return Err(NumError::NotANumber(b));
    }
    let mut value: u64 = 0;
    loop {
        let b = line[i];
        if !b.is_ascii_digit() {
            if is_separator(b) || b == stop {
                break;
            }
            return Err(NumError::BadDigit(b));
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add((b - b'0') as u64))
            .ok_or(NumError::Overflow)?;
        i += 1;
    }
    *pos = i;
    Ok(value)
}

/// Advances past blanks and tabs (and a stray carriage return).
#[inline(always)]
pub(crate) fn skip_blanks(line: &[u8], pos: &mut usize) {
    while matches!(line[*pos], b' ' | b'\t' | b'\r') {
        *pos += 1;
    }
}

/// Advances to just past the next `\n`.
#[inline(always)]
pub(crate) fn skip_line(line: &[u8], pos: &mut usize) {
    while line[*pos] != b'\n' {
        *pos += 1;
    }
    *pos += 1;
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

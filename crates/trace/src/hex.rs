//! Hand-written number scanning for the text readers: a table lookup per digit and no
//! allocation, because `u64::from_str_radix` over a `&str` would need UTF-8 checks and
//! separate tokenising for every one of tens of millions of lines.

/// Digit value of every byte, or `INVALID` for non-hex bytes.
pub(crate) const HEX_VALUE: [u8; 256] = {
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

/// [`HEX_VALUE`] of a byte that is not a hex digit.
pub(crate) const INVALID: u8 = 0xff;

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
    let (value, digits) = match hex_run_swar(line, i) {
        Some(run) => run,
        None => hex_run_scalar(line, i),
    };
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

/// The value and length of the run of hex digits at `line[i..]`, one byte at a time.
/// The value keeps the last 16 digits of a longer run (the caller checks the rest).
#[inline(always)]
fn hex_run_scalar(line: &[u8], i: usize) -> (u64, usize) {
    // Iterating the slice (rather than indexing) keeps bounds checks out of the loop.
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
    (value, digits)
}

/// Ones in every byte.
const LOW: u64 = 0x0101_0101_0101_0101;
/// The high bit of every byte.
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `x` that lies strictly between `m` and `n` (both at most
/// 128); exact per byte, since masking to 7 bits keeps carries inside each byte.
#[inline(always)]
fn bytes_between(x: u64, m: u64, n: u64) -> u64 {
    let low7 = x & (LOW * 127);
    (LOW * (127 + n)).wrapping_sub(low7) & !x & (low7 + LOW * (127 - m)) & HIGH
}

/// The value of up to 8 hex digits in one little-endian word, and how many leading
/// bytes are hex digits.
#[inline(always)]
pub(crate) fn hex_word(v: u64) -> (u64, usize) {
    // Letters are tested case-folded (only 'A'..'F' fold into 'a'..'f'); digits are
    // tested unfolded, since folding would also turn control bytes 0x10..0x19 into digits.
    let folded = v | (LOW * 0x20);
    let hex = bytes_between(v, 0x2f, 0x3a) | bytes_between(folded, 0x60, 0x67);
    let n = ((!hex & HIGH).trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // Digit values: the low nibble, plus 9 for letters (bit 6 set).
    let nibbles = (v & (LOW * 0x0f)) + ((v >> 6) & LOW) * 9;
    // Move the n digits to the top bytes, the first (most significant) at byte 8 - n,
    // then merge neighbours: bytes into 16-bit, 16-bit into 32-bit, 32-bit into 64-bit.
    let w = nibbles << (8 * (8 - n));
    let w = ((w & 0x000f_000f_000f_000f) << 4) | ((w & 0x0f00_0f00_0f00_0f00) >> 8);
    let w = ((w & 0x0000_00ff_0000_00ff) << 8) | ((w & 0x00ff_0000_00ff_0000) >> 16);
    let w = ((w & 0xffff) << 16) | ((w >> 32) & 0xffff);
    (w, n)
}

/// [`hex_run_scalar`] eight bytes at a time; `None` near the end of `line` (fewer than
/// 16 bytes left) or for runs longer than 16 digits, which the scalar loop handles.
#[inline(always)]
fn hex_run_swar(line: &[u8], i: usize) -> Option<(u64, usize)> {
    let window: &[u8; 16] = line.get(i..i + 16)?.try_into().ok()?;
    // One-digit fields (sizes, din labels) are the most common: answer them directly.
    let d0 = HEX_VALUE[window[0] as usize];
    if d0 == INVALID {
        return Some((0, 0));
    }
    if HEX_VALUE[window[1] as usize] == INVALID {
        return Some((d0 as u64, 1));
    }
    let first = u64::from_le_bytes(window[..8].try_into().expect("8 bytes"));
    let (hi, n) = hex_word(first);
    // Eight-digit addresses are common too: skip the second word when the run ends.
    if n < 8 || HEX_VALUE[window[8] as usize] == INVALID {
        return Some((hi, n));
    }
    let second = u64::from_le_bytes(window[8..].try_into().expect("8 bytes"));
    let (lo, m) = hex_word(second);
    if m == 8 {
        return None;
    }
    Some(((hi << (4 * m)) | lo, 8 + m))
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

/// Steps past the one-letter access type `c` at `*pos` and the blanks after it; a
/// letter followed by anything but a blank is an unknown (longer) access type.
#[inline(always)]
pub(crate) fn end_access_type(
    buf: &[u8],
    pos: &mut usize,
    c: u8,
) -> Result<(), (&'static str, String)> {
    *pos += 1;
    if !matches!(buf[*pos], b' ' | b'\t') {
        return Err((
            "access type",
            format!(
                "unknown access type: {} follows '{}'",
                show(buf[*pos]),
                c as char
            ),
        ));
    }
    skip_blanks(buf, pos);
    Ok(())
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
    fn word_at_a_time_agrees_with_byte_at_a_time() {
        // A deterministic xorshift stream of hex-digit runs of every length and case,
        // with every kind of terminator.
        let alphabet = b"0123456789abcdefABCDEFxX ,\t\r\ngG/:`@\x10\x19\x96\xc6";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            let mut line = Vec::new();
            for _ in 0..24 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let k = (state >> 33) as usize;
                line.push(if k.is_multiple_of(4) {
                    alphabet[k % alphabet.len()]
                } else {
                    alphabet[k % 22]
                });
            }
            line.push(b'\n');
            for i in 0..line.len() {
                if let Some(fast) = hex_run_swar(&line, i) {
                    assert_eq!(
                        fast,
                        hex_run_scalar(&line, i),
                        "{:?} at {i}",
                        String::from_utf8_lossy(&line)
                    );
                }
            }
        }
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

//! The client's small private scratch heap (§5.3): Redis builds objects even for a GET
//! (the parsed command, the reply), which would need write access to the shared
//! segment; Redis_JMP attaches a per-client scratch heap to the client's address
//! space instead. Here it is a process-private segment attached to each of the
//! client's VAS handles, accessible only while switched in: the command is written
//! there in Redis's protocol (RESP), parsed there into its arguments, and the reply is
//! built there before the client copies it out and switches home.

/// A bump arena over the private segment, reset for every command.
pub struct Scratch {
    base: *mut u8,
    len: usize,
}

/// Where one argument of a parsed command lies in the scratch heap.
#[derive(Clone, Copy, Debug, Default)]
pub struct Arg {
    at: usize,
    len: usize,
}

impl Scratch {
    /// An arena over `[base, base + len)`.
    ///
    /// # Safety
    /// The range must be a mapping owned by the caller that is writable whenever the
    /// arena is used.
    pub unsafe fn new(base: *mut u8, len: usize) -> Scratch {
        Scratch { base, len }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the constructor's contract; used only while switched in.
        unsafe { std::slice::from_raw_parts_mut(self.base, self.len) }
    }

    /// Writes `argv` as a RESP array at the arena's start; returns its length, or
    /// `None` if it does not fit.
    pub fn encode(&mut self, argv: &[&[u8]]) -> Option<usize> {
        let need: usize = 16 + argv.iter().map(|a| a.len() + 16).sum::<usize>();
        if need > self.len {
            return None;
        }
        let buf = self.bytes();
        let mut at = put_header(buf, 0, b'*', argv.len());
        for a in argv {
            at = put_header(buf, at, b'$', a.len());
            buf[at..at + a.len()].copy_from_slice(a);
            buf[at + a.len()..at + a.len() + 2].copy_from_slice(b"\r\n");
            at += a.len() + 2;
        }
        Some(at)
    }

    /// Parses the RESP array of `n` bytes at the arena's start into at most `N`
    /// arguments (positions in the arena).
    pub fn parse<const N: usize>(&mut self, n: usize) -> Option<([Arg; N], usize)> {
        let buf = &self.bytes()[..n];
        let (count, mut at) = number(buf, 1)?;
        if buf.first() != Some(&b'*') || count > N {
            return None;
        }
        let mut out = [Arg::default(); N];
        for slot in out.iter_mut().take(count) {
            if buf.get(at) != Some(&b'$') {
                return None;
            }
            let (len, start) = number(buf, at + 1)?;
            *slot = Arg { at: start, len };
            at = start + len + 2;
        }
        (at == n).then_some((out, count))
    }

    /// The bytes of a parsed argument.
    pub fn arg(&mut self, a: Arg) -> &[u8] {
        &self.bytes()[a.at..a.at + a.len]
    }

    /// Copies arguments out of the arena (for the writer, whose transaction buffers
    /// its stores in the process's own memory anyway).
    pub fn arg_vec(&mut self, a: Arg) -> Vec<u8> {
        self.arg(a).to_vec()
    }

    /// [`Scratch::arg_vec`] into `out` (replacing its contents), which a writer keeps
    /// from one SET to the next so that copying allocates nothing.
    pub fn arg_into(&mut self, a: Arg, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(self.arg(a));
    }

    /// Builds a bulk-string reply (`$len\r\nvalue\r\n`, or `$-1\r\n` for none) after the
    /// command at offset `from`; returns the reply's range.
    pub fn reply(&mut self, from: usize, value: Option<&[u8]>) -> Option<(usize, usize)> {
        let v = value.unwrap_or(b"");
        if from + v.len() + 32 > self.len {
            return None;
        }
        let buf = self.bytes();
        let at = match value {
            None => {
                buf[from..from + 5].copy_from_slice(b"$-1\r\n");
                from + 5
            }
            Some(v) => {
                let at = put_header(buf, from, b'$', v.len());
                buf[at..at + v.len()].copy_from_slice(v);
                buf[at + v.len()..at + v.len() + 2].copy_from_slice(b"\r\n");
                at + v.len() + 2
            }
        };
        Some((from, at))
    }

    /// Decodes a bulk-string reply at `range` into `out`; false for the null reply.
    pub fn take_reply(&mut self, range: (usize, usize), out: &mut Vec<u8>) -> bool {
        let buf = &self.bytes()[range.0..range.1];
        out.clear();
        if buf.starts_with(b"$-1") {
            return false;
        }
        if let Some((len, start)) = number(buf, 1) {
            out.extend_from_slice(&buf[start..start + len]);
        }
        true
    }
}

/// Writes a RESP header at `at` — `mark` (`*` for an array, `$` for a bulk string),
/// `n` in decimal, CRLF — and returns the offset after it. The digits are stored one
/// by one where they go: counts and lengths are short, and formatting them elsewhere
/// first would make each copy a call to memcpy.
fn put_header(buf: &mut [u8], at: usize, mark: u8, n: usize) -> usize {
    buf[at] = mark;
    let end = put_decimal(buf, at + 1, n);
    buf[end..end + 2].copy_from_slice(b"\r\n");
    end + 2
}

/// Writes `n` in decimal at `at`; returns the offset after its last digit. A
/// command's count and most lengths have one or two digits.
fn put_decimal(buf: &mut [u8], at: usize, n: usize) -> usize {
    if n < 10 {
        buf[at] = b'0' + n as u8;
        return at + 1;
    }
    if n < 100 {
        buf[at] = b'0' + (n / 10) as u8;
        buf[at + 1] = b'0' + (n % 10) as u8;
        return at + 2;
    }
    let end = at + n.ilog10() as usize + 1;
    let mut v = n;
    for d in buf[at..end].iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    end
}

/// A decimal number at `at` ending in CRLF: the number and the offset after the CRLF.
fn number(buf: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut n = 0usize;
    let mut i = at;
    while let Some(&d) = buf.get(i) {
        if d == b'\r' {
            return (i > at && buf.get(i + 1) == Some(&b'\n')).then_some((n, i + 2));
        }
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(usize::from(d - b'0'))?;
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_round_trips_through_the_arena() {
        let mut mem = vec![0u8; 4096];
        // SAFETY: mem outlives s and is writable.
        let mut s = unsafe { Scratch::new(mem.as_mut_ptr(), mem.len()) };
        let n = s.encode(&[b"SET", b"key:1", b"\0\r\nx"]).unwrap();
        let (args, count) = s.parse::<3>(n).unwrap();
        assert_eq!(count, 3);
        assert_eq!(s.arg(args[0]), b"SET");
        assert_eq!(s.arg(args[2]), b"\0\r\nx");
        let r = s.reply(n, Some(b"v")).unwrap();
        let mut out = Vec::new();
        assert!(s.take_reply(r, &mut out));
        assert_eq!(out, b"v");
        let r = s.reply(n, None).unwrap();
        assert!(!s.take_reply(r, &mut out));
        assert!(s.parse::<3>(n - 1).is_none());
    }

    #[test]
    fn headers_spell_their_numbers_in_decimal() {
        let mut mem = vec![0u8; 16384];
        // SAFETY: mem outlives s and is writable.
        let mut s = unsafe { Scratch::new(mem.as_mut_ptr(), mem.len()) };
        let long = vec![b'v'; 12345];
        let n = s.encode(&[b"", b"k", &long]).unwrap();
        let (args, count) = s.parse::<3>(n).unwrap();
        assert_eq!(count, 3);
        assert_eq!(s.arg(args[2]), &long[..]);
        assert!(mem.starts_with(b"*3\r\n$0\r\n\r\n$1\r\nk\r\n$12345\r\nvvv"));
        for (n, text) in [
            (0, "0"),
            (9, "9"),
            (10, "10"),
            (99, "99"),
            (100, "100"),
            (1000, "1000"),
            (usize::MAX, &usize::MAX.to_string()[..]),
        ] {
            let mut b = [0u8; 24];
            let end = put_header(&mut b, 1, b'$', n);
            assert_eq!(&b[1..end], format!("${text}\r\n").as_bytes());
        }
    }
}

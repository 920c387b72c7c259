//! pmlab's binary trace format (version 1), laid out in `crates/trace/FORMAT.md`:
//! a 16-byte header (`PMLTRACE`, version u16, record length u16, flags u32), then
//! 16-byte little-endian records (addr u64, size u32, asid u16, kind u8, reserved u8).
//!
//! Fixed-size records keep decoding to a few loads per reference, which is what lets a
//! simulator consume well over 100 million references a second.

use std::io::{ErrorKind, Read, Write};

use crate::{DEFAULT_BATCH, Kind, Ref, RefSource, TraceError};

/// The eight bytes every binary trace starts with.
pub const BINARY_MAGIC: [u8; 8] = *b"PMLTRACE";
/// The format version this crate reads and writes.
pub const BINARY_VERSION: u16 = 1;
/// Bytes in the header.
pub const BINARY_HEADER_LEN: usize = 16;
/// Bytes in one record.
pub const BINARY_RECORD_LEN: usize = 16;

/// Records decoded per read from the underlying stream. 64 KiB stays in the level-two
/// cache between the kernel's copy and the decoding passes; a 1 MiB buffer measured
/// three times slower (80 vs 240 M refs/s) because every pass missed to memory.
const RECORDS_PER_READ: usize = 1 << 12;

/// The header of a version-1 trace.
fn header() -> [u8; BINARY_HEADER_LEN] {
    let mut h = [0u8; BINARY_HEADER_LEN];
    h[..8].copy_from_slice(&BINARY_MAGIC);
    h[8..10].copy_from_slice(&BINARY_VERSION.to_le_bytes());
    h[10..12].copy_from_slice(&(BINARY_RECORD_LEN as u16).to_le_bytes());
    // Bytes 12..16: flags, all zero in version 1.
    h
}

/// Encodes one record.
#[inline(always)]
fn encode(r: &Ref) -> [u8; BINARY_RECORD_LEN] {
    let mut b = [0u8; BINARY_RECORD_LEN];
    b[..8].copy_from_slice(&r.addr.to_le_bytes());
    b[8..12].copy_from_slice(&r.size.to_le_bytes());
    b[12..14].copy_from_slice(&r.asid.to_le_bytes());
    b[14] = r.kind as u8;
    b
}

/// The second half of a record (size, asid, kind, reserved) as one little-endian word.
#[inline(always)]
fn tail_word(rec: &[u8; BINARY_RECORD_LEN]) -> u64 {
    u64::from_le_bytes([
        rec[8], rec[9], rec[10], rec[11], rec[12], rec[13], rec[14], rec[15],
    ])
}

/// Whether a record's kind, size and reserved byte are acceptable. One comparison of
/// the top 16 bits checks the kind (at most 3) and the reserved byte (0) together.
#[inline(always)]
fn valid(rec: &[u8; BINARY_RECORD_LEN]) -> bool {
    let tail = tail_word(rec);
    tail >> 48 <= 3 && tail as u32 != 0
}

/// Decodes a record; the kind of an invalid record (which the caller rejects) is Misc.
#[inline(always)]
fn decode(rec: &[u8; BINARY_RECORD_LEN]) -> Ref {
    let kind = match rec[14] {
        0 => Kind::Read,
        1 => Kind::Write,
        2 => Kind::Instr,
        _ => Kind::Misc,
    };
    Ref {
        addr: u64::from_le_bytes([
            rec[0], rec[1], rec[2], rec[3], rec[4], rec[5], rec[6], rec[7],
        ]),
        size: u32::from_le_bytes([rec[8], rec[9], rec[10], rec[11]]),
        asid: u16::from_le_bytes([rec[12], rec[13]]),
        kind,
    }
}

fn binary_error(name: &str, offset: u64, field: &'static str, message: String) -> TraceError {
    TraceError::Binary {
        source_name: name.to_string(),
        offset,
        field,
        message,
    }
}

/// Checks a version-1 header, the first bytes of the trace (all of them if fewer than
/// [`BINARY_HEADER_LEN`]); `name` is used in errors.
pub(crate) fn check_header(h: &[u8], name: &str) -> Result<(), TraceError> {
    if h.len() < BINARY_HEADER_LEN {
        return Err(binary_error(
            name,
            h.len() as u64,
            "header",
            format!("truncated header: {} of {BINARY_HEADER_LEN} bytes", h.len()),
        ));
    }
    if h[..8] != BINARY_MAGIC {
        return Err(binary_error(
            name,
            0,
            "magic",
            "not a pmlab binary trace (magic is not PMLTRACE)".into(),
        ));
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != BINARY_VERSION {
        return Err(binary_error(
            name,
            8,
            "version",
            format!("unsupported version {version} (this reader knows 1)"),
        ));
    }
    let record_len = u16::from_le_bytes([h[10], h[11]]);
    if record_len as usize != BINARY_RECORD_LEN {
        return Err(binary_error(
            name,
            10,
            "record length",
            format!("record length {record_len}, expected 16"),
        ));
    }
    let flags = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    if flags != 0 {
        return Err(binary_error(
            name,
            12,
            "flags",
            format!("unknown flags 0x{flags:x}"),
        ));
    }
    Ok(())
}

/// Checks the records of `bytes` (whole records; `offset` is the stream offset of its
/// first byte, for errors), naming the first invalid one.
///
/// The check is one pass without early exits, so that it runs without per-record
/// branches; only a batch holding an invalid record is searched again for the culprit.
#[inline]
pub(crate) fn check_records(bytes: &[u8], offset: u64, name: &str) -> Result<(), TraceError> {
    let (records, rest) = bytes.as_chunks::<BINARY_RECORD_LEN>();
    debug_assert!(rest.is_empty(), "whole records only");
    if records.iter().fold(true, |ok, rec| ok & valid(rec)) {
        return Ok(());
    }
    let bad = records
        .iter()
        .position(|rec| !valid(rec))
        .expect("an invalid record");
    Err(record_error(
        &records[bad],
        offset + (bad * BINARY_RECORD_LEN) as u64,
        name,
    ))
}

/// Appends the records of `bytes` (as for [`check_records`]) to `out`, or names the
/// first invalid one. Checking and decoding are separate passes over data that stays in
/// the level-1 cache, so that the decoding loop has no error exits either.
#[inline]
pub(crate) fn decode_records(
    bytes: &[u8],
    offset: u64,
    out: &mut Vec<Ref>,
    name: &str,
) -> Result<(), TraceError> {
    check_records(bytes, offset, name)?;
    out.extend(bytes.as_chunks::<BINARY_RECORD_LEN>().0.iter().map(decode));
    Ok(())
}

/// The error for an invalid record at stream offset `offset`.
fn record_error(rec: &[u8; BINARY_RECORD_LEN], offset: u64, name: &str) -> TraceError {
    if rec[14] > 3 {
        binary_error(
            name,
            offset + 14,
            "kind",
            format!("unknown kind {} (expected 0..3)", rec[14]),
        )
    } else if rec[8..12] == [0; 4] {
        binary_error(
            name,
            offset + 8,
            "size",
            "size 0 (a reference covers at least one byte)".into(),
        )
    } else {
        binary_error(
            name,
            offset + 15,
            "reserved",
            format!("reserved byte is {}, expected 0", rec[15]),
        )
    }
}

/// Reads the binary format.
pub struct BinaryReader<R> {
    inner: R,
    name: String,
    buf: Vec<u8>,
    /// `buf[pos..filled]` is undecoded data.
    pos: usize,
    filled: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    header_checked: bool,
    eof: bool,
}

impl<R: Read> BinaryReader<R> {
    /// A reader over `inner` (the header is checked on the first batch); `name` is used
    /// in errors.
    pub fn new(inner: R, name: impl Into<String>) -> Self {
        BinaryReader {
            inner,
            name: name.into(),
            buf: vec![0; RECORDS_PER_READ * BINARY_RECORD_LEN],
            pos: 0,
            filled: 0,
            base: 0,
            header_checked: false,
            eof: false,
        }
    }

    fn error(&self, offset: u64, field: &'static str, message: String) -> TraceError {
        TraceError::Binary {
            source_name: self.name.clone(),
            offset,
            field,
            message,
        }
    }

    /// Reads until at least `want` undecoded bytes are buffered or the input ends.
    fn fill(&mut self, want: usize) -> Result<(), TraceError> {
        if self.filled - self.pos >= want || self.eof {
            return Ok(());
        }
        self.buf.copy_within(self.pos..self.filled, 0);
        self.base += self.pos as u64;
        self.filled -= self.pos;
        self.pos = 0;
        while self.filled < want.max(BINARY_RECORD_LEN) && !self.eof {
            match self.inner.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(error) => {
                    // Where in the (decompressed) stream reading failed.
                    let at = self.base + self.filled as u64;
                    return Err(TraceError::Io {
                        source_name: format!("{}: byte offset {at}", self.name),
                        error,
                    });
                }
            }
        }
        Ok(())
    }

    fn check_header(&mut self) -> Result<(), TraceError> {
        self.fill(BINARY_HEADER_LEN)?;
        check_header(&self.buf[self.pos..self.filled], &self.name)?;
        self.pos += BINARY_HEADER_LEN;
        self.header_checked = true;
        Ok(())
    }
}

impl<R: Read> RefSource for BinaryReader<R> {
    fn next_batch(&mut self, out: &mut Vec<Ref>) -> Result<usize, TraceError> {
        out.clear();
        if !self.header_checked {
            self.check_header()?;
        }
        if out.capacity() == 0 {
            out.reserve(DEFAULT_BATCH);
        }
        let cap = out.capacity();
        while out.len() < cap {
            self.fill(BINARY_RECORD_LEN)?;
            let avail = self.filled - self.pos;
            if avail < BINARY_RECORD_LEN {
                if avail > 0 {
                    return Err(self.error(
                        self.base + self.pos as u64,
                        "record",
                        format!("truncated record: {avail} of {BINARY_RECORD_LEN} bytes"),
                    ));
                }
                break;
            }
            let n = (avail / BINARY_RECORD_LEN).min(cap - out.len());
            let bytes = &self.buf[self.pos..self.pos + n * BINARY_RECORD_LEN];
            decode_records(bytes, self.base + self.pos as u64, out, &self.name)?;
            self.pos += n * BINARY_RECORD_LEN;
        }
        Ok(out.len())
    }
}

/// Writes the binary format: the header at creation, then one record per reference.
pub struct BinaryWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> BinaryWriter<W> {
    /// Writes the header into `inner` and returns the writer.
    pub fn new(mut inner: W) -> std::io::Result<Self> {
        inner.write_all(&header())?;
        Ok(BinaryWriter {
            inner,
            buf: Vec::with_capacity(RECORDS_PER_READ * BINARY_RECORD_LEN),
        })
    }

    /// Writes `refs`. Sizes of 0 are written as given; readers reject them.
    pub fn write_refs(&mut self, refs: &[Ref]) -> std::io::Result<()> {
        for r in refs {
            self.buf.extend_from_slice(&encode(r));
            if self.buf.len() == self.buf.capacity() {
                self.inner.write_all(&self.buf)?;
                self.buf.clear();
            }
        }
        Ok(())
    }

    /// Flushes buffered records and returns the inner writer.
    pub fn into_inner(mut self) -> std::io::Result<W> {
        self.inner.write_all(&self.buf)?;
        self.buf.clear();
        self.inner.flush()?;
        Ok(self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_all;

    fn sample() -> Vec<Ref> {
        vec![
            Ref {
                addr: 0x1234_5678_9abc,
                size: 8,
                kind: Kind::Read,
                asid: 3,
            },
            Ref {
                addr: u64::MAX,
                size: u32::MAX,
                kind: Kind::Misc,
                asid: u16::MAX,
            },
            Ref {
                addr: 0,
                size: 1,
                kind: Kind::Instr,
                asid: 0,
            },
        ]
    }

    fn write(refs: &[Ref]) -> Vec<u8> {
        let mut w = BinaryWriter::new(Vec::new()).unwrap();
        w.write_refs(refs).unwrap();
        w.into_inner().unwrap()
    }

    #[test]
    fn layout_is_as_documented() {
        let bytes = write(&sample()[..1]);
        assert_eq!(bytes.len(), 32);
        assert_eq!(&bytes[..16], b"PMLTRACE\x01\x00\x10\x00\x00\x00\x00\x00");
        assert_eq!(
            &bytes[16..],
            &[
                0xbc, 0x9a, 0x78, 0x56, 0x34, 0x12, 0, 0, 8, 0, 0, 0, 3, 0, 0, 0
            ]
        );
    }

    #[test]
    fn round_trips() {
        let bytes = write(&sample());
        assert_eq!(
            read_all(&mut BinaryReader::new(&bytes[..], "b")).unwrap(),
            sample()
        );
    }

    #[test]
    fn truncated_and_corrupt_input_is_located() {
        let bytes = write(&sample());
        let e = read_all(&mut BinaryReader::new(&bytes[..bytes.len() - 3], "b")).unwrap_err();
        assert!(
            matches!(
                e,
                TraceError::Binary {
                    offset: 48,
                    field: "record",
                    ..
                }
            ),
            "{e}"
        );
        let mut bad = bytes.clone();
        bad[16 + 16 + 14] = 9;
        let e = read_all(&mut BinaryReader::new(&bad[..], "b")).unwrap_err();
        assert!(
            matches!(
                e,
                TraceError::Binary {
                    offset: 46,
                    field: "kind",
                    ..
                }
            ),
            "{e}"
        );
        let mut bad = bytes.clone();
        bad[16 + 8..16 + 12].fill(0);
        let e = read_all(&mut BinaryReader::new(&bad[..], "b")).unwrap_err();
        assert!(
            matches!(
                e,
                TraceError::Binary {
                    offset: 24,
                    field: "size",
                    ..
                }
            ),
            "{e}"
        );
        let e = read_all(&mut BinaryReader::new(&bytes[..10], "b")).unwrap_err();
        assert!(
            matches!(
                e,
                TraceError::Binary {
                    field: "header",
                    ..
                }
            ),
            "{e}"
        );
        let mut bad = bytes.clone();
        bad[8] = 2;
        let e = read_all(&mut BinaryReader::new(&bad[..], "b")).unwrap_err();
        assert!(
            matches!(
                e,
                TraceError::Binary {
                    offset: 8,
                    field: "version",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn empty_trace_has_only_a_header() {
        let bytes = write(&[]);
        assert!(
            read_all(&mut BinaryReader::new(&bytes[..], "b"))
                .unwrap()
                .is_empty()
        );
    }
}

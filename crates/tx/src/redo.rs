//! Redo logging: writes are buffered, logged, committed with one checksummed log
//! flush, then applied in place.
//!
//! # Log layout (at `base`, which must be line-aligned)
//!
//! | offset | size | field          |
//! |-------:|-----:|----------------|
//! |      0 |    8 | `magic` `PMREDO02` (`PMREDO01`: the previous format) |
//! |      8 |    8 | `seq`: transaction number |
//! |     16 |    8 | `body_len`: bytes of records |
//! |     24 |    8 | `records`: number of records |
//! |     32 |    4 | `crc`: checksum of bytes 8..32 and the body (see `checksum.rs`: not a CRC) |
//! |     64 |    … | records: `addr` u64, `len` u64, `len` data bytes padded to 8 |
//!
//! The two formats differ only in the checksum: `PMREDO02` logs carry the four-lane
//! one, `PMREDO01` logs the single chain. Commits write `PMREDO02`; a log still in
//! `PMREDO01` (a store or volume last written by the earlier code) is read and
//! recovered with the checksum it was written with.
//!
//! # Commit: two fences
//!
//! 1. Write the records and the header, flush their lines, **fence**. The checksum
//!    covers header and body, so the commit mark is the header itself: a log whose
//!    lines did not all reach memory fails its checksum and is ignored. This is what
//!    saves the separate "commit record" fence of a classic redo log (the torn-write
//!    detection of Mnemosyne-style logs, done with a checksum).
//! 2. Apply the records in place, flush those lines, **fence**.
//!
//! The log is not cleared afterwards (that would be a third fence): recovery replays
//! the last valid log, which is idempotent as long as transactional data is written
//! only through transactions. A new commit overwrites the log; a crash while it does
//! leaves a log that fails its checksum, and the previous transaction was already
//! applied durably by its own second fence.
//!
//! Each step has a deliberately broken variant ([`Fault::RedoSkipLogFence`],
//! [`Fault::RedoSkipApplyFence`], [`Fault::RedoHeaderOnlyChecksum`]) that the crash
//! tests, here and in the file system that commits its metadata through this log,
//! must catch.

use pmlab_spine::{Addr, LINE, Memory};

use crate::codec::{get_u32, get_u64, pad8, put_u32, put_u64};
use crate::error::TxError;
use crate::fault::{Fault, FaultPlan};
use crate::lines::LineSet;

/// The magic of a redo log header as commits write it.
pub const REDO_MAGIC: u64 = u64::from_le_bytes(*b"PMREDO02");
/// The magic of the previous format, whose checksum is the single chain: still read
/// and recovered, never written.
pub const REDO_MAGIC_V1: u64 = u64::from_le_bytes(*b"PMREDO01");

/// Whether `magic` names a redo log this code reads (either format).
pub fn is_redo_magic(magic: u64) -> bool {
    magic == REDO_MAGIC || magic == REDO_MAGIC_V1
}
/// Bytes of the header line.
pub const REDO_HEADER: u64 = LINE;
const RECORD_HEAD: u64 = 16;

/// One logged write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedoRecord {
    /// Where the data goes.
    pub addr: Addr,
    /// The bytes to store.
    pub data: Vec<u8>,
}

/// Why a redo log image was not accepted (recovery then ignores it: the transaction
/// never committed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RedoDecodeError {
    /// The first 8 bytes are neither [`REDO_MAGIC`] nor [`REDO_MAGIC_V1`].
    #[error("byte offset 0, field `magic`: not a redo log")]
    Magic,
    /// The header or body ends early.
    #[error("byte offset {offset}, field `{field}`: truncated")]
    Truncated {
        /// Offset from the log base.
        offset: u64,
        /// The field that is cut off.
        field: &'static str,
    },
    /// The checksum does not match: a torn or corrupted log.
    #[error("byte offset 32, field `crc`: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// Stored value.
        stored: u32,
        /// Computed value.
        computed: u32,
    },
    /// The records do not add up to `body_len`.
    #[error("byte offset {offset}, field `{field}`: {problem}")]
    Malformed {
        /// Offset from the log base.
        offset: u64,
        /// The field.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
}

/// A decoded, checksum-valid redo log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedoImage {
    /// Transaction number.
    pub seq: u64,
    /// The writes, in order.
    pub records: Vec<RedoRecord>,
}

/// Bytes one record of `data_len` bytes takes in the log: its 16-byte head (`addr`,
/// `len`) and the data padded to 8. A log of records `r` needs
/// [`REDO_HEADER`] + the sum of `redo_record_len(r.len())` bytes.
pub fn redo_record_len(data_len: u64) -> u64 {
    RECORD_HEAD + pad8(data_len)
}

/// Encodes a log: the 64-byte header followed by the body.
pub fn encode_redo(seq: u64, records: &[RedoRecord]) -> Vec<u8> {
    let records = || records.iter().map(|r| (r.addr, r.data.as_slice()));
    let mut b = vec![0u8; log_len(records()) as usize];
    encode_redo_in(&mut b, seq, records(), FaultPlan::CORRECT);
    b
}

/// Bytes the log of `records` takes, header included.
fn log_len<'d>(records: impl Iterator<Item = (Addr, &'d [u8])>) -> u64 {
    REDO_HEADER
        + records
            .map(|(_, data)| redo_record_len(data.len() as u64))
            .sum::<u64>()
}

/// Encodes a log of `records` into `out`, which is exactly [`log_len`] of them long,
/// writing every byte of it (padding included), so that `out` may be the log area
/// itself, holding an older log, as well as a fresh buffer.
fn encode_redo_in<'d>(
    out: &mut [u8],
    seq: u64,
    records: impl Iterator<Item = (Addr, &'d [u8])>,
    faults: FaultPlan,
) {
    let (head, body) = out.split_at_mut(REDO_HEADER as usize);
    let mut o = 0usize;
    let mut count = 0u64;
    for (addr, data) in records {
        let rec = &mut body[o..o + redo_record_len(data.len() as u64) as usize];
        let (fields, payload) = rec.split_at_mut(RECORD_HEAD as usize);
        fields[..8].copy_from_slice(&addr.to_le_bytes());
        fields[8..].copy_from_slice(&(data.len() as u64).to_le_bytes());
        // The padding is under 8 bytes: zeroing the payload's last word and copying
        // the data over it costs one store instead of a fill of a length unknown here.
        if let Some(last) = payload.len().checked_sub(8) {
            payload[last..].fill(0);
        }
        payload[..data.len()].copy_from_slice(data);
        o += rec.len();
        count += 1;
    }
    assert_eq!(
        o,
        body.len(),
        "the log's length was computed from other records"
    );
    encode_header(head, seq, body, count, faults);
}

/// Writes into `head` (the header line, every byte of it) the header of a log whose
/// body, of `count` records, is `body`.
fn encode_header(head: &mut [u8], seq: u64, body: &[u8], count: u64, faults: FaultPlan) {
    put_u64(head, 0, REDO_MAGIC);
    put_u64(head, 8, seq);
    put_u64(head, 16, body.len() as u64);
    put_u64(head, 24, count);
    let crc = redo_crc(REDO_MAGIC, &head[8..32], body, faults);
    put_u32(head, 32, crc);
    // A fixed-size copy (stores), where a fill of the slice's rest would call memset.
    head[36..REDO_HEADER as usize].copy_from_slice(&[0u8; REDO_HEADER as usize - 36]);
}

/// Not a CRC-32: records often hold CRC-sealed data, which a CRC cannot tell apart
/// (see [`crate::checksum`]). The version of the checksum is the one `magic` names.
fn redo_crc(magic: u64, fields: &[u8], body: &[u8], faults: FaultPlan) -> u32 {
    let sum = if magic == REDO_MAGIC_V1 {
        crate::checksum::log_checksum
    } else {
        crate::checksum::log_checksum_lanes
    };
    if faults.has(Fault::RedoHeaderOnlyChecksum) {
        return sum(&[fields]);
    }
    sum(&[fields, body])
}

/// The body length a header announces, if the header is readable (so that a reader
/// knows how many bytes to fetch before calling [`decode_redo`]).
pub fn redo_body_len(header: &[u8]) -> Option<u64> {
    get_u64(header, 16)
}

/// Decodes a log image (header + body). Never panics, whatever the bytes.
pub fn decode_redo(b: &[u8]) -> Result<RedoImage, RedoDecodeError> {
    decode_redo_with(b, FaultPlan::CORRECT)
}

/// [`decode_redo`] checking the checksum as a log running `faults` computes it (a log
/// written under [`Fault::RedoHeaderOnlyChecksum`] is read back the same broken way, as
/// that broken recovery would).
pub fn decode_redo_with(b: &[u8], faults: FaultPlan) -> Result<RedoImage, RedoDecodeError> {
    let trunc = |offset, field| RedoDecodeError::Truncated { offset, field };
    let magic = get_u64(b, 0).ok_or(trunc(0, "magic"))?;
    if !is_redo_magic(magic) {
        return Err(RedoDecodeError::Magic);
    }
    let seq = get_u64(b, 8).ok_or(trunc(8, "seq"))?;
    let body_len = get_u64(b, 16).ok_or(trunc(16, "body_len"))?;
    let count = get_u64(b, 24).ok_or(trunc(24, "records"))?;
    let stored = get_u32(b, 32).ok_or(trunc(32, "crc"))?;
    let body_end = REDO_HEADER
        .checked_add(body_len)
        .filter(|&e| e <= b.len() as u64);
    let body_end = body_end.ok_or(trunc(REDO_HEADER, "body"))? as usize;
    let body = &b[REDO_HEADER as usize..body_end];
    let computed = redo_crc(magic, &b[8..32], body, faults);
    if computed != stored {
        return Err(RedoDecodeError::Checksum { stored, computed });
    }
    let mut records = Vec::new();
    let mut o = 0usize;
    while o < body.len() {
        let at = REDO_HEADER + o as u64;
        let addr = get_u64(body, o).ok_or(trunc(at, "addr"))?;
        let len = get_u64(body, o + 8).ok_or(trunc(at + 8, "len"))?;
        let data_end = (o as u64 + RECORD_HEAD)
            .checked_add(len)
            .filter(|&e| e <= body.len() as u64);
        let data_end = data_end.ok_or(trunc(at + 16, "data"))? as usize;
        records.push(RedoRecord {
            addr,
            data: body[o + 16..data_end].to_vec(),
        });
        o = (o as u64 + RECORD_HEAD + pad8(len)) as usize;
    }
    if records.len() as u64 != count || o != body.len() {
        return Err(RedoDecodeError::Malformed {
            offset: 24,
            field: "records",
            problem: format!(
                "header says {count} records, the body holds {}",
                records.len()
            ),
        });
    }
    Ok(RedoImage { seq, records })
}

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedoRecovery {
    /// The transaction number of the replayed log, if one was valid.
    pub replayed_seq: Option<u64>,
    /// Records written back in place.
    pub replayed_records: usize,
}

/// A redo log area in persistent memory: the handle transactions begin from.
#[derive(Clone, Debug)]
pub struct RedoLog {
    base: Addr,
    len: u64,
    next_seq: u64,
    faults: FaultPlan,
}

impl RedoLog {
    /// Formats `[base, base + len)` as an empty log (one persist: flush + fence).
    pub fn format<M: Memory + ?Sized>(
        mem: &mut M,
        base: Addr,
        len: u64,
    ) -> Result<RedoLog, TxError> {
        crate::lines::check_log_area("redo log", mem, base, len)?;
        let image = encode_redo(0, &[]);
        mem.write(base, &image)?;
        mem.persist(base, REDO_HEADER)?;
        Ok(RedoLog {
            base,
            len,
            next_seq: 1,
            faults: FaultPlan::CORRECT,
        })
    }

    /// Opens a formatted log and recovers: a checksum-valid log is replayed (again —
    /// replay is idempotent) and made durable; anything else is ignored.
    pub fn open<M: Memory + ?Sized>(
        mem: &mut M,
        base: Addr,
        len: u64,
    ) -> Result<(RedoLog, RedoRecovery), TxError> {
        Self::open_with_faults(mem, base, len, FaultPlan::CORRECT)
    }

    /// [`RedoLog::open`] reading the log as it is written under `faults`, and keeping
    /// that plan for later commits (crash tests of a broken variant recover with it).
    pub fn open_with_faults<M: Memory + ?Sized>(
        mem: &mut M,
        base: Addr,
        len: u64,
        faults: FaultPlan,
    ) -> Result<(RedoLog, RedoRecovery), TxError> {
        crate::lines::check_log_area("redo log", mem, base, len)?;
        let mut header = vec![0u8; REDO_HEADER as usize];
        mem.read(base, &mut header)?;
        if !get_u64(&header, 0).is_some_and(is_redo_magic) {
            return Err(TxError::BadHeader {
                structure: "redo log",
                addr: base,
                offset: 0,
                field: "magic",
                problem: format!(
                    "{:#018x} is neither {REDO_MAGIC:#018x} nor {REDO_MAGIC_V1:#018x}",
                    get_u64(&header, 0).unwrap_or(0)
                ),
            });
        }
        let seq = get_u64(&header, 8).unwrap_or(0);
        let mut rec = RedoRecovery::default();
        let body_len = redo_body_len(&header).unwrap_or(u64::MAX);
        if body_len <= len - REDO_HEADER {
            let mut image = vec![0u8; (REDO_HEADER + body_len) as usize];
            mem.read(base, &mut image)?;
            if let Ok(log) = decode_redo_with(&image, faults) {
                let mut lines = LineSet::default();
                for r in &log.records {
                    mem.write(r.addr, &r.data)?;
                    lines.add(r.addr, r.data.len() as u64);
                }
                if !lines.is_empty() {
                    lines.flush(mem)?;
                    mem.fence();
                }
                rec.replayed_seq = Some(log.seq);
                rec.replayed_records = log.records.len();
            }
        }
        let log = RedoLog {
            base,
            len,
            next_seq: seq.wrapping_add(1),
            faults,
        };
        Ok((log, rec))
    }

    /// A handle on a log already formatted at `[base, base + len)`, whose next
    /// transaction is `next_seq`, without reading or recovering it (the protocol
    /// objects validate and recover themselves).
    pub(crate) fn attached(base: Addr, len: u64, next_seq: u64) -> RedoLog {
        RedoLog {
            base,
            len,
            next_seq,
            faults: FaultPlan::CORRECT,
        }
    }

    /// The fault plan the log runs with.
    pub fn faults(&self) -> FaultPlan {
        self.faults
    }

    /// Runs with `faults` (a deliberately broken plan only in crash tests).
    pub fn with_faults(mut self, faults: FaultPlan) -> RedoLog {
        self.faults = faults;
        self
    }

    /// Bytes available for records.
    pub fn capacity(&self) -> u64 {
        self.len - REDO_HEADER
    }

    /// The first byte of the log area.
    pub fn base(&self) -> Addr {
        self.base
    }

    /// Bytes of the log area.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Never true: a log area holds at least a header line and a record line.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The number the next committed transaction will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The first half of a commit: encodes `records` and writes the log (straight
    /// into the log area where the memory allows it, else through `buf`, reused across
    /// commits), flushes its lines and fences (unless the fault plan skips that fence).
    /// The transaction is durable afterwards. Returns the log's length in bytes.
    pub(crate) fn commit_records<'d, M, I>(
        &mut self,
        mem: &mut M,
        buf: &mut Vec<u8>,
        records: impl Fn() -> I,
    ) -> Result<u64, TxError>
    where
        M: Memory + ?Sized,
        I: Iterator<Item = (Addr, &'d [u8])>,
    {
        let len = self.check_fits(log_len(records()))?;
        if let Some(area) = mem.write_in_place(self.base, len)? {
            encode_redo_in(area, self.next_seq, records(), self.faults);
        } else {
            buf.clear();
            buf.resize(len as usize, 0);
            encode_redo_in(buf, self.next_seq, records(), self.faults);
            mem.write(self.base, buf)?;
        }
        self.persist_log(mem, len)
    }

    /// [`RedoLog::commit_records`] of a body already encoded (`count` records, each
    /// as [`RedoImage`] decodes them): the log is its header and a copy of `body`.
    pub(crate) fn commit_body<M: Memory + ?Sized>(
        &mut self,
        mem: &mut M,
        buf: &mut Vec<u8>,
        body: &[u8],
        count: u64,
    ) -> Result<u64, TxError> {
        let len = self.check_fits(REDO_HEADER + body.len() as u64)?;
        let header = REDO_HEADER as usize;
        if let Some(area) = mem.write_in_place(self.base, len)? {
            let (head, rest) = area.split_at_mut(header);
            rest.copy_from_slice(body);
            encode_header(head, self.next_seq, body, count, self.faults);
        } else {
            buf.clear();
            buf.resize(header, 0);
            buf.extend_from_slice(body);
            encode_header(&mut buf[..header], self.next_seq, body, count, self.faults);
            mem.write(self.base, buf)?;
        }
        self.persist_log(mem, len)
    }

    /// `len`, the bytes of a log to write, if they fit the area.
    fn check_fits(&self, len: u64) -> Result<u64, TxError> {
        if len > self.len {
            return Err(TxError::LogFull {
                kind: "redo",
                needed: len - REDO_HEADER,
                capacity: self.capacity(),
            });
        }
        Ok(len)
    }

    /// The end of a commit's first half, once the log's `len` bytes are written:
    /// flush, fence, and the next transaction's number.
    fn persist_log<M: Memory + ?Sized>(&mut self, mem: &mut M, len: u64) -> Result<u64, TxError> {
        if !self.faults.has(Fault::RedoSkipLogFlush) {
            mem.flush(self.base, len, pmlab_spine::FlushKind::Clwb)?;
        }
        if !self.faults.has(Fault::RedoSkipLogFence) {
            mem.fence();
        }
        self.next_seq = self.next_seq.wrapping_add(1);
        Ok(len)
    }

    /// The second half of a commit: writes `records` in place, flushes their lines
    /// (`flush_lines`, given by the caller, who knows them best) and fences (unless the
    /// fault plan skips that fence).
    pub(crate) fn apply_records<'d, M, I>(
        &self,
        mem: &mut M,
        records: I,
        flush_lines: impl FnOnce(&mut M) -> Result<(), pmlab_spine::SpineError>,
    ) -> Result<(), TxError>
    where
        M: Memory + ?Sized,
        I: Iterator<Item = (Addr, &'d [u8])>,
    {
        for (addr, data) in records {
            mem.write(addr, data)?;
        }
        flush_lines(mem)?;
        if !self.faults.has(Fault::RedoSkipApplyFence) {
            mem.fence();
        }
        Ok(())
    }

    /// Commits `writes` as one transaction, with the two fences of
    /// [`RedoTx::commit`], straight from the caller's bytes: no copy of them and no
    /// allocation (`buf` is reused across commits, and needed only where the memory
    /// cannot be written in place). For a caller that knows all its writes at once, as
    /// a file system's metadata commit does with the lines its pages changed.
    /// `writes()` must yield the same writes each time it is called; the lines they
    /// touch are flushed once each if the writes come in ascending, disjoint order
    /// (else through a set of lines). No writes, no commit.
    pub fn commit_writes<'d, M, I>(
        &mut self,
        mem: &mut M,
        buf: &mut Vec<u8>,
        writes: impl Fn() -> I,
    ) -> Result<(), TxError>
    where
        M: Memory + ?Sized,
        I: Iterator<Item = (Addr, &'d [u8])>,
    {
        if writes().next().is_none() {
            return Ok(());
        }
        for (addr, data) in writes() {
            pmlab_spine::check_bounds(addr, data.len() as u64, mem.size())?;
        }
        self.commit_records(mem, buf, &writes)?;
        self.apply_records(mem, writes(), |m| crate::lines::flush_writes(m, &writes))
    }

    /// Begins a transaction; nothing is written until commit.
    pub fn begin<'a, M: Memory + ?Sized>(&'a mut self, mem: &'a mut M) -> RedoTx<'a, M> {
        RedoTx {
            log: self,
            mem,
            writes: Vec::new(),
            log_bytes: 0,
        }
    }
}

/// A redo transaction: reads see its own writes; commit makes all of them durable
/// atomically with two fences; dropping it or [`RedoTx::abort`] discards them.
pub struct RedoTx<'a, M: Memory + ?Sized> {
    log: &'a mut RedoLog,
    mem: &'a mut M,
    writes: Vec<RedoRecord>,
    log_bytes: u64,
}

impl<M: Memory + ?Sized> RedoTx<'_, M> {
    /// Reads `buf.len()` bytes at `addr` as this transaction sees them.
    pub fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        self.mem.read(addr, buf)?;
        let end = addr + buf.len() as u64;
        for w in &self.writes {
            let (ws, we) = (w.addr, w.addr + w.data.len() as u64);
            let (s, e) = (ws.max(addr), we.min(end));
            if s < e {
                buf[(s - addr) as usize..(e - addr) as usize]
                    .copy_from_slice(&w.data[(s - ws) as usize..(e - ws) as usize]);
            }
        }
        Ok(())
    }

    /// Reads a little-endian `u64` as this transaction sees it.
    pub fn read_u64(&mut self, addr: Addr) -> Result<u64, TxError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Buffers a write of `data` at `addr`; refuses it if the log would overflow.
    pub fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        pmlab_spine::check_bounds(addr, data.len() as u64, self.mem.size())?;
        let needed = self.log_bytes + RECORD_HEAD + pad8(data.len() as u64);
        if needed > self.log.capacity() {
            return Err(TxError::LogFull {
                kind: "redo",
                needed,
                capacity: self.log.capacity(),
            });
        }
        self.log_bytes = needed;
        self.writes.push(RedoRecord {
            addr,
            data: data.to_vec(),
        });
        Ok(())
    }

    /// Buffers a little-endian `u64` write.
    pub fn write_u64(&mut self, addr: Addr, value: u64) -> Result<(), TxError> {
        self.write(addr, &value.to_le_bytes())
    }

    /// Makes every write durable, atomically: log + fence, apply + fence. A
    /// transaction without writes costs nothing.
    pub fn commit(self) -> Result<(), TxError> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        let records = || self.writes.iter().map(|w| (w.addr, w.data.as_slice()));
        self.log.commit_records(self.mem, &mut buf, records)?;
        let mut data_lines = LineSet::default();
        for w in &self.writes {
            data_lines.add(w.addr, w.data.len() as u64);
        }
        self.log
            .apply_records(self.mem, records(), |m| data_lines.flush(m))
    }

    /// Discards every write; nothing persistent changes.
    pub fn abort(self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Area, Protocol};
    use pmlab_spine::VecMemory;

    /// `records` as the previous format wrote them: magic `PMREDO01`, the single-chain
    /// checksum.
    fn encode_v1(seq: u64, records: &[RedoRecord]) -> Vec<u8> {
        let mut b = encode_redo(seq, records);
        put_u64(&mut b, 0, REDO_MAGIC_V1);
        let crc = crate::checksum::log_checksum(&[&b[8..32], &b[REDO_HEADER as usize..]]);
        put_u32(&mut b, 32, crc);
        b
    }

    fn records() -> Vec<RedoRecord> {
        vec![
            RedoRecord {
                addr: 4096,
                data: (1..=13).collect(),
            },
            RedoRecord {
                addr: 8000,
                data: vec![0xab; 70],
            },
        ]
    }

    #[test]
    fn commits_write_the_new_format_and_both_decode() {
        let new = encode_redo(5, &records());
        assert_eq!(get_u64(&new, 0), Some(REDO_MAGIC));
        let old = encode_v1(5, &records());
        for image in [&new, &old] {
            let d = decode_redo(image).unwrap();
            assert_eq!((d.seq, d.records), (5, records()));
        }
        // A log is checked with its own version's checksum: the other's does not pass.
        let mut swapped = old.clone();
        put_u64(&mut swapped, 0, REDO_MAGIC);
        assert!(matches!(
            decode_redo(&swapped),
            Err(RedoDecodeError::Checksum { .. })
        ));
        let mut swapped = new.clone();
        put_u64(&mut swapped, 0, REDO_MAGIC_V1);
        assert!(matches!(
            decode_redo(&swapped),
            Err(RedoDecodeError::Checksum { .. })
        ));
    }

    #[test]
    fn a_committed_log_of_the_previous_format_is_replayed() {
        let (log, data) = (Area::new(0, 2048), Area::new(4096, 8192));
        // RedoLog::open: the file system's path.
        let mut mem = VecMemory::new(16384);
        mem.write(0, &encode_v1(41, &records())).unwrap();
        let (mut handle, rec) = RedoLog::open(&mut mem, log.base, log.len).unwrap();
        assert_eq!((rec.replayed_seq, rec.replayed_records), (Some(41), 2));
        assert_eq!(&mem.bytes()[4096..4109], &records()[0].data[..]);
        assert_eq!(handle.next_seq(), 42);
        // The next commit writes the new format over it.
        let mut tx = handle.begin(&mut mem);
        tx.write(12000, &[9; 8]).unwrap();
        tx.commit().unwrap();
        assert_eq!(mem.read_u64(0).unwrap(), REDO_MAGIC);

        // RedoProtocol: the key-value store's path.
        let mut mem = VecMemory::new(16384);
        mem.write(0, &encode_v1(41, &records())).unwrap();
        let mut p = crate::RedoProtocol::attach(mem, log, data).unwrap();
        let rec = p.recover().unwrap();
        assert_eq!(rec.entries, 2, "{}", rec.note);
        assert_eq!(&p.memory().bytes()[8000..8070], &[0xab; 70][..]);
        p.begin().unwrap();
        p.write(12000, &[9; 8]).unwrap();
        p.commit().unwrap();
        let mut p = crate::RedoProtocol::attach(p.into_memory(), log, data).unwrap();
        assert!(p.recover().unwrap().repaired);
        assert_eq!(p.memory_mut().read_u64(0).unwrap(), REDO_MAGIC);
        assert_eq!(p.memory_mut().read_u64(8).unwrap(), 42);
    }

    /// Committing borrowed writes leaves memory, log and persist counts as a
    /// transaction of the same writes does: ascending writes sharing and skipping
    /// lines (flushed in one pass), and writes out of order (flushed through a set).
    #[test]
    fn borrowed_writes_commit_as_a_transaction_of_them_does() {
        let cases: [&[(u64, usize, u8)]; 4] = [
            &[
                (4096, 13, 1),
                (4100, 3, 2),
                (4160, 64, 3),
                (4300, 200, 4),
                (9000, 8, 5),
            ],
            &[(4096, 300, 1), (4100, 3, 2), (5000, 8, 3)],
            &[(9000, 8, 5), (4096, 13, 1), (4160, 64, 3)],
            &[(8191, 1, 7)],
        ];
        for writes in cases {
            let bytes: Vec<(u64, Vec<u8>)> =
                writes.iter().map(|&(a, n, v)| (a, vec![v; n])).collect();
            let (mut a, mut b) = (VecMemory::new(16384), VecMemory::new(16384));
            let mut la = RedoLog::format(&mut a, 0, 2048).unwrap();
            let mut lb = RedoLog::format(&mut b, 0, 2048).unwrap();
            let before = (a.persist_counters(), b.persist_counters());
            let mut tx = la.begin(&mut a);
            for (addr, data) in &bytes {
                tx.write(*addr, data).unwrap();
            }
            tx.commit().unwrap();
            let mut buf = Vec::new();
            lb.commit_writes(&mut b, &mut buf, || {
                bytes.iter().map(|(addr, data)| (*addr, data.as_slice()))
            })
            .unwrap();
            assert_eq!(a.bytes(), b.bytes(), "writes {writes:?}");
            let spent = |m: &VecMemory, b0: pmlab_spine::PersistCounters| {
                let c = m.persist_counters();
                (c.flushes - b0.flushes, c.fences - b0.fences)
            };
            assert_eq!(
                spent(&a, before.0),
                spent(&b, before.1),
                "flushes and fences of writes {writes:?}"
            );
            assert_eq!(la.next_seq(), lb.next_seq());
        }
        // No writes: nothing is written, not even a log.
        let mut m = VecMemory::new(16384);
        let mut log = RedoLog::format(&mut m, 0, 2048).unwrap();
        let before = (m.bytes().to_vec(), log.next_seq());
        let none: [(u64, &[u8]); 0] = [];
        log.commit_writes(&mut m, &mut Vec::new(), || none.iter().copied())
            .unwrap();
        assert_eq!((m.bytes().to_vec(), log.next_seq()), before);
    }

    #[test]
    fn a_torn_log_of_the_previous_format_is_ignored() {
        let mut image = encode_v1(41, &records());
        image[70] ^= 1;
        let mut mem = VecMemory::new(16384);
        mem.write(0, &image).unwrap();
        let (_, rec) = RedoLog::open(&mut mem, 0, 2048).unwrap();
        assert_eq!(rec.replayed_seq, None);
        assert!(mem.bytes()[4096..4109].iter().all(|&b| b == 0));
    }
}

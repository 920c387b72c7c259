//! Undo logging (the PMDK scheme): before a range is first modified its old contents
//! are logged and made durable; commit makes the data durable, then marks the
//! transaction finished.
//!
//! # Log layout (at `base`, which must be line-aligned)
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! |      0 |    8 | `magic` `PMUNDO01` |
//! |      8 |    8 | `finished`: number of the last finished (committed or rolled back) transaction |
//! |     64 |    … | records: `seq` u64, `addr` u64, `len` u64, `crc` u32, pad u32, old data padded to 8 |
//!
//! `finished` is a single aligned 8-byte word, so it is updated atomically even where
//! only 8-byte stores are failure-atomic; that is why it carries no checksum.
//!
//! A record belongs to the live transaction when its `seq` is `finished + 1` and its
//! checksum (over seq, addr, len and data; see `checksum.rs`) matches. Recovery rolls back the live records in
//! reverse order, makes that durable, and then advances `finished`. Records are
//! appended from offset 64 on; the scan stops at the first record that is torn or
//! belongs to an older transaction.
//!
//! # Costs
//!
//! A transaction that snapshots `k` ranges costs `k + 2` fences: one per snapshot (the
//! undo record must be durable before the in-place store), one to make the data
//! durable at commit, one for the commit mark. PMDK's small transaction (one range)
//! costs the same 3. [`UndoTx::snapshot`] logs several ranges under one fence.

use pmlab_spine::{Addr, LINE, Memory};

use crate::codec::{get_u32, get_u64, pad8, put_u32, put_u64};
use crate::error::TxError;
use crate::fault::{Fault, FaultPlan};
use crate::lines::LineSet;

/// The magic of an undo log header.
pub const UNDO_MAGIC: u64 = u64::from_le_bytes(*b"PMUNDO01");
/// Bytes of the header line.
pub const UNDO_HEADER: u64 = LINE;
const RECORD_HEAD: u64 = 32;
/// Bytes of an undo record's head (seq, addr, len, crc, pad) before its data.
pub(crate) const UNDO_RECORD_HEAD: u64 = RECORD_HEAD;

/// One undo record: the old contents of a range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoRecord {
    /// The transaction it belongs to.
    pub seq: u64,
    /// Start of the range.
    pub addr: Addr,
    /// The range's contents before the transaction changed it.
    pub old: Vec<u8>,
}

/// Why bytes are not a valid undo record (the scan stops there).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UndoDecodeError {
    /// The record ends early.
    #[error("byte offset {offset}, field `{field}`: truncated")]
    Truncated {
        /// Offset from the record start.
        offset: u64,
        /// The field that is cut off.
        field: &'static str,
    },
    /// The checksum does not match: torn or corrupted.
    #[error("byte offset 24, field `crc`: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// Stored value.
        stored: u32,
        /// Computed value.
        computed: u32,
    },
}

/// Encodes a record.
pub fn encode_undo(r: &UndoRecord) -> Vec<u8> {
    let mut b = vec![0u8; (RECORD_HEAD + pad8(r.old.len() as u64)) as usize];
    put_u64(&mut b, 0, r.seq);
    put_u64(&mut b, 8, r.addr);
    put_u64(&mut b, 16, r.old.len() as u64);
    b[32..32 + r.old.len()].copy_from_slice(&r.old);
    let crc = undo_crc(&b[0..24], &r.old);
    put_u32(&mut b, 24, crc);
    b
}

/// Appends the encoding of a record (`seq`, `addr`, `old`) to `b`; the same bytes as
/// [`encode_undo`], without a record to build first.
pub(crate) fn encode_undo_into(b: &mut Vec<u8>, seq: u64, addr: Addr, old: &[u8]) {
    let o = b.len();
    b.resize(o + (RECORD_HEAD + pad8(old.len() as u64)) as usize, 0);
    put_u64(b, o, seq);
    put_u64(b, o + 8, addr);
    put_u64(b, o + 16, old.len() as u64);
    b[o + 32..o + 32 + old.len()].copy_from_slice(old);
    let crc = undo_crc(&b[o..o + 24], old);
    put_u32(b, o + 24, crc);
}

/// Not a CRC-32: the old data is often CRC-sealed itself, which a CRC cannot tell
/// apart (see [`crate::checksum`]).
fn undo_crc(fields: &[u8], data: &[u8]) -> u32 {
    crate::checksum::log_checksum(&[fields, data])
}

/// The encoded length of the record starting at `b`, if its length field is readable.
pub fn undo_record_len(b: &[u8]) -> Option<u64> {
    let padded = get_u64(b, 16)?.checked_add(7)? / 8 * 8;
    RECORD_HEAD.checked_add(padded)
}

/// Decodes the record at the start of `b`. Never panics, whatever the bytes.
pub fn decode_undo(b: &[u8]) -> Result<UndoRecord, UndoDecodeError> {
    let trunc = |offset, field| UndoDecodeError::Truncated { offset, field };
    let seq = get_u64(b, 0).ok_or(trunc(0, "seq"))?;
    let addr = get_u64(b, 8).ok_or(trunc(8, "addr"))?;
    let len = get_u64(b, 16).ok_or(trunc(16, "len"))?;
    let stored = get_u32(b, 24).ok_or(trunc(24, "crc"))?;
    let end = RECORD_HEAD
        .checked_add(len)
        .filter(|&e| e <= b.len() as u64);
    let end = end.ok_or(trunc(RECORD_HEAD, "data"))? as usize;
    let old = &b[RECORD_HEAD as usize..end];
    let computed = undo_crc(&b[0..24], old);
    if computed != stored {
        return Err(UndoDecodeError::Checksum { stored, computed });
    }
    Ok(UndoRecord {
        seq,
        addr,
        old: old.to_vec(),
    })
}

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UndoRecovery {
    /// The interrupted transaction that was rolled back, if any.
    pub rolled_back_seq: Option<u64>,
    /// Records undone.
    pub undone_records: usize,
}

/// An undo log area in persistent memory: the handle transactions begin from.
#[derive(Clone, Debug)]
pub struct UndoLog {
    base: Addr,
    len: u64,
    finished: u64,
    faults: FaultPlan,
}

impl UndoLog {
    /// Formats `[base, base + len)` as an empty log (one persist: flush + fence).
    pub fn format<M: Memory>(mem: &mut M, base: Addr, len: u64) -> Result<UndoLog, TxError> {
        crate::lines::check_log_area("undo log", mem, base, len)?;
        let mut h = [0u8; UNDO_HEADER as usize];
        put_u64(&mut h, 0, UNDO_MAGIC);
        mem.write(base, &h)?;
        // A zero first record can never be live: its checksum does not match.
        mem.write(base + UNDO_HEADER, &[0u8; RECORD_HEAD as usize])?;
        mem.persist(base, UNDO_HEADER + RECORD_HEAD)?;
        Ok(UndoLog {
            base,
            len,
            finished: 0,
            faults: FaultPlan::CORRECT,
        })
    }

    /// The live records of the log: those of transaction `finished + 1`, in order.
    pub(crate) fn live_records<M: Memory>(&self, mem: &mut M) -> Result<Vec<UndoRecord>, TxError> {
        let mut out = Vec::new();
        let mut off = UNDO_HEADER;
        let mut head = [0u8; RECORD_HEAD as usize];
        while off + RECORD_HEAD <= self.len {
            mem.read(self.base + off, &mut head)?;
            let fits = |&l: &u64| off.checked_add(l).is_some_and(|end| end <= self.len);
            let Some(rlen) = undo_record_len(&head).filter(fits) else {
                break;
            };
            let mut b = vec![0u8; rlen as usize];
            mem.read(self.base + off, &mut b)?;
            match decode_undo(&b) {
                Ok(r) if r.seq == self.finished.wrapping_add(1) => out.push(r),
                _ => break,
            }
            off += rlen;
        }
        Ok(out)
    }

    /// Opens a formatted log and recovers: an interrupted transaction's writes are
    /// rolled back and the log is marked finished.
    pub fn open<M: Memory>(
        mem: &mut M,
        base: Addr,
        len: u64,
    ) -> Result<(UndoLog, UndoRecovery), TxError> {
        crate::lines::check_log_area("undo log", mem, base, len)?;
        let magic = mem.read_u64(base)?;
        if magic != UNDO_MAGIC {
            return Err(TxError::BadHeader {
                structure: "undo log",
                addr: base,
                offset: 0,
                field: "magic",
                problem: format!("{magic:#018x} is not {UNDO_MAGIC:#018x}"),
            });
        }
        let finished = mem.read_u64(base + 8)?;
        let mut log = UndoLog {
            base,
            len,
            finished,
            faults: FaultPlan::CORRECT,
        };
        let live = log.live_records(mem)?;
        let mut rec = UndoRecovery::default();
        if !live.is_empty() {
            let seq = finished.wrapping_add(1);
            log.roll_back(mem, &live, seq)?;
            rec.rolled_back_seq = Some(seq);
            rec.undone_records = live.len();
        }
        Ok((log, rec))
    }

    /// Restores `records` in reverse order, makes that durable, then marks `seq`
    /// finished (2 fences).
    pub(crate) fn roll_back<M: Memory>(
        &mut self,
        mem: &mut M,
        records: &[UndoRecord],
        seq: u64,
    ) -> Result<(), TxError> {
        let mut lines = LineSet::default();
        for r in records.iter().rev() {
            mem.write(r.addr, &r.old)?;
            lines.add(r.addr, r.old.len() as u64);
        }
        lines.flush(mem)?;
        mem.fence();
        self.finish(mem, seq)
    }

    pub(crate) fn finish<M: Memory>(&mut self, mem: &mut M, seq: u64) -> Result<(), TxError> {
        mem.write_u64(self.base + 8, seq)?;
        mem.persist(self.base + 8, 8)?;
        self.finished = seq;
        Ok(())
    }

    /// A handle on a log already formatted at `[base, base + len)` whose last
    /// finished transaction is `finished`, without reading or recovering it.
    pub(crate) fn attached(base: Addr, len: u64, finished: u64) -> UndoLog {
        UndoLog {
            base,
            len,
            finished,
            faults: FaultPlan::CORRECT,
        }
    }

    /// The fault plan the log runs with.
    pub fn faults(&self) -> FaultPlan {
        self.faults
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

    /// The last finished (committed or rolled back) transaction's number.
    pub fn finished(&self) -> u64 {
        self.finished
    }

    /// Runs with `faults` (a deliberately broken plan only in crash tests).
    pub fn with_faults(mut self, faults: FaultPlan) -> UndoLog {
        self.faults = faults;
        self
    }

    /// Bytes available for records.
    pub fn capacity(&self) -> u64 {
        self.len - UNDO_HEADER
    }

    /// Begins a transaction; nothing is written until the first snapshot.
    pub fn begin<'a, M: Memory>(&'a mut self, mem: &'a mut M) -> UndoTx<'a, M> {
        let seq = self.finished.wrapping_add(1);
        UndoTx {
            log: self,
            mem,
            seq,
            tail: UNDO_HEADER,
            records: Vec::new(),
            data_lines: LineSet::default(),
            done: false,
        }
    }
}

/// An undo transaction: stores go in place after their old contents are logged;
/// commit makes them durable; [`UndoTx::abort`] (or dropping it) rolls them back.
pub struct UndoTx<'a, M: Memory> {
    log: &'a mut UndoLog,
    mem: &'a mut M,
    seq: u64,
    tail: u64,
    records: Vec<UndoRecord>,
    data_lines: LineSet,
    done: bool,
}

impl<M: Memory> UndoTx<'_, M> {
    fn covered(&self, addr: Addr, len: u64) -> bool {
        self.records
            .iter()
            .any(|r| r.addr <= addr && addr + len <= r.addr + r.old.len() as u64)
    }

    /// Logs the old contents of every range not yet logged, under one fence. Later
    /// writes inside these ranges cost no fence.
    pub fn snapshot(&mut self, ranges: &[(Addr, u64)]) -> Result<(), TxError> {
        let mut lines = LineSet::default();
        for &(addr, len) in ranges {
            pmlab_spine::check_bounds(addr, len, self.mem.size())?;
            if len == 0 || self.covered(addr, len) {
                continue;
            }
            let mut old = vec![0u8; len as usize];
            self.mem.read(addr, &mut old)?;
            let r = UndoRecord {
                seq: self.seq,
                addr,
                old,
            };
            let bytes = encode_undo(&r);
            let needed = self.tail + bytes.len() as u64;
            if needed > self.log.len {
                return Err(TxError::LogFull {
                    kind: "undo",
                    needed: needed - UNDO_HEADER,
                    capacity: self.log.capacity(),
                });
            }
            let at = self.log.base + self.tail;
            self.mem.write(at, &bytes)?;
            lines.add(at, bytes.len() as u64);
            self.tail = needed;
            self.records.push(r);
        }
        if lines.is_empty() {
            return Ok(());
        }
        lines.flush(self.mem)?;
        if !self.log.faults.has(Fault::UndoSkipSnapshotFence) {
            self.mem.fence();
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes at `addr` (stores are in place, so this is a plain read).
    pub fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        Ok(self.mem.read(addr, buf)?)
    }

    /// Reads a little-endian `u64`.
    pub fn read_u64(&mut self, addr: Addr) -> Result<u64, TxError> {
        Ok(self.mem.read_u64(addr)?)
    }

    /// Stores `data` at `addr`, logging the old contents first if this range was not
    /// logged yet (one fence).
    pub fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        self.snapshot(&[(addr, data.len() as u64)])?;
        self.mem.write(addr, data)?;
        self.data_lines.add(addr, data.len() as u64);
        Ok(())
    }

    /// Stores a little-endian `u64`.
    pub fn write_u64(&mut self, addr: Addr, value: u64) -> Result<(), TxError> {
        self.write(addr, &value.to_le_bytes())
    }

    /// Makes the stores durable (fence), then marks the transaction finished (fence).
    pub fn commit(mut self) -> Result<(), TxError> {
        self.done = true;
        if self.records.is_empty() {
            return Ok(());
        }
        self.data_lines.flush(self.mem)?;
        if !self.log.faults.has(Fault::UndoSkipDataFence) {
            self.mem.fence();
        }
        self.log.finish(self.mem, self.seq)
    }

    /// Rolls the stores back and marks the transaction finished (2 fences if anything
    /// was logged).
    pub fn abort(mut self) -> Result<(), TxError> {
        self.abort_in_place()
    }

    fn abort_in_place(&mut self) -> Result<(), TxError> {
        self.done = true;
        if self.records.is_empty() {
            return Ok(());
        }
        let records = std::mem::take(&mut self.records);
        self.log.roll_back(self.mem, &records, self.seq)
    }
}

impl<M: Memory> Drop for UndoTx<'_, M> {
    /// A transaction dropped without commit is aborted, as in PMDK; an error while
    /// rolling back leaves the log live, and the next open rolls back again.
    fn drop(&mut self) {
        if !self.done {
            let _ = self.abort_in_place();
        }
    }
}

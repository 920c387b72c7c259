//! The undo log as a [`Protocol`]: PMDK's scheme (and the software form of the
//! hardware undo log OSP is compared with).
//!
//! Before a byte is first stored to in a transaction its old contents are appended to
//! the log and made durable (one fence per store that reaches new bytes, or one for all
//! the ranges of a [`Protocol::declare`]); the store then goes in place. Commit makes
//! the stores durable (fence) and then marks the transaction finished (fence): `k + 2`
//! fences for `k` snapshot steps, like PMDK. Abort restores the old contents from the
//! volatile copy, makes them durable and marks the transaction finished (2 fences).
//!
//! Recovery rolls back the live records of an unfinished transaction, in reverse
//! order, then marks it finished. A live record outside the data area is corruption
//! no crash can leave: recovery refuses it by field and offset and writes nothing.

use pmlab_spine::{Addr, Memory};

use crate::error::TxError;
use crate::fault::{Fault, FaultPlan};
use crate::protocol::{Area, Phase, Protocol, Recovery, TxId, TxStats};
use crate::ranges::{RangeSet, flush_line_runs};
use crate::undo::{UNDO_HEADER, UNDO_MAGIC, UNDO_RECORD_HEAD, UndoLog, encode_undo_into};

/// One snapshot: `len` old bytes of `addr`, kept at `off` in the volatile copy.
#[derive(Clone, Copy, Debug)]
struct Snapshot {
    addr: Addr,
    len: u64,
    off: usize,
}

/// Undo logging behind the [`Protocol`] interface.
pub struct UndoProtocol<M: Memory> {
    mem: M,
    log: UndoLog,
    data: Area,
    phase: Phase,
    /// The running transaction's number in the log.
    seq: u64,
    /// Where the next record goes, from the log's base.
    tail: u64,
    /// Bytes whose old contents are logged.
    snapped: RangeSet,
    /// Bytes stored in place (flushed at commit).
    written: RangeSet,
    /// The snapshots in order, and their old bytes (for abort).
    snapshots: Vec<Snapshot>,
    old: Vec<u8>,
    /// Scratch: gaps to snapshot, encoded records.
    gaps: Vec<(Addr, u64)>,
    buf: Vec<u8>,
    committed: TxId,
    stats: TxStats,
}

impl<M: Memory> UndoProtocol<M> {
    /// Formats `log` as an empty undo log (one persist) guarding stores to `data`.
    pub fn format(mut mem: M, log: Area, data: Area) -> Result<Self, TxError> {
        check_areas(&mem, log, data)?;
        let handle = UndoLog::format(&mut mem, log.base, log.len)?;
        Ok(Self::new(mem, handle, data, Phase::Idle))
    }

    /// Attaches to an undo log formatted earlier (checking its magic; writing nothing).
    /// [`Protocol::recover`] must run before the first transaction.
    pub fn attach(mut mem: M, log: Area, data: Area) -> Result<Self, TxError> {
        check_areas(&mem, log, data)?;
        let magic = mem.read_u64(log.base)?;
        if magic != UNDO_MAGIC {
            return Err(TxError::BadHeader {
                structure: "undo log",
                addr: log.base,
                offset: 0,
                field: "magic",
                problem: format!("{magic:#018x} is not {UNDO_MAGIC:#018x}: not an undo log"),
            });
        }
        let finished = mem.read_u64(log.base + 8)?;
        let handle = UndoLog::attached(log.base, log.len, finished);
        Ok(Self::new(mem, handle, data, Phase::NeedsRecovery))
    }

    fn new(mem: M, log: UndoLog, data: Area, phase: Phase) -> Self {
        UndoProtocol {
            mem,
            log,
            data,
            phase,
            seq: 0,
            tail: UNDO_HEADER,
            snapped: RangeSet::default(),
            written: RangeSet::default(),
            snapshots: Vec::new(),
            old: Vec::new(),
            gaps: Vec::new(),
            buf: Vec::new(),
            committed: 0,
            stats: TxStats::default(),
        }
    }

    /// Runs with `faults` (a deliberately broken variant: crash tests only).
    pub fn with_faults(mut self, faults: FaultPlan) -> Self {
        self.log = self.log.with_faults(faults);
        self
    }

    fn check_data(&self, op: &'static str, addr: Addr, len: u64) -> Result<(), TxError> {
        if self.data.contains(addr, len) {
            return Ok(());
        }
        Err(TxError::OutsideData {
            op,
            addr,
            len,
            lo: self.data.base,
            hi: self.data.end(),
        })
    }

    /// Logs the old contents of `self.gaps` under one fence (nothing if empty).
    fn snapshot_gaps(&mut self) -> Result<(), TxError> {
        if self.gaps.is_empty() {
            return Ok(());
        }
        self.buf.clear();
        let first_old = self.old.len();
        for &(addr, len) in &self.gaps {
            let off = self.old.len();
            self.old.resize(off + len as usize, 0);
            self.mem.read(addr, &mut self.old[off..])?;
            encode_undo_into(&mut self.buf, self.seq, addr, &self.old[off..]);
        }
        let at = self.tail;
        if at + self.buf.len() as u64 > self.log.len() {
            self.old.truncate(first_old);
            return Err(TxError::LogFull {
                kind: "undo",
                needed: at + self.buf.len() as u64 - UNDO_HEADER,
                capacity: self.log.capacity(),
            });
        }
        let base = self.log.base();
        self.mem.write(base + at, &self.buf)?;
        if !self.log.faults().has(Fault::UndoSkipSnapshotFlush) {
            self.mem.flush(
                base + at,
                self.buf.len() as u64,
                pmlab_spine::FlushKind::Clwb,
            )?;
        }
        if !self.log.faults().has(Fault::UndoSkipSnapshotFence) {
            self.mem.fence();
        }
        self.tail += self.buf.len() as u64;
        self.stats.log_bytes += self.buf.len() as u64;
        let mut off = first_old;
        for &(addr, len) in &self.gaps {
            self.snapped.insert(addr, len);
            self.snapshots.push(Snapshot { addr, len, off });
            off += len as usize;
        }
        Ok(())
    }

    fn end_transaction(&mut self) {
        self.snapped.clear();
        self.written.clear();
        self.snapshots.clear();
        self.old.clear();
        self.phase = Phase::Idle;
    }

    /// Finishes the running transaction in the log (the commit mark; one fence).
    fn finish(&mut self) -> Result<(), TxError> {
        self.log.finish(&mut self.mem, self.seq)?;
        self.stats.log_bytes += 8;
        Ok(())
    }
}

fn check_areas<M: Memory>(mem: &M, log: Area, data: Area) -> Result<(), TxError> {
    crate::lines::check_log_area("undo log", mem, log.base, log.len)?;
    pmlab_spine::check_bounds(data.base, data.len, mem.size())?;
    if data.base < log.end() && log.base < data.end() {
        return Err(TxError::BadArea {
            structure: "undo log",
            addr: log.base,
            problem: format!(
                "the log [{:#x}, {:#x}) overlaps the data area [{:#x}, {:#x})",
                log.base,
                log.end(),
                data.base,
                data.end()
            ),
        });
    }
    Ok(())
}

impl<M: Memory> Protocol for UndoProtocol<M> {
    type Mem = M;

    fn name(&self) -> &'static str {
        "undo"
    }

    fn recover(&mut self) -> Result<Recovery, TxError> {
        if self.phase == Phase::InTx {
            return Err(TxError::InTransaction);
        }
        let (base, len) = (self.log.base(), self.log.len());
        let finished = self.mem.read_u64(base + 8)?;
        let faults = self.log.faults();
        self.log = UndoLog::attached(base, len, finished).with_faults(faults);
        let live = self.log.live_records(&mut self.mem)?;
        let mut at = UNDO_HEADER;
        for r in &live {
            let n = r.old.len() as u64;
            if !self.data.contains(r.addr, n) {
                return Err(TxError::Corrupt {
                    structure: "undo log",
                    addr: base,
                    offset: at + 8,
                    field: "addr",
                    problem: format!(
                        "a live record of {n} bytes at {:#x} lies outside the data area [{:#x}, {:#x})",
                        r.addr,
                        self.data.base,
                        self.data.end()
                    ),
                });
            }
            at += UNDO_RECORD_HEAD + crate::codec::pad8(n);
        }
        let mut rec = Recovery::default();
        if live.is_empty() {
            rec.note = format!("no live undo records (transaction {finished} finished)");
        } else {
            let seq = finished.wrapping_add(1);
            if self.log.faults().has(Fault::UndoRecoverySkipsRollback) {
                self.log.finish(&mut self.mem, seq)?;
            } else {
                self.log.roll_back(&mut self.mem, &live, seq)?;
            }
            rec.repaired = true;
            rec.entries = live.len() as u64;
            rec.note = format!("rolled back undo transaction {seq}: {} records", live.len());
        }
        self.phase = Phase::Idle;
        Ok(rec)
    }

    fn begin(&mut self) -> Result<(), TxError> {
        self.phase.check_begin()?;
        self.seq = self.log.finished().wrapping_add(1);
        self.tail = UNDO_HEADER;
        self.phase = Phase::InTx;
        Ok(())
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        self.phase.check_read()?;
        Ok(self.mem.read(addr, buf)?)
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        self.phase.check_in_tx("write")?;
        let len = data.len() as u64;
        self.check_data("write", addr, len)?;
        self.gaps.clear();
        self.snapped.missing(addr, len, &mut self.gaps);
        self.snapshot_gaps()?;
        self.mem.write(addr, data)?;
        self.written.insert(addr, len);
        self.stats.writes += 1;
        self.stats.write_bytes += len;
        Ok(())
    }

    fn declare(&mut self, ranges: &[(Addr, u64)]) -> Result<(), TxError> {
        self.phase.check_in_tx("declare")?;
        self.gaps.clear();
        let mut pending = RangeSet::default();
        for &(addr, len) in ranges {
            self.check_data("declare", addr, len)?;
            // A range declared twice (or overlapping another) is logged once.
            let mut parts = Vec::new();
            self.snapped.missing(addr, len, &mut parts);
            for (a, l) in parts {
                let mut fresh = Vec::new();
                pending.missing(a, l, &mut fresh);
                for &(fa, fl) in &fresh {
                    pending.insert(fa, fl);
                }
                self.gaps.extend(fresh);
            }
        }
        self.snapshot_gaps()
    }

    fn commit(&mut self) -> Result<TxId, TxError> {
        self.phase.check_in_tx("commit")?;
        if !self.snapshots.is_empty() {
            flush_line_runs(&mut self.mem, self.written.iter())?;
            if !self.log.faults().has(Fault::UndoSkipDataFence) {
                self.mem.fence();
            }
            self.finish()?;
        }
        self.end_transaction();
        self.committed += 1;
        self.stats.commits += 1;
        Ok(self.committed)
    }

    fn abort(&mut self) -> Result<(), TxError> {
        self.phase.check_in_tx("abort")?;
        if !self.snapshots.is_empty() {
            for s in self.snapshots.iter().rev() {
                let old = &self.old[s.off..s.off + s.len as usize];
                self.mem.write(s.addr, old)?;
            }
            flush_line_runs(&mut self.mem, self.snapped.iter())?;
            self.mem.fence();
            self.finish()?;
        }
        self.end_transaction();
        self.stats.aborts += 1;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TxError> {
        Ok(())
    }

    fn durable(&self) -> TxId {
        self.committed
    }

    fn in_transaction(&self) -> bool {
        self.phase == Phase::InTx
    }

    fn stats(&self) -> TxStats {
        self.stats
    }

    fn memory(&self) -> &M {
        &self.mem
    }

    fn memory_mut(&mut self) -> &mut M {
        &mut self.mem
    }

    fn into_memory(self) -> M {
        self.mem
    }
}

//! The redo log as a [`Protocol`]: pmlab's software write-ahead log (LOC's S-WAL).
//!
//! Stores are buffered in a write set (reads see them), so nothing reaches memory
//! before commit; commit is the redo log's two fences ([`crate::RedoLog`]: the
//! checksummed log, then the writes in place). Abort drops the write set: nothing
//! persistent changed, so it costs no flush and no fence. The write set is kept as
//! the log's body ([`crate::logset`]): overlapping stores are merged, so each byte is
//! logged once however often the transaction wrote it, and a commit copies the body
//! into the log behind its header instead of encoding every record again.
//!
//! Recovery replays the last checksum-valid log (idempotent: the log is never cleared,
//! and every store to the data area goes through a transaction). A log header whose
//! body could not fit the area, a checksum-valid log whose records do not add up, or a
//! record outside the data area is corruption no crash can leave: recovery refuses it
//! by field and offset and writes nothing.

use pmlab_spine::{Addr, Memory};

use crate::error::TxError;
use crate::fault::{Fault, FaultPlan};
use crate::logset::LogWriteSet;
use crate::protocol::{Area, Phase, Protocol, Recovery, TxId, TxStats};
use crate::redo::{
    REDO_HEADER, REDO_MAGIC, REDO_MAGIC_V1, RedoDecodeError, RedoLog, decode_redo_with,
    is_redo_magic, redo_body_len, redo_record_len,
};

/// Redo logging behind the [`Protocol`] interface.
pub struct RedoProtocol<M: Memory> {
    mem: M,
    log: RedoLog,
    data: Area,
    phase: Phase,
    writes: LogWriteSet,
    buf: Vec<u8>,
    committed: TxId,
    stats: TxStats,
}

fn corrupt(log: Area, offset: u64, field: &'static str, problem: String) -> TxError {
    TxError::Corrupt {
        structure: "redo log",
        addr: log.base,
        offset,
        field,
        problem,
    }
}

impl<M: Memory> RedoProtocol<M> {
    /// Formats `log` as an empty redo log (one persist) guarding stores to `data`.
    pub fn format(mut mem: M, log: Area, data: Area) -> Result<Self, TxError> {
        check_areas(&mem, log, data)?;
        let handle = RedoLog::format(&mut mem, log.base, log.len)?;
        Ok(Self::new(mem, handle, data, Phase::Idle))
    }

    /// Attaches to a redo log formatted earlier (checking its magic; writing nothing).
    /// [`Protocol::recover`] must run before the first transaction.
    pub fn attach(mem: M, log: Area, data: Area) -> Result<Self, TxError> {
        check_areas(&mem, log, data)?;
        let handle = RedoLog::attached(log.base, log.len, 0);
        let mut p = Self::new(mem, handle, data, Phase::NeedsRecovery);
        p.reattach()?;
        Ok(p)
    }

    /// Attaches to a redo log whose last committed transaction the caller knows to be
    /// wholly applied — no writer died since a recovery last ran, which a robust lock
    /// can tell (the key-value store compares its lock's count of dead holders with
    /// the count its last recovery saw). Recovery would then only replay what is
    /// already in place, so the first transaction may begin at once. Where the caller
    /// cannot know, use [`RedoProtocol::attach`] and recover.
    pub fn attach_applied(mem: M, log: Area, data: Area) -> Result<Self, TxError> {
        let mut p = Self::attach(mem, log, data)?;
        p.assume_applied();
        Ok(p)
    }

    /// Attaches this protocol to its log again, as [`RedoProtocol::attach`] does (the
    /// log's magic checked, its sequence number read, recovery needed before the next
    /// transaction; a transaction left running is dropped), keeping the buffers of
    /// its write set and log image. For a caller that attaches per transaction — the
    /// key-value store attaches before every SET, since another writer may have
    /// committed in between — so that a transaction allocates nothing once they have
    /// grown.
    pub fn reattach(&mut self) -> Result<(), TxError> {
        let base = self.log.base();
        let magic = self.mem.read_u64(base)?;
        if !is_redo_magic(magic) {
            return Err(TxError::BadHeader {
                structure: "redo log",
                addr: base,
                offset: 0,
                field: "magic",
                problem: format!(
                    "{magic:#018x} is neither {REDO_MAGIC:#018x} nor {REDO_MAGIC_V1:#018x}: not a redo log"
                ),
            });
        }
        let seq = self.mem.read_u64(base + 8)?;
        self.log = RedoLog::attached(base, self.log.len(), seq.wrapping_add(1))
            .with_faults(self.log.faults());
        self.writes.clear();
        self.phase = Phase::NeedsRecovery;
        Ok(())
    }

    /// Skips the recovery an attach requires, on the caller's knowledge that the log's
    /// last transaction is wholly applied (see [`RedoProtocol::attach_applied`]).
    pub fn assume_applied(&mut self) {
        if self.phase == Phase::NeedsRecovery {
            self.phase = Phase::Idle;
        }
    }

    fn new(mem: M, log: RedoLog, data: Area, phase: Phase) -> Self {
        RedoProtocol {
            mem,
            log,
            data,
            phase,
            writes: LogWriteSet::default(),
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

    fn area(&self) -> Area {
        Area::new(self.log.base(), self.log.len())
    }

    /// The last log that a commit made durable, if the log holds a checksum-valid one;
    /// an error for corruption that no crash leaves.
    fn committed_log(&mut self) -> Result<Option<crate::RedoImage>, TxError> {
        let area = self.area();
        let mut header = [0u8; REDO_HEADER as usize];
        self.mem.read(area.base, &mut header)?;
        let body_len = redo_body_len(&header).unwrap_or(u64::MAX);
        if body_len > self.log.capacity() {
            return Err(corrupt(
                area,
                16,
                "body_len",
                format!(
                    "{body_len} bytes of records do not fit the log's {} (every commit writes a body that fits)",
                    self.log.capacity()
                ),
            ));
        }
        self.buf.resize((REDO_HEADER + body_len) as usize, 0);
        self.mem.read(area.base, &mut self.buf)?;
        let image = match decode_redo_with(&self.buf, self.log.faults()) {
            Ok(image) => image,
            Err(RedoDecodeError::Malformed {
                offset,
                field,
                problem,
            }) => {
                return Err(corrupt(area, offset, field, problem));
            }
            // A torn log: its transaction never committed, the one before was applied.
            Err(_) => return Ok(None),
        };
        let mut at = REDO_HEADER;
        for r in &image.records {
            if !self.data.contains(r.addr, r.data.len() as u64) {
                return Err(corrupt(
                    area,
                    at,
                    "addr",
                    format!(
                        "a record of {} bytes at {:#x} lies outside the data area [{:#x}, {:#x})",
                        r.data.len(),
                        r.addr,
                        self.data.base,
                        self.data.end()
                    ),
                ));
            }
            at += redo_record_len(r.data.len() as u64);
        }
        Ok(Some(image))
    }
}

/// The log must be line-aligned and fit; the data area must fit and not overlap it.
fn check_areas<M: Memory>(mem: &M, log: Area, data: Area) -> Result<(), TxError> {
    crate::lines::check_log_area("redo log", mem, log.base, log.len)?;
    pmlab_spine::check_bounds(data.base, data.len, mem.size())?;
    if data.base < log.end() && log.base < data.end() {
        return Err(TxError::BadArea {
            structure: "redo log",
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

impl<M: Memory> Protocol for RedoProtocol<M> {
    type Mem = M;

    fn name(&self) -> &'static str {
        "redo"
    }

    fn recover(&mut self) -> Result<Recovery, TxError> {
        if self.phase == Phase::InTx {
            return Err(TxError::InTransaction);
        }
        let mut rec = Recovery::default();
        let seq = self.mem.read_u64(self.log.base() + 8)?;
        if let Some(image) = self.committed_log()? {
            let records = || image.records.iter().map(|r| (r.addr, r.data.as_slice()));
            let mut sorted: Vec<(Addr, u64)> =
                records().map(|(a, d)| (a, d.len() as u64)).collect();
            sorted.sort_unstable();
            if self.log.faults().has(Fault::RedoRecoverySkipsReplay) {
                rec.note = format!(
                    "found redo transaction {} and skipped its replay (a deliberate fault)",
                    image.seq
                );
            } else {
                for (addr, data) in records() {
                    self.mem.write(addr, data)?;
                }
                crate::ranges::flush_line_runs(&mut self.mem, sorted.into_iter())?;
                self.mem.fence();
                rec.repaired = !image.records.is_empty();
                rec.entries = image.records.len() as u64;
                rec.note = format!(
                    "replayed redo transaction {}: {} records",
                    image.seq,
                    image.records.len()
                );
            }
        } else {
            rec.note = "no committed log to replay (torn or empty)".into();
        }
        self.log = RedoLog::attached(self.log.base(), self.log.len(), seq.wrapping_add(1))
            .with_faults(self.log.faults());
        self.phase = Phase::Idle;
        Ok(rec)
    }

    fn begin(&mut self) -> Result<(), TxError> {
        self.phase.check_begin()?;
        self.writes.clear();
        self.phase = Phase::InTx;
        Ok(())
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        self.phase.check_read()?;
        self.mem.read(addr, buf)?;
        if self.phase == Phase::InTx {
            self.writes.overlay(addr, buf);
        }
        Ok(())
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        self.phase.check_in_tx("write")?;
        let len = data.len() as u64;
        if !self.data.contains(addr, len) {
            return Err(TxError::OutsideData {
                op: "write",
                addr,
                len,
                lo: self.data.base,
                hi: self.data.end(),
            });
        }
        if len == 0 {
            return Ok(());
        }
        let capacity = self.log.capacity();
        if let Err(needed) = self.writes.insert(addr, data, capacity) {
            return Err(TxError::LogFull {
                kind: "redo",
                needed,
                capacity,
            });
        }
        self.stats.writes += 1;
        self.stats.write_bytes += len;
        Ok(())
    }

    fn commit(&mut self) -> Result<TxId, TxError> {
        self.phase.check_in_tx("commit")?;
        if !self.writes.is_empty() {
            let (body, count) = self.writes.log_body();
            let logged = self
                .log
                .commit_body(&mut self.mem, &mut self.buf, body, count)?;
            self.stats.log_bytes += logged;
            let writes = &self.writes;
            self.log
                .apply_records(&mut self.mem, writes.iter(), |m| writes.flush_lines(m))?;
        }
        self.writes.clear();
        self.phase = Phase::Idle;
        self.committed += 1;
        self.stats.commits += 1;
        Ok(self.committed)
    }

    fn abort(&mut self) -> Result<(), TxError> {
        self.phase.check_in_tx("abort")?;
        self.writes.clear();
        self.phase = Phase::Idle;
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

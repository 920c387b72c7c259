//! The hardware undo log paper 000 compares OSP with (§3: "baseline (a hardware
//! undo-log)").
//!
//! The first transactional store to a line in a transaction logs the line's old
//! contents and its address as one entry in an uncacheable log in NVM: the entry's two
//! lines go out through the write-combining buffers and are drained (one
//! write-combining buffer flush, one CPU flush) before the store may proceed, so the
//! new data can never reach NVM ahead of the entry that undoes it. Commit writes back
//! every line the transaction stored to (one `clwb` each), fences, and then marks the
//! transaction committed with one 8-byte uncacheable store to the log header, drained
//! (one CPU flush): `2k + 1` CPU flushes for `k` lines. The hardware logs whole lines
//! and sees no [`Protocol::declare`] hints (it logs as stores arrive).
//!
//! Recovery rolls the running transaction's entries back in reverse order, writes the
//! lines back, and marks the transaction finished. Abort does the same from the
//! volatile copy.

mod log;

use std::collections::HashSet;

use pmlab_model::Machine;
use pmlab_spine::{Addr, FlushKind, LINE, Memory};
use pmlab_tx::{Area, Protocol, Recovery, TxError, TxId, TxStats};

use crate::flushes::{CpuFlushes, Source};
use crate::phase::Phase;

pub use log::{ENTRY, Entry, MAGIC as UNDO_MAGIC, capacity};

/// The hardware undo log's deliberately broken variant, which the crash tests must
/// catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HwUndoFault {
    /// The log entry is not drained before the store: the new data may reach NVM
    /// before the entry that undoes it (the entry becomes durable only at commit).
    EntryNotDurableFirst,
}

impl HwUndoFault {
    /// Every variant.
    pub const ALL: [HwUndoFault; 1] = [HwUndoFault::EntryNotDurableFirst];

    /// Its name on command lines.
    pub fn name(self) -> &'static str {
        match self {
            HwUndoFault::EntryNotDurableFirst => "entry-not-durable-first",
        }
    }
}

/// The hardware undo log behind the transaction interface.
pub struct HwUndoProtocol {
    m: Machine,
    log: Area,
    data: Area,
    phase: Phase,
    /// The tag of the last finished transaction (the header's `done`).
    done: u64,
    /// Lines logged by the running transaction, and their entries in order.
    logged: HashSet<Addr>,
    entries: Vec<Entry>,
    committed: TxId,
    stats: TxStats,
    flushes: CpuFlushes,
    fault: Option<HwUndoFault>,
}

impl HwUndoProtocol {
    /// Formats `log` as an empty hardware undo log (one persist) guarding `data` on `m`
    /// (whose translation must be the identity for `data`, as a flat persistent space).
    pub fn format(mut m: Machine, log: Area, data: Area) -> Result<Self, TxError> {
        check_areas(&m, log, data)?;
        log::format(&mut m, log)?;
        Ok(Self::new(m, log, data, 0, Phase::Idle))
    }

    /// Attaches to a log formatted earlier (checking its header; writing nothing).
    /// [`Protocol::recover`] must run before the first transaction.
    pub fn attach(mut m: Machine, log: Area, data: Area) -> Result<Self, TxError> {
        check_areas(&m, log, data)?;
        let done = log::open(&mut m, log)?;
        Ok(Self::new(m, log, data, done, Phase::NeedsRecovery))
    }

    fn new(m: Machine, log: Area, data: Area, done: u64, phase: Phase) -> Self {
        Self {
            m,
            log,
            data,
            phase,
            done,
            logged: HashSet::new(),
            entries: Vec::new(),
            committed: 0,
            stats: TxStats::default(),
            flushes: CpuFlushes::default(),
            fault: None,
        }
    }

    /// Runs as the broken variant `fault` (crash tests only).
    pub fn with_fault(mut self, fault: Option<HwUndoFault>) -> Self {
        self.fault = fault;
        self
    }

    /// CPU flushes so far, by source (log, data, commit).
    pub fn flushes(&self) -> CpuFlushes {
        self.flushes
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

    /// Logs line `line` (its old contents) and drains the entry.
    fn log_line(&mut self, line: Addr) -> Result<(), TxError> {
        let mut old = [0u8; LINE as usize];
        self.m.read(line, &mut old)?;
        let e = Entry { addr: line, old };
        let slot = self.entries.len() as u64;
        let at = self.log.base + LINE + slot * ENTRY;
        self.m
            .phys()
            .write_nt(at, &log::encode(self.done.wrapping_add(1), &e))?;
        if self.fault != Some(HwUndoFault::EntryNotDurableFirst) {
            self.m.fence();
            self.flushes.add(Source::Log, 1);
        }
        self.flushes.wc_lines += ENTRY / LINE;
        self.stats.log_bytes += ENTRY;
        self.logged.insert(line);
        self.entries.push(e);
        Ok(())
    }

    /// Writes `lines` back and fences, counting one data flush per line.
    fn write_back(&mut self, lines: &[Addr], source: Source) -> Result<(), TxError> {
        for &l in lines {
            self.m.flush(l, LINE, FlushKind::Clwb)?;
        }
        self.flushes.add(source, lines.len() as u64);
        let before = self.m.stats().nt_drains;
        self.m.fence();
        // The broken variant's entries drain here, with the data.
        if self.m.stats().nt_drains > before {
            self.flushes.add(Source::Log, 1);
        }
        Ok(())
    }

    /// Marks the running transaction finished: one drained 8-byte uncacheable store.
    fn mark_done(&mut self) -> Result<(), TxError> {
        let tag = self.done.wrapping_add(1);
        self.m
            .phys()
            .write_nt(self.log.base + log::DONE_AT, &tag.to_le_bytes())?;
        self.m.fence();
        self.flushes.add(Source::Commit, 1);
        self.flushes.wc_lines += 1;
        self.stats.log_bytes += 8;
        self.done = tag;
        Ok(())
    }

    fn end_transaction(&mut self) {
        self.logged.clear();
        self.entries.clear();
        self.phase = Phase::Idle;
    }
}

fn check_areas(m: &Machine, log: Area, data: Area) -> Result<(), TxError> {
    pmlab_spine::check_bounds(log.base, log.len, m.size())?;
    pmlab_spine::check_bounds(data.base, data.len, m.size())?;
    let problem = if log.base % LINE != 0 || capacity(log.len) == 0 {
        Some(format!(
            "the log [{:#x}, {:#x}) is not line-aligned or holds no entry",
            log.base,
            log.end()
        ))
    } else if data.base < log.end() && log.base < data.end() {
        Some("the log overlaps the data area".to_string())
    } else {
        None
    };
    match problem {
        Some(problem) => Err(TxError::BadArea {
            structure: "hardware undo log",
            addr: log.base,
            problem,
        }),
        None => Ok(()),
    }
}

impl Protocol for HwUndoProtocol {
    type Mem = Machine;

    fn name(&self) -> &'static str {
        "hw-undo"
    }

    fn recover(&mut self) -> Result<Recovery, TxError> {
        if self.phase == Phase::InTx {
            return Err(TxError::InTransaction);
        }
        self.done = log::open(&mut self.m, self.log)?;
        let live = log::live_entries(&mut self.m, self.log, self.data, self.done)?;
        let mut rec = Recovery::default();
        if live.is_empty() {
            rec.note = format!("no live entries (transaction tag {} finished)", self.done);
        } else {
            for e in live.iter().rev() {
                self.m.write(e.addr, &e.old)?;
            }
            let lines: Vec<Addr> = live.iter().map(|e| e.addr).collect();
            self.write_back(&lines, Source::Data)?;
            self.mark_done()?;
            rec.repaired = true;
            rec.entries = live.len() as u64;
            rec.note = format!("rolled back {} lines", live.len());
        }
        self.phase = Phase::Idle;
        Ok(rec)
    }

    fn begin(&mut self) -> Result<(), TxError> {
        self.phase.check_begin()?;
        self.phase = Phase::InTx;
        Ok(())
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        self.phase.check_read()?;
        self.check_data("read", addr, buf.len() as u64)?;
        Ok(self.m.read(addr, buf)?)
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        self.phase.check_in_tx("write")?;
        let len = data.len() as u64;
        self.check_data("write", addr, len)?;
        if len == 0 {
            return Ok(());
        }
        let lines: Vec<Addr> = (addr / LINE..=(addr + len - 1) / LINE)
            .map(|l| l * LINE)
            .filter(|l| !self.logged.contains(l))
            .collect();
        let slots = capacity(self.log.len);
        if self.entries.len() as u64 + lines.len() as u64 > slots {
            return Err(TxError::LogFull {
                kind: "hardware undo",
                needed: (self.entries.len() + lines.len()) as u64 * ENTRY,
                capacity: slots * ENTRY,
            });
        }
        for l in lines {
            self.log_line(l)?;
        }
        self.m.write(addr, data)?;
        self.stats.writes += 1;
        self.stats.write_bytes += len;
        Ok(())
    }

    fn commit(&mut self) -> Result<TxId, TxError> {
        self.phase.check_in_tx("commit")?;
        if !self.entries.is_empty() {
            let lines: Vec<Addr> = self.entries.iter().map(|e| e.addr).collect();
            self.write_back(&lines, Source::Data)?;
            self.mark_done()?;
        }
        self.end_transaction();
        self.committed += 1;
        self.stats.commits += 1;
        Ok(self.committed)
    }

    fn abort(&mut self) -> Result<(), TxError> {
        self.phase.check_in_tx("abort")?;
        if !self.entries.is_empty() {
            let entries = std::mem::take(&mut self.entries);
            for e in entries.iter().rev() {
                self.m.write(e.addr, &e.old)?;
            }
            let lines: Vec<Addr> = entries.iter().map(|e| e.addr).collect();
            self.write_back(&lines, Source::Data)?;
            self.mark_done()?;
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

    fn memory(&self) -> &Machine {
        &self.m
    }

    fn memory_mut(&mut self) -> &mut Machine {
        &mut self.m
    }

    fn into_memory(self) -> Machine {
        self.m
    }
}

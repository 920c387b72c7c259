//! Kiln (Zhao et al., MICRO 2013, as paper 001 uses it) and LOC-Kiln: persistence at a
//! non-volatile last-level cache.
//!
//! The LLC is non-volatile (its persistent state: [`mirror`]); L1 and L2 are volatile.
//! A transaction's stores stay in L1/L2, tagged with it; a line of it that L2 gives up
//! moves into the NV-LLC as an uncommitted version, pinned there (never evicted to
//! memory, where it would overwrite the committed data). A commit register in the
//! NV-LLC says which transactions committed; recovery writes every committed version
//! home and drops the others.
//!
//! - **Kiln**: `TxCommit` flushes the transaction's lines from L1/L2 into the NV-LLC
//!   (one LLC write each, pipelined one per cycle after the LLC's latency), waits for
//!   them, then writes the commit register (another LLC write) and waits: Kiln "shortens
//!   the persistence path" from memory to the LLC, with the same strict ordering.
//! - **LOC-Kiln**: Kiln with Speculative Persistence (§V-B: "only flushing L1 and L2
//!   caches (as in Kiln) and performing loose ordering (as in LOC)"). A window of SD
//!   transactions commits without flushing; their lines stay in L1/L2, where a later
//!   transaction's store to a line an earlier one wrote first pushes the earlier version
//!   into the NV-LLC (the multi-versioned cache, kept for an abort) and writes coalesce
//!   across the window; at the window's end its lines are flushed and the register moves
//!   past the whole window at once, so in-order commit needs no dependency pairs. The
//!   paper does not say how LOC-Kiln commits; in the NV-LLC a commit record costs one LLC
//!   write, so Eager Commit has little to remove and we keep Kiln's register.
//!
//! An LLC set whose every way holds an uncommitted version cannot take another line:
//! Kiln then falls back to software (its paper's overflow case), which pmlab does not
//! model — the operation fails with [`HwError::Overflow`], and the reproduction reports
//! any such case.
//!
//! Kiln with SD = 1 and LOC-Kiln are one engine; Kiln is the SD = 1 case.

pub mod mirror;
pub mod recovery;
mod window;

use std::collections::{HashSet, VecDeque};

use pmlab_model::Machine;
use pmlab_spine::LINE;

use crate::core::{ComputeModel, Core};
use crate::engine::{Engine, EngineStats, HwError};
use crate::hierarchy::Meta;
use crate::ledger::Wait;
use mirror::{Mirror, VICTIMS, Version};

/// The running transaction.
#[derive(Debug, Default)]
struct Active {
    hw: Option<u64>,
    lines: Vec<u64>,
    first: HashSet<u64>,
    undo: Vec<(u64, [u8; 64])>,
}

/// Kiln and LOC-Kiln.
pub struct Kiln {
    core: Core,
    mirror: Mirror,
    sd: u32,
    /// The commit register: the last committed transaction.
    reg: u64,
    next_hw: u64,
    active: Option<Active>,
    /// Committed transactions of the window, with their lines.
    window: Vec<(u64, Vec<u64>)>,
    /// Write-back buffer slots in use, oldest first, with their home writes' completion.
    victims: VecDeque<(usize, u64)>,
    free_victims: Vec<usize>,
    /// Broken variant: the commit register is written before the lines reach the
    /// NV-LLC, and nothing is waited for.
    no_wait: bool,
    /// Kiln (SD 1) flushes one line into the NV-LLC at a time (see
    /// [`crate::HwConfig::serial_persist`]).
    serial: bool,
    stats: EngineStats,
}

impl Kiln {
    /// A fresh instance with speculation degree `sd` (1: Kiln); the NV-LLC's persistent
    /// state in `[base, base + len)` (formatted here).
    pub fn format(
        m: Machine,
        base: u64,
        len: u64,
        sd: u32,
        compute: ComputeModel,
    ) -> Result<Kiln, crate::HwSetupError> {
        let mut k = Kiln::resume(m, base, len, 0, sd, compute)?;
        let head = k.mirror.head(0);
        k.core.m.nv_write(base, &head);
        let empty = mirror::encode(None);
        for a in k.mirror.records().collect::<Vec<_>>() {
            k.core.m.nv_write(a, &empty);
        }
        Ok(k)
    }

    /// An instance continuing after recovery (register `reg`, records empty).
    pub fn resume(
        m: Machine,
        base: u64,
        len: u64,
        reg: u64,
        sd: u32,
        compute: ComputeModel,
    ) -> Result<Kiln, crate::HwSetupError> {
        let mut core = Core::new(m, compute)?;
        core.h.pin_uncommitted = true;
        let mirror = Mirror::new(base, len, core.h.llc_ways() as u64)
            .ok_or(crate::HwSetupError::LogArea(base, len))?;
        Ok(Kiln {
            core,
            mirror,
            sd: sd.max(1),
            reg,
            next_hw: reg + 1,
            active: None,
            window: Vec::new(),
            victims: VecDeque::new(),
            free_victims: (0..VICTIMS as usize).rev().collect(),
            no_wait: false,
            serial: false,
            stats: EngineStats::default(),
        })
    }

    /// The NV-LLC's persistent state's place.
    pub fn mirror(&self) -> &Mirror {
        &self.mirror
    }

    /// Flushes one line at a time at a strict commit (SD 1).
    pub fn with_serial(mut self, on: bool) -> Kiln {
        self.serial = on && self.sd == 1;
        self
    }

    /// The broken variant whose commit does not wait for the NV-LLC.
    pub fn with_no_wait(mut self, on: bool) -> Kiln {
        self.no_wait = on;
        self
    }

    fn uncommitted(&self, tx: u64) -> bool {
        tx > self.reg
    }

    fn record(&mut self, addr: u64, v: Option<&Version>) {
        let b = mirror::encode(v);
        self.core.m.nv_write(addr, &b);
    }

    /// The dirty version way `w` holds, from its record.
    fn way_version(&self, w: usize) -> Version {
        let a = self.mirror.way(w) as usize;
        let b: [u8; 80] = self.core.m.current_image()[a..a + 80]
            .try_into()
            .expect("80");
        mirror::decode(&b).expect("a dirty way has a record")
    }

    fn access(&mut self, line: u64) -> Result<(), HwError> {
        self.core.access(line)?;
        self.settle()
    }

    /// Handles what the hierarchy gave up: evicted committed versions go home through
    /// the write-back buffer; volatile versions L2 gave up move into the NV-LLC.
    fn settle(&mut self) -> Result<(), HwError> {
        loop {
            self.write_back_evicted()?;
            match self.core.h.take_demoted() {
                Some(line) => self.demote(line)?,
                None => return Ok(()),
            }
        }
    }

    /// Sends every evicted committed version home. Runs before anything writes the
    /// record of a way just allocated, which still holds the evicted version.
    fn write_back_evicted(&mut self) -> Result<(), HwError> {
        while let Some(e) = self.core.h.take_evicted() {
            if e.meta.dirty {
                self.write_back(e.way)?;
            }
        }
        Ok(())
    }

    /// Way `w`'s committed version leaves the LLC: into the write-back buffer (still
    /// non-volatile) and home; its buffer slot frees when the home write completes.
    fn write_back(&mut self, w: usize) -> Result<(), HwError> {
        let v = self.way_version(w);
        let slot = self.victim_slot();
        self.record(self.mirror.victim(slot), Some(&v));
        self.record(self.mirror.way(w), None);
        let now = self.core.m.cycles();
        let done = self.core.m.port_write(now, v.line * LINE, &v.data);
        self.victims.push_back((slot, done));
        self.stats.home_writes += 1;
        Ok(())
    }

    fn victim_slot(&mut self) -> usize {
        self.retire_victims();
        if self.free_victims.is_empty() {
            let (_, done) = *self.victims.front().expect("slots are in use");
            self.core.persist_wait(done, Wait::WriteBuffer);
            self.retire_victims();
        }
        self.free_victims.pop().expect("a slot was freed")
    }

    /// Frees the write-back buffer slots whose home writes completed, oldest first.
    fn retire_victims(&mut self) {
        let now = self.core.m.cycles();
        while let Some(&(slot, done)) = self.victims.front() {
            if done > now {
                break;
            }
            self.victims.pop_front();
            self.record(self.mirror.victim(slot), None);
            self.free_victims.push(slot);
        }
    }

    /// Moves `line`'s volatile version into the NV-LLC. If the NV-LLC holds a dirty
    /// version of another transaction, that one stays beside it (an older version).
    fn demote(&mut self, line: u64) -> Result<(), HwError> {
        let w = self
            .core
            .h
            .newest(line)
            .expect("inclusion: L2's lines are in the LLC");
        let meta = *self.core.h.meta(w);
        if !meta.vdirty {
            return Ok(());
        }
        let tx = meta.vtx;
        let v = Version {
            line,
            tx,
            data: self.core.line_data(line),
        };
        let fresh = Meta {
            tx,
            dirty: true,
            txdirty: self.uncommitted(tx),
            ..Meta::default()
        };
        if meta.dirty && meta.tx != tx {
            self.core.h.meta_mut(w).old = true;
            self.core.h.meta_mut(w).vdirty = false;
            let w2 = self.core.h.alloc_version(line, fresh, Some(w))?;
            self.write_back_evicted()?;
            self.record(self.mirror.way(w2), Some(&v));
            self.settle()?;
        } else {
            *self.core.h.meta_mut(w) = fresh;
            self.record(self.mirror.way(w), Some(&v));
        }
        self.stats.log_lines += 1;
        Ok(())
    }

    fn store_line(&mut self, line: u64) -> Result<(), HwError> {
        let hw = match self.active.as_ref().and_then(|a| a.hw) {
            Some(hw) => hw,
            None => {
                let hw = self.next_hw;
                self.next_hw += 1;
                self.active.as_mut().expect("running").hw = Some(hw);
                hw
            }
        };
        let a = self.active.as_mut().expect("running");
        if a.first.insert(line) {
            a.lines.push(line);
            let before = self.core.line_data(line);
            a.undo.push((line, before));
            let w = self.core.h.newest(line).expect("just accessed");
            let meta = *self.core.h.meta(w);
            if meta.vdirty && meta.vtx != hw {
                // An earlier transaction's version is only in the volatile levels: keep
                // it, in the NV-LLC, before this store overwrites it.
                self.demote(line)?;
            }
        }
        let w = self.core.h.newest(line).expect("just accessed");
        let m = self.core.h.meta_mut(w);
        m.vdirty = true;
        m.vtx = hw;
        Ok(())
    }
}

impl Engine for Kiln {
    fn core(&self) -> &Core {
        &self.core
    }

    fn core_mut(&mut self) -> &mut Core {
        &mut self.core
    }

    fn begin(&mut self) -> Result<(), HwError> {
        self.core.instruction();
        let per_tx = self.core.compute.per_tx;
        self.core.compute(per_tx);
        self.active = Some(Active::default());
        Ok(())
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), HwError> {
        let c = self.core.compute.per_access;
        self.core.compute(c);
        for (line, _, off, n) in Core::pieces(addr, buf.len()) {
            self.access(line)?;
            self.core.view(addr + off as u64, &mut buf[off..off + n]);
        }
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), HwError> {
        let c = self.core.compute.per_access;
        self.core.compute(c);
        for (line, _, off, n) in Core::pieces(addr, data.len()) {
            self.access(line)?;
            self.store_line(line)?;
            self.core.set_view(addr + off as u64, &data[off..off + n]);
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<Option<u64>, HwError> {
        self.core.instruction();
        self.commit_active()
    }

    fn abort(&mut self) -> Result<(), HwError> {
        self.core.instruction();
        self.abort_active()
    }

    fn flush(&mut self) -> Result<(), HwError> {
        self.core.instruction();
        self.end_window()
    }

    fn durable_hw(&self) -> u64 {
        self.reg
    }

    fn stats(&self) -> EngineStats {
        let mut s = self.stats.clone();
        s.versions_kept = self.core.h.stats().versions_kept;
        s
    }

    fn shutdown(mut self: Box<Self>) -> Result<Machine, HwError> {
        if self.active.is_some() {
            self.abort_active()?;
        }
        self.end_window()?;
        let mut done = self.core.m.cycles();
        for w in 0..self.core.h.llc_ways() {
            if self.core.h.line_of(w).is_some() && self.core.h.meta(w).dirty {
                let v = self.way_version(w);
                let now = self.core.m.cycles();
                done = done.max(self.core.m.port_write(now, v.line * LINE, &v.data));
                self.core.h.meta_mut(w).dirty = false;
            }
        }
        self.core.persist_wait(done, Wait::Flush);
        self.retire_victims();
        let empty = mirror::encode(None);
        for a in self.mirror.records().collect::<Vec<_>>() {
            self.core.m.nv_write(a, &empty);
        }
        Ok(self.core.m)
    }
}

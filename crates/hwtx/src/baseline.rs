//! The baseline of paper 001's figures: the same machine running the workloads without
//! transaction support ("without any transaction support and thus without the
//! associated overheads", §V-B). Stores go to the caches, dirty lines reach home when
//! the LLC evicts them, and nothing is ordered; it survives no crash.
//!
//! The transaction interface still asks that an abort restore what the transaction
//! changed; the baseline keeps each line's bytes before its first store in the running
//! transaction (bookkeeping of the model, not charged: the baseline's figures run no
//! aborts).

use std::collections::HashSet;

use pmlab_model::Machine;
use pmlab_spine::LINE;

use crate::core::{ComputeModel, Core};
use crate::engine::{Engine, EngineStats, HwError};

/// The baseline.
pub struct Baseline {
    core: Core,
    undo: Vec<(u64, [u8; 64])>,
    first: HashSet<u64>,
    stats: EngineStats,
}

impl Baseline {
    /// The baseline over `m`.
    pub fn new(m: Machine, compute: ComputeModel) -> Result<Baseline, crate::HwSetupError> {
        Ok(Baseline {
            core: Core::new(m, compute)?,
            undo: Vec::new(),
            first: HashSet::new(),
            stats: EngineStats::default(),
        })
    }

    fn access(&mut self, line: u64) -> Result<(), HwError> {
        self.core.access(line)?;
        write_back_evicted(&mut self.core, &mut self.stats);
        Ok(())
    }
}

/// Writes home every dirty line the LLC gave up (a plain write-back cache).
pub(crate) fn write_back_evicted(core: &mut Core, stats: &mut EngineStats) {
    while let Some(e) = core.h.take_evicted() {
        if e.meta.dirty {
            let now = core.m.cycles();
            let data = core.line_data(e.line);
            core.m.port_write(now, e.line * LINE, &data);
            stats.home_writes += 1;
        }
    }
}

/// Writes home every dirty line still cached and waits: a clean shutdown.
pub(crate) fn write_back_all(core: &mut Core, stats: &mut EngineStats) {
    let mut done = core.m.cycles();
    for w in 0..core.h.llc_ways() {
        let Some(line) = core.h.line_of(w) else {
            continue;
        };
        if core.h.meta(w).dirty {
            let now = core.m.cycles();
            let data = core.line_data(line);
            done = done.max(core.m.port_write(now, line * LINE, &data));
            core.h.meta_mut(w).dirty = false;
            stats.home_writes += 1;
        }
    }
    core.persist_wait(done, crate::ledger::Wait::Flush);
}

impl Engine for Baseline {
    fn core(&self) -> &Core {
        &self.core
    }

    fn core_mut(&mut self) -> &mut Core {
        &mut self.core
    }

    fn begin(&mut self) -> Result<(), HwError> {
        let per_tx = self.core.compute.per_tx;
        self.core.compute(per_tx);
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
            if self.first.insert(line) {
                self.undo.push((line, self.core.line_data(line)));
            }
            let w = self.core.h.newest(line).expect("just accessed");
            self.core.h.meta_mut(w).dirty = true;
            self.core.set_view(addr + off as u64, &data[off..off + n]);
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<Option<u64>, HwError> {
        self.undo.clear();
        self.first.clear();
        self.stats.write_commits += 1;
        Ok(None)
    }

    fn abort(&mut self) -> Result<(), HwError> {
        for (line, before) in self.undo.drain(..).rev() {
            self.core.set_view(line * LINE, &before);
        }
        self.first.clear();
        self.stats.aborts += 1;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), HwError> {
        Ok(())
    }

    fn durable_hw(&self) -> u64 {
        0
    }

    fn stats(&self) -> EngineStats {
        self.stats.clone()
    }

    fn shutdown(mut self: Box<Self>) -> Result<Machine, HwError> {
        write_back_all(&mut self.core, &mut self.stats);
        Ok(self.core.m)
    }
}

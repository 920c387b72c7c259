//! Where every cycle of the core went: the cycle ledger of paper 001's protocols.
//!
//! The core's clock moves only through [`crate::Core`]'s four doors — an access, the
//! workload's computation, a protocol instruction, a persistence wait — and each door
//! books the cycles it charges here under a name. So the ledger's total equals the
//! cycles the clock moved, exactly, and the difference between two protocols' runs of
//! the same operations splits into named parts that sum to the difference (the
//! reproduction's `profile.csv` and a test over every protocol check both).

use serde::Serialize;

/// Why the core waited for persistence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Wait {
    /// `TxBegin` held until the previous speculation window (EC-WAL, LOC-WAL: a window
    /// of one or SD transactions) is persistent ("CRL stalls new transactions until the
    /// current speculation window completes", LOC §IV-B).
    Window,
    /// A commit waiting for its own writes: H-WAL's blocks, then its commit record;
    /// Kiln's lines reaching the NV-LLC and its commit register.
    Commit,
    /// The ordered in-place phase: a persistent transaction's (or, with
    /// `window_in_place`, window's) lines written home before the next transaction.
    InPlace,
    /// A checkpoint: the oldest persistent windows' lines written home and the log head
    /// moved past them (a full Tx State Table or log).
    Checkpoint,
    /// `TxFlush`.
    Flush,
    /// S-WAL's `mfence`, and its `clflush` when one write is in flight at a time.
    Fence,
    /// Kiln's write-back buffer full.
    WriteBuffer,
}

impl Wait {
    /// Every cause, in ledger order.
    pub const ALL: [Wait; 7] = [
        Wait::Window,
        Wait::Commit,
        Wait::InPlace,
        Wait::Checkpoint,
        Wait::Flush,
        Wait::Fence,
        Wait::WriteBuffer,
    ];

    /// A short name (CSV columns, JSON keys).
    pub fn name(self) -> &'static str {
        match self {
            Wait::Window => "window_wait",
            Wait::Commit => "commit_wait",
            Wait::InPlace => "in_place_wait",
            Wait::Checkpoint => "checkpoint_wait",
            Wait::Flush => "flush_wait",
            Wait::Fence => "fence_wait",
            Wait::WriteBuffer => "write_buffer_wait",
        }
    }

    fn index(self) -> usize {
        Wait::ALL
            .iter()
            .position(|&w| w == self)
            .expect("every cause is listed")
    }
}

/// Cycles by what the core did with them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CycleLedger {
    /// The workload's computation ([`crate::ComputeModel`]).
    pub compute: u64,
    /// The protocols' own instructions: `TxBegin`, `TxCommit`, `TxAbort`, `TxFlush`,
    /// `clflush`, `mfence`, and S-WAL's accesses of its write set.
    pub instructions: u64,
    /// `served[i]`: accesses served by level `i` (0 is L1); the last entry is memory.
    pub served: Vec<u64>,
    /// `level_cycles[i]`: their cycles (issue and the latencies of the levels looked
    /// in; for memory also the access itself, as if its bank were idle).
    pub level_cycles: Vec<u64>,
    /// Cycles memory reads waited for a bank busy with requests queued before them.
    pub read_queue: u64,
    /// Persistence waits by cause, in [`Wait::ALL`]'s order.
    pub waits: [u64; 7],
}

impl CycleLedger {
    /// An empty ledger of `levels` cache levels.
    pub fn new(levels: usize) -> CycleLedger {
        CycleLedger {
            served: vec![0; levels + 1],
            level_cycles: vec![0; levels + 1],
            ..CycleLedger::default()
        }
    }

    /// Cycles waited for `w`.
    pub fn wait(&self, w: Wait) -> u64 {
        self.waits[w.index()]
    }

    pub(crate) fn add_wait(&mut self, w: Wait, cycles: u64) {
        self.waits[w.index()] += cycles;
    }

    /// Every cycle booked.
    pub fn total(&self) -> u64 {
        self.compute
            + self.instructions
            + self.level_cycles.iter().sum::<u64>()
            + self.read_queue
            + self.waits.iter().sum::<u64>()
    }

    /// `self - before`, entry by entry (the part of a run after `before` was taken).
    pub fn since(&self, before: &CycleLedger) -> CycleLedger {
        let sub = |a: &[u64], b: &[u64]| a.iter().zip(b).map(|(x, y)| x - y).collect();
        let mut waits = self.waits;
        for (w, b) in waits.iter_mut().zip(before.waits) {
            *w -= b;
        }
        CycleLedger {
            compute: self.compute - before.compute,
            instructions: self.instructions - before.instructions,
            served: sub(&self.served, &before.served),
            level_cycles: sub(&self.level_cycles, &before.level_cycles),
            read_queue: self.read_queue - before.read_queue,
            waits,
        }
    }

    /// The ledger's entries as `(name, cycles)`, in order: compute, instructions, each
    /// level's cycles (`l1`, `l2`, ..., `llc`, `memory`), the read queue, each wait.
    pub fn parts(&self) -> Vec<(String, u64)> {
        let levels = self.level_cycles.len();
        let mut v = vec![
            ("compute".to_string(), self.compute),
            ("instructions".to_string(), self.instructions),
        ];
        for (i, &c) in self.level_cycles.iter().enumerate() {
            v.push((level_name(i, levels), c));
        }
        v.push(("read_queue".into(), self.read_queue));
        for w in Wait::ALL {
            v.push((w.name().into(), self.wait(w)));
        }
        v
    }
}

/// `l1`, `l2`, ... for the cache levels, `llc` for the last, `memory` after it.
pub fn level_name(i: usize, entries: usize) -> String {
    if i + 1 == entries {
        "memory".into()
    } else if i + 2 == entries {
        "llc".into()
    } else {
        format!("l{}", i + 1)
    }
}

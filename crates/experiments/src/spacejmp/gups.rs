//! GUPS (§5.2): random updates to one large table split into windows. After each set
//! of `update_set` updates to one window, a new window is drawn at random. The three
//! designs differ in how the next window is reached:
//!
//! * MAP: one address space; the old window is unmapped and the new one mapped (with
//!   its page tables built) on the critical path.
//! * MP: one process per window; the master sends each set of updates as a message to
//!   the window's process and waits until it has applied them.
//! * VAS: one VAS per window, plus a shared heap segment holding the pending updates in
//!   every VAS; reaching a window is a `vas_switch`.
//!
//! With one window no design remaps, sends or switches: the master updates it itself.
//! Every index and value comes from xoshiro256++ seeded with the run's seed, and all
//! designs draw the same sequence.

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

/// One GUPS measurement (the JSON's `gups` entries).
#[derive(Clone, Debug, Serialize)]
pub struct GupsRow {
    /// `MAP`, `MP` or `VAS`.
    pub design: String,
    /// Updates per window visit (16 or 64).
    pub update_set: u32,
    /// Windows the table is split into.
    pub windows: u32,
    /// `native` or `model`.
    pub substrate: String,
    /// Million updates per second (median over repetitions; model: simulated time).
    pub mups: f64,
    /// Window changes (remaps, messages or switches) per second.
    pub changes_per_s: f64,
    /// TLB misses per second (model only).
    pub tlb_misses_per_s: Option<f64>,
}

/// The sizes of a GUPS run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct GupsShape {
    /// Bytes per window.
    pub window_bytes: u64,
    /// Windows.
    pub windows: u32,
    /// Updates per window visit.
    pub update_set: u32,
    /// Total updates.
    pub updates: u64,
}

impl GupsShape {
    /// 64-bit words per window.
    pub fn words(&self) -> u64 {
        self.window_bytes / 8
    }

    /// Window visits.
    pub fn visits(&self) -> u64 {
        self.updates / u64::from(self.update_set)
    }
}

/// One window visit: the window and its updates (word index, value to XOR in).
pub struct Visit {
    /// The window.
    pub window: u32,
    /// (index, value) pairs.
    pub updates: Vec<(u64, u64)>,
}

/// The visit sequence of a run: the same for every design.
pub fn visits(shape: &GupsShape, seed: u64) -> impl Iterator<Item = Visit> + '_ {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let words = shape.words();
    (0..shape.visits()).map(move |_| Visit {
        window: (rng.next_u64() % u64::from(shape.windows)) as u32,
        updates: (0..shape.update_set)
            .map(|_| (rng.next_u64() % words, rng.next_u64()))
            .collect(),
    })
}

/// The XOR of every word after a run, per window: all designs must agree.
pub fn reference_checksums(shape: &GupsShape, seed: u64) -> Vec<u64> {
    let mut sums = vec![0u64; shape.windows as usize];
    for v in visits(shape, seed) {
        for (_, val) in v.updates {
            sums[v.window as usize] ^= val;
        }
    }
    sums
}

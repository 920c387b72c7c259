//! The Sequential Heuristic (section 3.2.3).

use std::cmp::Ordering;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::used::UsedBins;
use super::{BinState, PlacementPolicy, rank};
use crate::{Asid, CacheGeometry, Pfn, Pool, Vpn};

/// The Sequential Heuristic: look at the `<used, free>` pair of every bin and map the
/// page into the best one by [`rank`] (rules 1-3 of section 3.2.3), breaking exact ties
/// uniformly at random (xoshiro256++), "such as a random choice". The frame taken is the
/// bin's least recently used pool frame.
///
/// O(B) per mapping, as the paper says ("The O(B) time computational complexity
/// required by the Sequential Heuristic to sequentially traverse the bins"); `used` is
/// kept per address space, `free` system-wide by the pool.
#[derive(Debug, Clone)]
pub struct Sequential {
    bins: u32,
    rng: Xoshiro256PlusPlus,
    used: UsedBins,
}

impl Sequential {
    /// The Sequential Heuristic for the bins of `geometry`, ties broken from `seed`.
    pub fn new(geometry: CacheGeometry, seed: u64) -> Self {
        Sequential {
            bins: geometry.bins(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            used: UsedBins::new(geometry.bins()),
        }
    }

    /// The best bin for `asid` given the pool.
    pub fn choose_bin(&mut self, asid: Asid, pool: &Pool) -> u32 {
        let used = self.used.of(asid);
        let mut best: Option<(u32, BinState)> = None;
        let mut ties = 0u32;
        for bin in 0..self.bins {
            let state = BinState {
                used: used.leaf(bin),
                free: pool.free_in_bin(bin),
            };
            if state.free == 0 {
                continue; // rule (1)
            }
            match best {
                None => {
                    best = Some((bin, state));
                    ties = 1;
                }
                Some((_, b)) => match rank(state, b) {
                    Ordering::Greater => {
                        best = Some((bin, state));
                        ties = 1;
                    }
                    // Reservoir sampling: each of the tied bins ends up chosen with
                    // probability 1/ties.
                    Ordering::Equal => {
                        ties += 1;
                        if self.rng.gen_range(0..ties) == 0 {
                            best = Some((bin, state));
                        }
                    }
                    Ordering::Less => {}
                },
            }
        }
        best.expect("the pool is never empty").0
    }
}

impl PlacementPolicy for Sequential {
    fn name(&self) -> &'static str {
        "sequential"
    }

    fn bins(&self) -> u32 {
        self.bins
    }

    fn choose(&mut self, asid: Asid, _vpn: Vpn, pool: &Pool) -> Pfn {
        let bin = self.choose_bin(asid, pool);
        pool.lru_in_bin(bin).expect("chosen bin has a free frame")
    }

    fn mapped(&mut self, asid: Asid, _vpn: Vpn, pfn: Pfn) {
        self.used.mapped(asid, pfn);
    }

    fn unmapped(&mut self, asid: Asid, _vpn: Vpn, pfn: Pfn) {
        self.used.unmapped(asid, pfn);
    }

    fn exited(&mut self, asid: Asid) {
        self.used.exited(asid);
    }
}

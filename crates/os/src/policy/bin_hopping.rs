//! The Bin Hopping Heuristic (section 3.2.2).

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::PlacementPolicy;
use crate::{Asid, CacheGeometry, Pfn, Pool, Vpn};

/// Bin Hopping: each address space maps its pages to successive bins. "Bin Hopping can
/// be implemented by maintaining a bin pointer that is initialized to a random value and
/// incremented at the time each page is mapped. [...] The bins can be traversed
/// successively with the bin pointer until one is found with an available page frame,
/// saving the new bin pointer after it is used."
///
/// The pointer starts at a bin drawn from xoshiro256++ when the process maps its first
/// page. The search for the next bin with a free frame scans a bitset (64 bins per
/// word), so it is O(1) for the paper's caches and O(B/64) at worst.
#[derive(Debug, Clone)]
pub struct BinHopping {
    bins: u32,
    rng: Xoshiro256PlusPlus,
    pointers: HashMap<Asid, u32>,
}

impl BinHopping {
    /// Bin Hopping for the bins of `geometry`, start bins drawn from `seed`.
    pub fn new(geometry: CacheGeometry, seed: u64) -> Self {
        BinHopping {
            bins: geometry.bins(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            pointers: HashMap::new(),
        }
    }
}

impl PlacementPolicy for BinHopping {
    fn name(&self) -> &'static str {
        "bin-hopping"
    }

    fn bins(&self) -> u32 {
        self.bins
    }

    fn choose(&mut self, asid: Asid, _vpn: Vpn, pool: &Pool) -> Pfn {
        let bins = self.bins;
        let rng = &mut self.rng;
        let pointer = self
            .pointers
            .entry(asid)
            .or_insert_with(|| rng.gen_range(0..bins));
        let bin = pool
            .next_bin_with_free(*pointer)
            .expect("the pool is never empty");
        *pointer = (bin + 1) & (bins - 1);
        pool.lru_in_bin(bin).expect("bin has a free frame")
    }

    fn exited(&mut self, asid: Asid) {
        self.pointers.remove(&asid);
    }
}

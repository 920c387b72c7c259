//! Random placement: the baseline.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::PlacementPolicy;
use crate::{Asid, Pfn, Pool, Vpn};

/// Maps each page to a pool frame drawn uniformly at random (xoshiro256++), ignoring
/// bins: the "random mapping" of the paper's model (section 2) and simulations.
#[derive(Debug, Clone)]
pub struct RandomPlacement {
    rng: Xoshiro256PlusPlus,
}

impl RandomPlacement {
    /// A random policy seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        RandomPlacement {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }
}

impl PlacementPolicy for RandomPlacement {
    fn name(&self) -> &'static str {
        "random"
    }

    fn bins(&self) -> u32 {
        1
    }

    fn choose(&mut self, _pid: Asid, _vpn: Vpn, pool: &Pool) -> Pfn {
        pool.nth(self.rng.gen_range(0..pool.len()))
    }
}

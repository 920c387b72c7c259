//! A Monte Carlo of random mappings through the OS model, to set beside the analytic
//! model of section 2.

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::policy::RandomPlacement;
use crate::{CacheGeometry, Os, OsConfig, OsError, conflicts_of};

/// What to simulate: one process first-touching pages `0, 1, 2, ...` on a fresh OS with
/// random placement, its page conflicts recorded in every cache of `geometries` when it
/// has touched each of `sizes` pages.
#[derive(Debug, Clone)]
pub struct MonteCarloConfig {
    /// Memory, pool and page size (the seed field is ignored: each trial draws its own).
    pub os: OsConfig,
    /// The caches whose conflicts are recorded.
    pub geometries: Vec<CacheGeometry>,
    /// Application sizes `U` in pages, ascending.
    pub sizes: Vec<u64>,
    /// Independent trials.
    pub trials: u32,
    /// Seed of the xoshiro256++ generator that seeds every trial.
    pub seed: u64,
}

/// The sample mean of a quantity over the trials, with its standard error.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// Sample mean.
    pub mean: f64,
    /// Standard error of the mean, `s / sqrt(n)`.
    pub std_err: f64,
    /// Number of samples `n`.
    pub samples: u32,
    /// Whether every sample was the same value (then `std_err` is 0 and says nothing about
    /// events rarer than about `1/n`).
    pub constant: bool,
}

#[derive(Clone, Copy, Default)]
struct Accumulator {
    n: u32,
    sum: f64,
    sum_sq: f64,
    first: Option<u64>,
    constant: bool,
}

impl Accumulator {
    fn push(&mut self, x: u64) {
        match self.first {
            None => {
                self.first = Some(x);
                self.constant = true;
            }
            Some(f) => self.constant &= f == x,
        }
        self.n += 1;
        self.sum += x as f64;
        self.sum_sq += (x as f64) * (x as f64);
    }

    fn estimate(&self) -> Estimate {
        let n = f64::from(self.n.max(1));
        let mean = self.sum / n;
        let var = if self.n > 1 {
            ((self.sum_sq - n * mean * mean) / (n - 1.0)).max(0.0)
        } else {
            0.0
        };
        Estimate {
            mean,
            std_err: (var / n).sqrt(),
            samples: self.n,
            constant: self.constant,
        }
    }
}

/// Runs the Monte Carlo; returns, per geometry, the page-conflict estimate `C` at each
/// size.
///
/// Each trial builds a fresh [`Os`] (a new random LRU order) with [`RandomPlacement`],
/// both seeded from the master generator. Because the LRU order is a uniformly random
/// permutation and the random policy looks only at pool positions, the frames a trial
/// maps form a uniformly random `U`-subset of all `N` frames: the sampling without
/// replacement of equation 1 with `P = N`, reached through the real LRU list and pool.
/// That holds only while no mapped page is evicted, so the largest size must not exceed
/// `N - K`.
pub fn random_mapping_conflicts(config: &MonteCarloConfig) -> Result<Vec<Vec<Estimate>>, OsError> {
    let largest = config.sizes.iter().copied().max().unwrap_or(0);
    let room = u64::from(config.os.frames - config.os.pool_frames.min(config.os.frames));
    if largest > room {
        return Err(OsError::OutOfRange {
            field: "application pages",
            value: largest,
            expected: "<= memory frames - pool frames (no page may be evicted)",
        });
    }
    if config.sizes.windows(2).any(|w| w[0] > w[1]) {
        return Err(OsError::OutOfRange {
            field: "application pages",
            value: largest,
            expected: "ascending sizes",
        });
    }
    let mut acc = vec![vec![Accumulator::default(); config.sizes.len()]; config.geometries.len()];
    let mut master = Xoshiro256PlusPlus::seed_from_u64(config.seed);
    for _ in 0..config.trials {
        let os_config = OsConfig {
            seed: master.next_u64(),
            ..config.os
        };
        let mut os = Os::new(os_config, Box::new(RandomPlacement::new(master.next_u64())))?;
        let mut touched = 0u64;
        for (i, &size) in config.sizes.iter().enumerate() {
            while touched < size {
                os.touch(1, touched);
                touched += 1;
            }
            for (g, geometry) in config.geometries.iter().enumerate() {
                let frames = os.address_space(1).into_iter().flat_map(|s| s.frames());
                acc[g][i].push(conflicts_of(frames, geometry).conflicts);
            }
        }
    }
    Ok(acc
        .iter()
        .map(|row| row.iter().map(Accumulator::estimate).collect())
        .collect())
}

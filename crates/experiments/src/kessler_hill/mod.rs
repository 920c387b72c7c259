//! Kessler & Hill, "Miss Reduction in Large, Real-Indexed Caches" (UW CS TR 940, 1990):
//! careful virtual-to-physical page mapping evaluated by trace-driven simulation.
//!
//! The experiment multiprograms real programs' traces round-robin (the paper's Mult2.2
//! switch interval of 214,000 instructions), maps each process's pages on first touch
//! through the OS model (global LRU list, pool of available frames at its bottom) with
//! the placement policy under test, and simulates split 32 KiB direct-mapped level-one
//! caches with 32-byte blocks feeding nine unified level-two caches (1, 4, 16 MiB x 1, 2,
//! 4 ways, 128-byte blocks, random replacement) in one pass. The metric is level-two
//! misses per 1000 instructions, as in the paper.

pub mod paper;
mod plots;
mod simulate;
mod tables;
mod workload;

pub use simulate::{PassResult, PassSpec, SpaceSample, run_pass};
pub use tables::Report;
pub use workload::{Program, Workload, WorkloadError};

use pmlab_os::PolicyKind;
use std::path::PathBuf;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Samples (seeds) per policy and pool; the paper uses 4.
    pub samples: u32,
    /// First seed; sample `i` uses `seed + i`.
    pub seed: u64,
    /// Physical memory in bytes (the paper: 128 MiB).
    pub memory: u64,
    /// The large and the small pool in bytes (the paper: 4 MiB and 256 KiB).
    pub pools: (u64, u64),
    /// Page size in bytes (the paper: 16 KiB).
    pub page_size: u64,
    /// Instructions between context switches (Mult2.2: 214,000).
    pub switch_interval: u64,
    /// Where tables, JSON/CSV and plots go.
    pub out_dir: PathBuf,
    /// Worker threads for independent passes.
    pub threads: usize,
    /// Show a progress bar.
    pub progress: bool,
}

impl Config {
    /// The paper's parameters with `samples` seeds, results under `out_dir`.
    pub fn paper(out_dir: PathBuf) -> Self {
        Config {
            samples: 4,
            seed: 1,
            memory: 128 << 20,
            pools: (4 << 20, 256 << 10),
            page_size: 16 << 10,
            switch_interval: 214_000,
            out_dir,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            progress: true,
        }
    }
}

/// An experiment that could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The workload could not be built.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// A configuration the OS model or the caches refused.
    #[error("configuration: {0}")]
    Config(String),
    /// An output file could not be written.
    #[error(transparent)]
    Report(#[from] pmlab_report::ReportError),
}

/// The passes the tables need: every policy with the large pool over the nine level-two
/// caches (Tables 1, 2 and 4, and Table 3's large-pool column), and every policy with the
/// small pool over the 4 MiB direct-mapped cache (Table 3's small-pool column).
pub fn plan(config: &Config) -> Vec<PassSpec> {
    let mut specs = Vec::new();
    for (pool, all_l2) in [(config.pools.0, true), (config.pools.1, false)] {
        for policy in PolicyKind::ALL {
            for i in 0..config.samples {
                specs.push(PassSpec {
                    policy,
                    pool,
                    seed: config.seed + u64::from(i),
                    all_l2,
                });
            }
        }
    }
    specs
}

/// Runs the whole reproduction on `workload` and returns the report (not yet written).
pub fn reproduce(config: &Config, workload: &Workload) -> Result<Report, ExperimentError> {
    let specs = plan(config);
    let results = simulate::run_passes(config, workload, &specs)?;
    Ok(Report::build(config, workload, results))
}

//! El Hajj et al., "SpaceJMP: Programming with Multiple Virtual Address Spaces"
//! (ASPLOS 2016), part 1: Figure 1 (page-table construction and removal), Table 2 and
//! Figure 6 (CR3 loads with and without tags: on the model and in a KVM guest), the
//! native `vas_switch`, and GUPS in the MAP, MP and VAS designs (Figures 8 and 9),
//! natively and on the model, beside the paper's numbers.
//!
//! Every random choice is xoshiro256++ seeded from the run's seed; figures are medians
//! over repetitions; every design of a GUPS run is checked against the same reference
//! (the XOR of the updates each window received).

mod fig1;
mod gups;
mod gups_model;
mod gups_native;
mod model_micro;
mod report;
mod run;
pub mod sam;
pub mod sam_report;
mod switch;

pub use fig1::Fig1Row;
pub use gups::{GupsRow, GupsShape};
pub use model_micro::{Figure6Model, Table2Model};
pub use report::{Report, TargetCheck};
pub use run::{Measurements, measure};
pub use switch::{SwitchResult, SwitchRow};

use std::path::PathBuf;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where CSV, JSON and SVG go.
    pub out_dir: PathBuf,
    /// A tmpfs directory for scratch registries.
    pub scratch: PathBuf,
    /// First seed.
    pub seed: u64,
    /// Repetitions of native timings.
    pub reps: usize,
    /// Figure 1's region sizes.
    pub fig1_sizes: Vec<u64>,
    /// Segment counts of the native switch benchmark.
    pub switch_segments: Vec<u32>,
    /// Switch pairs per repetition.
    pub switch_rounds: u32,
    /// Window counts of GUPS.
    pub windows: Vec<u32>,
    /// Update-set sizes (Figure 8: 16 and 64).
    pub update_sets: Vec<u32>,
    /// Native window bytes and total updates.
    pub native_window: u64,
    /// Native updates per run.
    pub native_updates: u64,
    /// Model window bytes.
    pub model_window: u64,
    /// Model updates per run.
    pub model_updates: u64,
    /// Figure 6's working sets (pages) and accesses per point.
    pub fig6_pages: Vec<u64>,
    /// Accesses per Figure 6 point.
    pub fig6_accesses: u64,
    /// CR3 loads per timed loop in the KVM guest.
    pub cr3_loads: u64,
    /// Show progress.
    pub progress: bool,
    /// `quick` or `full`.
    pub mode: &'static str,
}

impl Config {
    /// The full run: Figure 1 to 8 GiB, 16 MiB windows (up to 16: 256 MiB), 512 Ki
    /// updates (MAP's remaps dominate: about 2 ms each at this size).
    pub fn full(out_dir: PathBuf) -> Config {
        Config {
            out_dir,
            scratch: PathBuf::from("/dev/shm"),
            seed: 1,
            reps: 5,
            fig1_sizes: (0..8).map(|i| (64u64 << 20) << i).collect(),
            switch_segments: vec![1, 2, 4, 8, 16],
            switch_rounds: 20_000,
            windows: vec![1, 2, 4, 8, 16],
            update_sets: vec![16, 64],
            native_window: 16 << 20,
            native_updates: 512 << 10,
            model_window: 1 << 20,
            model_updates: 400_000,
            fig6_pages: vec![4, 16, 64, 256, 1024, 4096, 16384],
            fig6_accesses: 20_000,
            cr3_loads: 20_000,
            progress: true,
            mode: "full",
        }
    }

    /// A quick run of the same experiments, smaller.
    pub fn quick(out_dir: PathBuf) -> Config {
        Config {
            reps: 3,
            fig1_sizes: vec![16 << 20, 64 << 20, 256 << 20, 1 << 30],
            switch_segments: vec![1, 4, 16],
            switch_rounds: 5_000,
            windows: vec![1, 2, 4, 8],
            native_window: 4 << 20,
            native_updates: 256 << 10,
            model_window: 256 << 10,
            model_updates: 60_000,
            fig6_pages: vec![4, 64, 1024, 16384],
            fig6_accesses: 4_000,
            cr3_loads: 5_000,
            mode: "quick",
            ..Config::full(out_dir)
        }
    }
}

/// An experiment that could not run.
#[derive(Debug, thiserror::Error)]
pub enum SpaceJmpError {
    /// A SpaceJMP operation failed.
    #[error("{what}: {source}")]
    Vas {
        /// Which experiment.
        what: String,
        /// The failure.
        source: pmlab_vas::VasError,
    },
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// Which experiment.
        what: String,
        /// The failure.
        source: std::io::Error,
    },
    /// A design computed a different table than the reference: a bug.
    #[error("{0}")]
    Wrong(String),
    /// An output file could not be written.
    #[error(transparent)]
    Report(#[from] pmlab_report::ReportError),
}

/// Runs everything and builds the report (not yet written).
pub fn reproduce(config: &Config) -> Result<Report, SpaceJmpError> {
    let m = measure(config)?;
    Ok(Report::build(config, m))
}

//! Kessler & Hill, "Miss Reduction in Large, Real-Indexed Caches" (UW CS TR 940, 1990):
//! careful virtual-to-physical page mapping evaluated by trace-driven simulation.
//!
//! The experiment interleaves a multiprogrammed workload of real programs' traces (job
//! streams of processes that start and exit, scheduled with quanta of the paper's mean:
//! [`schedule`]), maps each process's pages on first touch through the OS model (global
//! LRU list, pool of available frames at its bottom, exiting processes' frames returned
//! to it) with the placement policy under test, and simulates split 32 KiB direct-mapped
//! level-one caches with 32-byte blocks feeding up to nine unified level-two caches (1, 4,
//! 16 MiB x 1, 2, 4 ways, 128-byte blocks, random replacement) in one pass. The metric is
//! level-two misses per 1000 instructions, as in the paper. Beside the paper's tables
//! and figures it measures what drives the result: the switch interval and the number of
//! concurrent streams ([`Sensitivity`]).

mod analysis;
mod appendix;
pub mod paper;
mod plots;
pub mod schedule;
mod sensitivity;
mod simulate;
mod tables;
mod workload;

pub use appendix::AppendixRun;
pub use schedule::{Schedule, ScheduleSpec, Scheduler, Segment};
pub use simulate::{L2Set, PassResult, PassSpec, SpaceSample, run_pass};
pub use tables::Report;
pub use workload::{MANIFEST, Program, Role, Stream, Workload, WorkloadError};

use pmlab_os::PolicyKind;
use std::path::PathBuf;

/// The sensitivity runs: random and hierarchical mapping on the direct-mapped level twos
/// with one thing changed from the main run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sensitivity {
    /// Mean switch intervals (instructions) to run, all streams.
    pub intervals: Vec<u64>,
    /// Numbers of concurrent streams to run, at the main run's interval.
    pub streams: Vec<usize>,
    /// Samples (seeds) per policy and point.
    pub samples: u32,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Samples (seeds) of random and hierarchical mapping (Tables 1-2, Figures 10-13);
    /// the paper uses 4.
    pub samples: u32,
    /// Samples of the other policies (Tables 3 and 4).
    pub policy_samples: u32,
    /// First seed; sample `i` uses `seed + i`; the schedule is drawn from `seed`.
    pub seed: u64,
    /// Physical memory in bytes (the paper: 128 MiB).
    pub memory: u64,
    /// The large and the small pool in bytes (the paper: 4 MiB and 256 KiB).
    pub pools: (u64, u64),
    /// Page size in bytes (the paper: 16 KiB).
    pub page_size: u64,
    /// Mean instructions between context switches (Mult2.2: 214,000).
    pub switch_interval: u64,
    /// The scheduler.
    pub scheduler: Scheduler,
    /// Concurrent streams (`None`: the workload's own).
    pub streams: Option<usize>,
    /// Instructions per point of Figure 10 (the paper: 100 million).
    pub window: u64,
    /// The sensitivity runs.
    pub sensitivity: Sensitivity,
    /// Where tables, JSON/CSV and plots go.
    pub out_dir: PathBuf,
    /// Worker threads for independent passes.
    pub threads: usize,
    /// Show a progress bar.
    pub progress: bool,
}

impl Config {
    /// The paper's parameters, results under `out_dir`.
    pub fn paper(out_dir: PathBuf) -> Self {
        Config {
            samples: 4,
            policy_samples: 4,
            seed: 1,
            memory: 128 << 20,
            pools: (4 << 20, 256 << 10),
            page_size: 16 << 10,
            switch_interval: 214_000,
            scheduler: Scheduler::Random,
            streams: None,
            window: 100_000_000,
            sensitivity: Sensitivity {
                intervals: Vec::new(),
                streams: Vec::new(),
                samples: 0,
            },
            out_dir,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            progress: true,
        }
    }

    /// The main run's schedule.
    pub fn schedule_spec(&self) -> ScheduleSpec {
        ScheduleSpec {
            mean_quantum: self.switch_interval,
            scheduler: self.scheduler,
            streams: self.streams,
            seed: self.seed,
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

/// The schedules of a run: the main one first, then one per sensitivity point that differs
/// from it.
pub fn schedules(config: &Config) -> Vec<ScheduleSpec> {
    let main = config.schedule_spec();
    let mut out = vec![main];
    let points = config
        .sensitivity
        .intervals
        .iter()
        .map(|&i| ScheduleSpec {
            mean_quantum: i,
            ..main
        })
        .chain(config.sensitivity.streams.iter().map(|&k| ScheduleSpec {
            streams: Some(k),
            ..main
        }));
    for p in points {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The passes: (schedule index, pass). On the main schedule every policy with the large
/// pool over the nine level twos (Tables 1, 2 and 4, Table 3's large-pool column) and with
/// the small pool over the 4 MiB direct-mapped one (Table 3's small-pool column); on every
/// other schedule random and hierarchical mapping over the direct-mapped level twos.
pub fn plan(config: &Config, schedules: &[ScheduleSpec]) -> Vec<(usize, PassSpec)> {
    let mut jobs = Vec::new();
    let careful_pair = |p: PolicyKind| matches!(p, PolicyKind::Random | PolicyKind::Hierarchical);
    for (pool, l2) in [
        (config.pools.0, L2Set::All),
        (config.pools.1, L2Set::Table3),
    ] {
        for policy in PolicyKind::ALL {
            let n = if careful_pair(policy) {
                config.samples
            } else {
                config.policy_samples
            };
            for i in 0..n {
                let seed = config.seed + u64::from(i);
                jobs.push((
                    0,
                    PassSpec {
                        policy,
                        pool,
                        seed,
                        l2,
                    },
                ));
            }
        }
    }
    for s in 1..schedules.len() {
        for policy in [PolicyKind::Random, PolicyKind::Hierarchical] {
            for i in 0..config.sensitivity.samples {
                jobs.push((
                    s,
                    PassSpec {
                        policy,
                        pool: config.pools.0,
                        seed: config.seed + u64::from(i),
                        l2: L2Set::DirectMapped,
                    },
                ));
            }
        }
    }
    jobs
}

/// Runs the whole reproduction on `workload`, and Appendix A on the single-program
/// workloads `appendix`, and returns the report (not yet written).
pub fn reproduce(
    config: &Config,
    workload: &Workload,
    appendix: &[Workload],
) -> Result<Report, ExperimentError> {
    let specs = schedules(config);
    let drawn: Vec<Schedule> = specs
        .iter()
        .map(|&s| schedule::schedule(workload, s))
        .collect();
    let jobs = plan(config, &specs);
    let total = jobs.len() + appendix.len() * appendix::jobs(config).len();
    let bar = progress_bar(config, total as u64);
    let results = simulate::run_passes(config, workload, &drawn, &jobs, &bar)?;
    let appendix = appendix::run(config, appendix, &bar)?;
    bar.finish_and_clear();
    let passes = jobs.iter().map(|&(s, _)| s).zip(results).collect();
    Ok(Report::build(config, workload, drawn, passes, appendix))
}

fn progress_bar(config: &Config, len: u64) -> indicatif::ProgressBar {
    if !config.progress {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(len);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} passes  {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    b
}

//! Volos et al., "Aerie: Flexible File-System Interfaces to Storage-Class Memory"
//! (workshop version, "Storage-Class Memory Needs Flexible Interfaces"), §6: Table 2's
//! microbenchmarks and Figure 2's FileBench workloads, on PXFS and KVFS beside tmpfs
//! (the paper's RamFS) and ext4 on a loop device over tmpfs (its ext3 on SCM-disk).
//!
//! Every figure is the median over repetitions of a mean latency: per operation for
//! Table 2, per workload iteration for Figure 2. Each repetition uses a fresh volume or
//! directory and the seed `seed + repetition` (xoshiro256++).

mod ext4;
pub mod filebench;
pub mod kv;
pub mod paper;
pub mod perfctl;
mod report;
mod run;

pub use ext4::Ext4Loop;
pub use filebench::{Counts, Flowop, Params, Personality};

/// How many threads run a personality's iterations (threads of one process: on PXFS and
/// KVFS they share its one libFS client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Threads {
    /// This many, for every personality.
    Fixed(usize),
    /// FileBench's own count for each personality (`Personality::filebench_threads`:
    /// 50, 100, 100, 16), which the paper's runs used.
    Paper,
}

impl std::str::FromStr for Threads {
    type Err = String;
    fn from_str(s: &str) -> Result<Threads, String> {
        match s {
            "paper" => Ok(Threads::Paper),
            n => match n.parse::<usize>() {
                Ok(k) if k >= 1 => Ok(Threads::Fixed(k)),
                _ => Err(format!(
                    "{s:?} is neither \"paper\" nor a thread count of 1 or more"
                )),
            },
        }
    }
}
pub use report::Report;
pub use run::{FilebenchSamples, Measurements, Table2Samples, measure};

use pmlab_fscheck::bench::table2::Sizes;
use std::path::PathBuf;

/// The file systems compared, in table order.
pub const SYSTEMS: [&str; 4] = ["tmpfs", "ext4", "PXFS", "KVFS"];

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where tables (CSV), JSON and plots (SVG) go.
    pub out_dir: PathBuf,
    /// A tmpfs directory for Aerie volumes, the tmpfs runs and the ext4 image.
    pub scratch: PathBuf,
    /// Where the ext4 image is mounted.
    pub mount_parent: PathBuf,
    /// Repetitions; figures are medians over them.
    pub reps: usize,
    /// First seed; repetition `i` uses `seed + i`.
    pub seed: u64,
    /// Table 2's sizes.
    pub table2: Sizes,
    /// Whether Table 2 runs at all (`--no-table2` leaves only the personalities).
    pub run_table2: bool,
    /// The personalities and their parameters.
    pub personalities: Vec<(Personality, Params)>,
    /// Largest webproxy file (KVFS's fixed object size); larger draws are clamped on
    /// every file system alike, so all move the same bytes.
    pub webproxy_max_file: u64,
    /// Try ext4 on a loop device.
    pub ext4: bool,
    /// Size of the ext4 image.
    pub ext4_bytes: u64,
    /// Show a progress bar.
    pub progress: bool,
    /// "quick" or "full", printed with the results.
    pub mode: &'static str,
    /// Whether the SCM write model was on for pmlab's persists (printed with results).
    pub scm_write_model: bool,
    /// The thread counts each personality runs with (each a separate measurement).
    pub threads: Vec<Threads>,
    /// The file systems that run (names of [`SYSTEMS`]; all of them when empty): a
    /// profile of one system's run without the others'.
    pub systems: Vec<String>,
}

impl Config {
    /// Whether file system `sys` runs (see [`Config::systems`]).
    pub fn runs_system(&self, sys: &str) -> bool {
        self.systems.is_empty() || self.systems.iter().any(|s| s == sys)
    }

    /// The thread counts personality `p` runs with, in order, each once.
    pub fn thread_counts(&self, p: Personality) -> Vec<usize> {
        let mut v: Vec<usize> = Vec::new();
        for t in &self.threads {
            let n = match t {
                Threads::Fixed(n) => *n,
                Threads::Paper => p.filebench_threads(),
            };
            if !v.contains(&n) {
                v.push(n);
            }
        }
        v
    }
}

/// FileBench iterations a full run times per personality. FileBench runs each
/// personality for a minute (`run 60`), hundreds of thousands of iterations at these
/// rates, so its figures are those of warm caches: every file was opened before. At
/// 1,000 iterations a 10,000-file fileset is opened about once per file, and the run
/// measured mostly first touches (libFS asking for the leases of some 500 directories'
/// buckets and reading each inode for the first time); at 10,000 first opens are
/// about a tenth of webserver's opens. `--iterations` sets another count.
pub const FULL_ITERATIONS: usize = 10_000;

impl Config {
    /// The paper's sizes: Table 2 on a 1 GiB file (100 MiB at random) and 1024 small
    /// files; the paper's FileBench variants, [`FULL_ITERATIONS`] iterations each, by one
    /// thread and by FileBench's thread counts; 3 repetitions.
    pub fn full(out_dir: PathBuf) -> Config {
        let personalities: Vec<(Personality, Params)> = Personality::ALL
            .iter()
            .map(|&p| {
                let params = Params {
                    iterations: FULL_ITERATIONS,
                    ..p.paper()
                };
                (p, params)
            })
            .collect();
        Config {
            out_dir,
            scratch: PathBuf::from("/dev/shm"),
            mount_parent: std::env::temp_dir(),
            reps: 3,
            seed: 1,
            table2: Sizes::paper(),
            run_table2: true,
            personalities,
            webproxy_max_file: 128 << 10,
            ext4: true,
            ext4_bytes: 6 << 30,
            progress: true,
            mode: "full",
            scm_write_model: false,
            threads: vec![Threads::Fixed(1), Threads::Paper],
            systems: Vec::new(),
        }
    }

    /// Minutes-scale sizes with the same shapes: a 64 MiB file (16 MiB at random), 1024
    /// small files; 1000-file filesets (webproxy: the paper's 1000) and 200 iterations,
    /// one thread. At 1,000 files the fileserver gap is much smaller than at the paper's
    /// 10,000 (every report says which scale ran).
    pub fn quick(out_dir: PathBuf) -> Config {
        let mut c = Config::full(out_dir);
        c.table2.file_bytes = 64 << 20;
        c.table2.random_bytes = 16 << 20;
        for (_, p) in &mut c.personalities {
            p.nfiles = p.nfiles.min(1000);
            p.iterations = 200;
        }
        c.ext4_bytes = 1 << 30;
        c.mode = "quick";
        c.threads = vec![Threads::Fixed(1)];
        c
    }
}

/// An experiment that could not run.
#[derive(Debug, thiserror::Error)]
pub enum AerieError {
    /// A file system operation failed.
    #[error("{what}: {source}")]
    Fs {
        /// Which benchmark on which file system.
        what: String,
        /// The failure.
        source: pmlab_fs::FsError,
    },
    /// An output file could not be written.
    #[error(transparent)]
    Report(#[from] pmlab_report::ReportError),
}

/// Runs the whole reproduction and builds its report (not yet written).
pub fn reproduce(config: &Config) -> Result<Report, AerieError> {
    let m = measure(config)?;
    Ok(Report::build(config, m))
}

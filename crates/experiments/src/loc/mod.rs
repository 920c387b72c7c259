//! Paper 001, Lu, Shu, Sun, Mutlu, "Loose-Ordering Consistency for Persistent Memory"
//! (ICCD 2014): transaction throughput of S-WAL, H-WAL, EC-WAL, LOC-WAL, Kiln and
//! LOC-Kiln, normalized to the same machine running without persistence, on LOC's
//! Table I machine (`pmlab-hwtx` on `pmlab-model`).
//!
//! Figure 6: the five protocols per workload and on average. Figure 7: H-WAL and EC-WAL.
//! Figure 8: LOC-WAL at speculation degrees 1-32. Figure 9: H-WAL and LOC-WAL at memory
//! latencies of 35, 95, 168 and 1000 ns. Beside them: EC-WAL and LOC-WAL under the
//! other reading of a block-group "block" (8-byte words), the simulation's speed, and
//! (unless turned off) the crash exploration of every workload under every protocol
//! with the broken variants.
//!
//! Each workload is built once natively, then every run starts from that image: the
//! caches cold, `warmup` transactions, then `txs` measured transactions and a
//! `TxFlush`, all from one seeded operation stream, so every protocol runs exactly the
//! same operations. Throughput is committed transactions over simulated cycles, as the
//! paper's ("the total number of committed transactions [divided by] the total
//! runtime").

mod crash;
pub mod gap;
pub mod paper;
mod plan;
mod report;
pub mod run;
pub mod sensitivity;
pub mod split;

use std::path::PathBuf;

pub use crash::{CrashRow, CrashSummary};
pub use plan::{Key, Measured};
pub use report::Report;
pub use run::{Built, RunResult};

use pmlab_workloads::{Kind, Params};

/// Why the reproduction could not run.
#[derive(Debug, thiserror::Error)]
pub enum LocError {
    /// The machine configuration.
    #[error(transparent)]
    Machine(#[from] pmlab_model::ConfigError),
    /// A protocol refused.
    #[error(transparent)]
    Tx(#[from] pmlab_tx::TxError),
    /// A workload refused.
    #[error(transparent)]
    Workload(#[from] pmlab_workloads::WorkloadError),
    /// The crash explorer could not run.
    #[error(transparent)]
    Crash(#[from] pmlab_txcheck::crash::Error),
    /// An output file.
    #[error(transparent)]
    Report(#[from] pmlab_report::ReportError),
    /// A run of `what` failed.
    #[error("{what}: {source}")]
    Run {
        /// Which run.
        what: String,
        /// Why.
        source: Box<LocError>,
    },
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Elements of each workload (its structure's size).
    pub elements: Vec<(Kind, u64)>,
    /// Transactions run before measuring.
    pub warmup: u64,
    /// Transactions measured.
    pub txs: u64,
    /// Memory latencies of Figure 9 (ns); 168 is the others'.
    pub latencies: Vec<u64>,
    /// Speculation degrees of Figure 8.
    pub sds: Vec<u32>,
    /// Run EC-WAL and LOC-WAL (and H-WAL) with 8-byte blocks too.
    pub readings: bool,
    /// Run the strict protocols under the looser reading too: persistent writes
    /// overlapped across the banks, in-place writes left to the cache (`Key::strict`).
    pub overlapped: bool,
    /// Crash-explore every workload under every protocol (and the broken variants).
    pub crash: bool,
    /// Seed of the operation streams (xoshiro256++).
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
    /// Show progress on stderr.
    pub progress: bool,
    /// Where tables, JSON and plots go.
    pub out_dir: PathBuf,
}

/// Default elements: every structure well beyond the 1 MiB LLC (see `elements`).
fn elements(scale: u64) -> Vec<(Kind, u64)> {
    paper::WORKLOADS
        .iter()
        .map(|&(k, _)| {
            let n = match k {
                Kind::Sps => 1 << 20,
                Kind::HashTable | Kind::RbTree => 1 << 17,
                Kind::BpTree => 1 << 17,
                Kind::Sdg => 1 << 16,
                Kind::Db => 1 << 15,
                _ => 1 << 16,
            };
            (k, n / scale)
        })
        .collect()
}

impl Config {
    /// The full reproduction.
    pub fn full(out_dir: PathBuf) -> Config {
        Config {
            elements: elements(1),
            warmup: 1000,
            txs: 4000,
            latencies: paper::LATENCIES.to_vec(),
            sds: paper::SDS.to_vec(),
            readings: true,
            overlapped: true,
            crash: true,
            seed: 1,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            progress: true,
            out_dir,
        }
    }

    /// The same experiments, shorter: fewer transactions, no crash exploration.
    pub fn quick(out_dir: PathBuf) -> Config {
        Config {
            warmup: 200,
            txs: 600,
            crash: false,
            ..Config::full(out_dir)
        }
    }

    /// The parameters of `kind`.
    pub fn params(&self, kind: Kind) -> Params {
        let elements = self
            .elements
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(kind.default_elements(), |&(_, n)| n);
        Params {
            elements,
            ..Params::defaults(kind, pmlab_workloads::Dist::Uniform)
        }
    }
}

/// Runs the reproduction.
pub fn reproduce(config: &Config) -> Result<Report, LocError> {
    let t = std::time::Instant::now();
    let load_before = report::load_average();
    let built = plan::build_all(config)?;
    let measured = plan::run_all(config, &built)?;
    let crash = if config.crash {
        Some(crash::explore_all(config)?)
    } else {
        None
    };
    Ok(Report::new(
        config,
        &built,
        measured,
        crash,
        t.elapsed().as_secs_f64(),
        load_before,
    ))
}

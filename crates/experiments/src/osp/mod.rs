//! Paper 000, OSP (Ni, Zhao, Bittman, Miller, "Reducing NVM Writes with Optimized
//! Shadow Paging", HotStorage 2018): CPU flushes of optimized shadow paging against a
//! hardware undo log on the paper's seven workloads (Figure 4a), OSP's flushes by
//! source (Figure 4b), TLB miss ratios (Table 1), the super-page variant, the paper's
//! future work (asynchronous consolidation), and crash exploration of both protocols
//! and their broken variants.
//!
//! Every workload's structure is bulk-loaded once ([`bulk`]) and boots one machine per
//! protocol; each protocol runs the same seeded operation stream, so they update the
//! same lines (the data flushes of both protocols are equal, which the run checks).

pub mod bulk;
pub mod crash;
mod exec;
pub mod harness;
pub mod paper;
mod report;
mod report_text;
pub mod run;

use std::path::PathBuf;

use pmlab_hwtx::{Atomicity, Consolidation, OspConfig};
use pmlab_workloads::Kind;

pub use exec::{CrashRow, Results, WorkloadRuns};
pub use report::Report;
use run::{Schedule, Variant};

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where tables, JSON and plots go.
    pub out_dir: PathBuf,
    /// Quick mode (for the record in the results).
    pub quick: bool,
    /// Seed of every operation stream and crash exploration.
    pub seed: u64,
    /// Elements of SPS's array.
    pub sps_elements: u64,
    /// Keys in the hash table, red-black tree and B-tree at the start.
    pub map_elements: u64,
    /// Transactions per protocol: warm-up and measured.
    pub warmup: u64,
    /// Measured transactions.
    pub txs: u64,
    /// Transactions explored crash point by crash point per workload and protocol
    /// (0: no crash exploration).
    pub crash_txs: u64,
    /// Operations per transaction of the large-transaction run (HT-uni), and its
    /// measured transactions (0: no such run).
    pub large_tx_ops: u32,
    /// Measured transactions of the large-transaction run.
    pub large_txs: u64,
    /// Also run the Zipf workloads with YCSB's unscrambled generator
    /// ([`paper::ZIPF_ORDERED`]).
    pub zipf_ordered: bool,
    /// Worker threads (one workload each at a time).
    pub threads: usize,
    /// Show progress on stderr.
    pub progress: bool,
}

impl Config {
    /// The full run: 8 Mi SPS elements (64 MiB), 2 Mi keys per map (144-256 MiB),
    /// 100,000 measured transactions per protocol after 10,000 of warm-up, 12
    /// transactions crash-explored per workload and protocol.
    pub fn full(out_dir: PathBuf) -> Self {
        Config {
            out_dir,
            quick: false,
            seed: 1,
            sps_elements: 1 << 23,
            map_elements: 1 << 21,
            warmup: 10_000,
            txs: 100_000,
            crash_txs: 12,
            large_tx_ops: 64,
            large_txs: 2_000,
            zipf_ordered: true,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            progress: true,
        }
    }

    /// The quick run: the same experiments at 1/16 of the elements (still 16-64 times
    /// the TLB's reach) and a tenth of the transactions; 3 transactions crash-explored.
    pub fn quick(out_dir: PathBuf) -> Self {
        Config {
            quick: true,
            sps_elements: 1 << 19,
            map_elements: 1 << 17,
            warmup: 1_000,
            txs: 10_000,
            crash_txs: 3,
            large_txs: 200,
            ..Self::full(out_dir)
        }
    }

    /// Elements of `kind`.
    pub fn elements(&self, kind: Kind) -> u64 {
        match kind {
            Kind::Sps => self.sps_elements,
            _ => self.map_elements,
        }
    }

    /// The transactions each protocol runs.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            warmup: self.warmup,
            txs: self.txs,
            seed: self.seed,
            ops_per_tx: 1,
        }
    }

    /// The large-transaction run's schedule.
    pub fn large_schedule(&self) -> Schedule {
        Schedule {
            warmup: self.large_txs / 10,
            txs: self.large_txs,
            seed: self.seed,
            ops_per_tx: self.large_tx_ops,
        }
    }
}

/// Queue sizes of asynchronous consolidation measured: as many pages as the TLB holds,
/// and sixteen times that (a victim buffer of 4 MiB of pages).
pub const ASYNC_QUEUES: [usize; 2] = [64, 1024];

/// The protocols measured, baseline first: the hardware undo log, OSP as the paper
/// evaluates it (lightweight journal, consolidation on eviction), OSP with the super
/// page, and OSP with asynchronous consolidation ([`ASYNC_QUEUES`]).
pub fn variants() -> Vec<Variant> {
    let osp = OspConfig::paper();
    let mut v = vec![
        Variant::Undo,
        Variant::Osp(osp.clone()),
        Variant::Osp(OspConfig {
            atomicity: Atomicity::SuperPage,
            ..osp.clone()
        }),
    ];
    for queue in ASYNC_QUEUES {
        v.push(Variant::Osp(OspConfig {
            consolidation: Consolidation::Async { queue },
            ..osp.clone()
        }));
    }
    v
}

/// The large-transaction run's protocols: the undo log and OSP with room for the
/// pages a transaction updates beyond the TLB.
pub fn large_variants() -> Vec<Variant> {
    vec![
        Variant::Undo,
        Variant::Osp(OspConfig {
            max_tx_pages: 1024,
            ..OspConfig::paper()
        }),
    ]
}

/// An experiment that could not run.
#[derive(Debug, thiserror::Error)]
pub enum OspError {
    /// A run failed.
    #[error(transparent)]
    Run(#[from] run::RunError),
    /// A crash exploration could not run.
    #[error("crash exploration of {workload} under {subject}: {message}")]
    Crash {
        /// The workload.
        workload: &'static str,
        /// The protocol.
        subject: String,
        /// What went wrong.
        message: String,
    },
    /// An output file.
    #[error(transparent)]
    Report(#[from] pmlab_report::ReportError),
}

/// Runs everything `config` asks for and lays it beside the paper.
pub fn reproduce(config: &Config) -> Result<Report, OspError> {
    let results = exec::run_all(config)?;
    Ok(Report::build(config, results))
}

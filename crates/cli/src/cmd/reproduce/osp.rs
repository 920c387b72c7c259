//! `pmlab reproduce osp`: paper 000's optimized shadow paging against a hardware undo
//! log on the machine model.

use super::Common;
use anyhow::bail;
use pmlab_experiments::osp::{self, Config};

/// Arguments of `pmlab reproduce osp`.
#[derive(clap::Args)]
pub struct Args {
    /// `--quick`: the same experiments at 1/16 of the elements, a tenth of the
    /// transactions and 3 crash-explored transactions per workload (under a minute).
    #[command(flatten)]
    common: Common,
    /// Elements of SPS's array (full: 8388608).
    #[arg(long)]
    sps_elements: Option<u64>,
    /// Keys of the hash table, red-black tree and B-tree at the start (full: 2097152).
    #[arg(long)]
    map_elements: Option<u64>,
    /// Measured transactions per workload and protocol (full: 100000).
    #[arg(long)]
    txs: Option<u64>,
    /// Warm-up transactions before the counters are read (full: 10000).
    #[arg(long)]
    warmup: Option<u64>,
    /// Transactions crash-explored per workload and protocol; 0 skips the crash
    /// exploration (full: 12).
    #[arg(long)]
    crash_txs: Option<u64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

/// Runs `pmlab reproduce osp`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let out = args.common.out_dir("osp");
    let mut config = if args.common.quick {
        Config::quick(out)
    } else {
        Config::full(out)
    };
    config.seed = args.common.seed;
    config.progress = !args.common.no_progress;
    if let Some(n) = args.sps_elements {
        config.sps_elements = n;
    }
    if let Some(n) = args.map_elements {
        config.map_elements = n;
    }
    if config.sps_elements < 2 || config.map_elements < 2 {
        bail!("--sps-elements and --map-elements must be at least 2");
    }
    if let Some(n) = args.txs {
        if n == 0 {
            bail!("--txs must be at least 1");
        }
        config.txs = n;
    }
    if let Some(n) = args.warmup {
        config.warmup = n;
    }
    if let Some(n) = args.crash_txs {
        config.crash_txs = n;
    }
    if let Some(t) = args.threads {
        config.threads = t.max(1);
    }
    let report = osp::reproduce(&config)?;
    print!("{report}");
    report.write(&config)?;
    println!(
        "written: {}/{{figure4a, figure4b, table1, superpage, future, large-transactions, zipf-ordered, crash, broken, targets}}.csv, osp.json, {{figure4a, figure4b, table1}}.svg",
        config.out_dir.display()
    );
    Ok(())
}

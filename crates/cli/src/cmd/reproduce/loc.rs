//! `pmlab reproduce loc`: paper 001, Loose-Ordering Consistency, Figures 6-9.

use super::Common;
use pmlab_experiments::loc;

/// Arguments of `pmlab reproduce loc`.
#[derive(clap::Args)]
pub struct Args {
    /// `--quick`: the same figures from fewer transactions, without the crash
    /// exploration, under a minute.
    #[command(flatten)]
    common: Common,
    /// Transactions measured per run (full: 4000, quick: 600).
    #[arg(long)]
    txs: Option<u64>,
    /// Transactions run before measuring (full: 1000, quick: 200).
    #[arg(long)]
    warmup: Option<u64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Crash-explore every workload under every protocol too (the full run does).
    #[arg(long, conflicts_with = "no_crash")]
    crash: bool,
    /// Skip the crash exploration.
    #[arg(long)]
    no_crash: bool,
    /// Skip the runs with 8-byte block-group blocks.
    #[arg(long)]
    no_readings: bool,
    /// Skip the runs with strict persistence serialized.
    #[arg(long)]
    no_serialized: bool,
}

/// Runs `pmlab reproduce loc`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let out = args.common.out_dir("loc");
    let mut config = if args.common.quick {
        loc::Config::quick(out)
    } else {
        loc::Config::full(out)
    };
    config.seed = args.common.seed;
    config.progress = !args.common.no_progress;
    if let Some(t) = args.txs {
        config.txs = t.max(1);
    }
    if let Some(w) = args.warmup {
        config.warmup = w;
    }
    if let Some(t) = args.threads {
        config.threads = t.max(1);
    }
    config.crash = (config.crash || args.crash) && !args.no_crash;
    config.readings = !args.no_readings;
    config.serialized = !args.no_serialized;
    let report = loc::reproduce(&config)?;
    print!("{report}");
    report.write(&config)?;
    println!(
        "written: {}/{{fig6..9.csv, readings.csv, serialized.csv, targets.csv, speed.csv, crash.csv, broken.csv, loc.json, fig6..9.svg}}",
        config.out_dir.display()
    );
    Ok(())
}

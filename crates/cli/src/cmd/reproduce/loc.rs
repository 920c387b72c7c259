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
    /// Skip the runs of the strict protocols under the looser reading (writes
    /// overlapped across banks, in-place writes left to the cache).
    #[arg(long)]
    no_overlapped: bool,
    /// Instead of the figures: the sensitivity study of why the averages differ from
    /// the paper's (one factor changed at a time; `sensitivity.csv`, `profile.csv`,
    /// `sensitivity.json`).
    #[arg(long, conflicts_with_all = ["crash", "no_crash", "no_readings", "no_overlapped"])]
    sensitivity: bool,
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
    if args.sensitivity {
        let s = loc::sensitivity::run(&config)?;
        print!("{s}");
        s.write(&config)?;
        println!(
            "written: {}/{{sensitivity.csv, sensitivity_hwal.csv, profile.csv, extra_cycles.csv, sd_sweep.csv, sensitivity.json}}",
            config.out_dir.display()
        );
        return Ok(());
    }
    config.crash = (config.crash || args.crash) && !args.no_crash;
    config.readings = !args.no_readings;
    config.overlapped = !args.no_overlapped;
    let report = loc::reproduce(&config)?;
    print!("{report}");
    report.write(&config)?;
    println!(
        "written: {}/{{fig6..9.csv, readings.csv, overlapped.csv, targets.csv, gap.csv, speed.csv, crash.csv, broken.csv, loc.json, fig6..9.svg}}",
        config.out_dir.display()
    );
    Ok(())
}

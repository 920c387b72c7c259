//! `pmlab reproduce kessler-hill`: Kessler & Hill's careful page mapping.

use super::Common;
use anyhow::{Context, bail};
use pmlab_experiments::kessler_hill::{self, Config, Scheduler, Sensitivity, Workload};
use std::path::PathBuf;

/// Arguments of `pmlab reproduce kessler-hill`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Workload directory: per-process traces and their manifest (`mult2.tsv`, recorded by
    /// data/mult2/generate.sh), or plain traces, each a process of its own (default with
    /// --quick: the shipped data/mult2/quick).
    #[arg(long)]
    traces: Option<PathBuf>,
    /// Samples (seeds) of random and hierarchical mapping (default: 8 quick, 6 full).
    #[arg(long)]
    samples: Option<u32>,
    /// Samples of the other policies (default: 4).
    #[arg(long, default_value_t = 4)]
    policy_samples: u32,
    /// Mean instructions between context switches (Mult2: 134000; Mult2.2: 214000).
    #[arg(long, default_value_t = 214_000)]
    switch_interval: u64,
    /// Scheduler: `random` (exponential quanta of the mean, next stream drawn uniformly)
    /// or `round-robin` (fixed quanta, streams in turn).
    #[arg(long, default_value = "random", value_parser = ["random", "round-robin"])]
    scheduler: String,
    /// Concurrent streams (default: the workload's).
    #[arg(long)]
    streams: Option<usize>,
    /// The large pool of available frames (the paper: 4 MiB), e.g. `16MiB`.
    #[arg(long, default_value = "4MiB", value_parser = pmlab_spine::parse_size)]
    large_pool: u64,
    /// The small pool (the paper: 256 KiB).
    #[arg(long, default_value = "256KiB", value_parser = pmlab_spine::parse_size)]
    small_pool: u64,
    /// Skip the sensitivity runs.
    #[arg(long)]
    no_sensitivity: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

/// The workload shipped with pmlab (see data/mult2/README.md).
fn builtin_workload() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/mult2/quick")
}

/// Runs `pmlab reproduce kessler-hill`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.common.quick && args.traces.is_none() {
        bail!(
            "the full Kessler-Hill run needs the full workload: record it with \
             `SCALE=full OUT=DIR data/mult2/generate.sh` and pass --traces DIR, or use --quick \
             for the shipped one"
        );
    }
    let quick = args.common.quick;
    let dir = args.traces.clone().unwrap_or_else(builtin_workload);
    let mut config = Config::paper(args.common.out_dir("kessler-hill"));
    config.samples = args.samples.unwrap_or(if quick { 8 } else { 6 });
    config.policy_samples = args.policy_samples;
    config.seed = args.common.seed;
    config.switch_interval = args.switch_interval;
    config.scheduler = if args.scheduler == "round-robin" {
        Scheduler::RoundRobin
    } else {
        Scheduler::Random
    };
    config.streams = args.streams;
    config.pools = (args.large_pool, args.small_pool);
    // The paper plots 100-million-instruction windows of a 3-6 billion instruction trace;
    // ours are shorter, so the window scales down with them.
    config.window = if quick { 1_000_000 } else { 10_000_000 };
    if !args.no_sensitivity {
        config.sensitivity = Sensitivity {
            intervals: vec![20_000, 50_000, 134_000, 1_000_000, 5_000_000],
            streams: vec![1, 2, 3, 6],
            samples: if quick { 3 } else { 4 },
        };
    }
    config.progress = !args.common.no_progress;
    if let Some(t) = args.threads {
        config.threads = t.max(1);
    }
    eprintln!("reading the workload in {} ...", dir.display());
    let workload = Workload::load(&dir)
        .with_context(|| format!("reading the workload in {}", dir.display()))?;
    // Appendix A's single large programs, when the workload directory has them.
    let appendix = Workload::trace_files(&dir.join("appendix"))?
        .iter()
        .map(|p| Workload::single(p))
        .collect::<Result<Vec<_>, _>>()?;
    let report = kessler_hill::reproduce(&config, &workload, &appendix)?;
    print!("{report}");
    report.write(&config)?;
    println!(
        "written: {}/{{table1..4, figure11..13, sensitivity, differences}}.csv, kessler-hill.json, \
         appendix-a.csv, fig3, fig4, fig10-{{a,b,c}}, fig11, fig11b, fig12, fig13, sensitivity-{{interval,streams}}.svg",
        config.out_dir.display()
    );
    Ok(())
}

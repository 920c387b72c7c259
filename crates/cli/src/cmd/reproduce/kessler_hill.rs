//! `pmlab reproduce kessler-hill`: Kessler & Hill's careful page mapping.

use super::Common;
use anyhow::{Context, bail};
use pmlab_experiments::kessler_hill::{self, Config, Workload};
use std::path::PathBuf;

/// Arguments of `pmlab reproduce kessler-hill`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Directory of per-program traces to multiprogram (default: the built-in set, which
    /// is what `--quick` runs).
    #[arg(long)]
    traces: Option<PathBuf>,
    /// Samples (seeds) per policy and pool.
    #[arg(long, default_value_t = 4)]
    samples: u32,
    /// Instructions between context switches (Mult2.2: 214000).
    #[arg(long, default_value_t = 214_000)]
    switch_interval: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

/// The traces shipped with pmlab (see data/traces/README.md).
fn builtin_traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/traces")
}

/// Runs `pmlab reproduce kessler-hill`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.common.quick && args.traces.is_none() {
        bail!(
            "the full Kessler-Hill run needs long traces: record them with `pmlab trace record` \
             into a directory and pass --traces DIR, or use --quick for the built-in set"
        );
    }
    let dir = args.traces.clone().unwrap_or_else(builtin_traces);
    let mut config = Config::paper(args.common.out_dir("kessler-hill"));
    config.samples = args.samples;
    config.seed = args.common.seed;
    config.switch_interval = args.switch_interval;
    config.progress = !args.common.no_progress;
    if let Some(t) = args.threads {
        config.threads = t.max(1);
    }
    let programs = Workload::programs_in(&dir)
        .with_context(|| format!("reading traces from {}", dir.display()))?;
    eprintln!(
        "building the multiprogrammed workload from {} traces in {} ...",
        programs.len(),
        dir.display()
    );
    let workload = Workload::build(programs, config.switch_interval)?;
    let report = kessler_hill::reproduce(&config, &workload)?;
    print!("{report}");
    report.write(&config)?;
    println!(
        "written: {}/{{table1..4.csv, differences.csv, kessler-hill.json, fig3.svg, fig4.svg, fig11.svg, fig12.svg}}",
        config.out_dir.display()
    );
    Ok(())
}

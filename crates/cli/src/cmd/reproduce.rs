//! `pmlab reproduce PAPER`: run a paper's evaluation and lay it beside the paper.

use anyhow::{Context, bail};
use pmlab_experiments::kessler_hill::{self, Config, Workload};
use std::path::PathBuf;

/// Arguments of `pmlab reproduce`.
#[derive(clap::Args)]
pub struct Args {
    /// The paper: `kessler-hill`.
    paper: String,
    /// Quick mode: the built-in small traces (minutes on a laptop).
    #[arg(long)]
    quick: bool,
    /// Directory of per-program traces to multiprogram (default: the built-in set).
    #[arg(long)]
    traces: Option<PathBuf>,
    /// Samples (seeds) per policy and pool.
    #[arg(long, default_value_t = 4)]
    samples: u32,
    /// First seed of the xoshiro256++ generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Instructions between context switches (Mult2.2: 214000).
    #[arg(long, default_value_t = 214_000)]
    switch_interval: u64,
    /// Where tables (CSV), JSON and plots (SVG) are written.
    #[arg(long, default_value = "results/kessler-hill")]
    out: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// The traces shipped with pmlab (see data/traces/README.md).
fn builtin_traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/traces")
}

/// Runs `pmlab reproduce`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.paper != "kessler-hill" {
        bail!("unknown paper {:?}; available: kessler-hill", args.paper);
    }
    if !args.quick && args.traces.is_none() {
        bail!(
            "the full Kessler-Hill run needs long traces: record them with `pmlab trace record` \
             into a directory and pass --traces DIR, or use --quick for the built-in set"
        );
    }
    let dir = args.traces.clone().unwrap_or_else(builtin_traces);
    let mut config = Config::paper(args.out.clone());
    config.samples = args.samples;
    config.seed = args.seed;
    config.switch_interval = args.switch_interval;
    config.progress = !args.no_progress;
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
        "written: {}/{{table1..4.csv, differences.csv, tables.json, passes.json, fig3.svg, fig4.svg, fig11.svg, fig12.svg}}",
        config.out_dir.display()
    );
    Ok(())
}

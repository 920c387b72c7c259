//! `pmlab reproduce spacejmp`: SpaceJMP's microbenchmarks and GUPS.

use super::Common;
use pmlab_experiments::spacejmp;
use std::path::PathBuf;

/// Arguments of `pmlab reproduce spacejmp`.
#[derive(clap::Args)]
pub struct Args {
    /// `--quick`: smaller regions, windows and update counts (a few minutes).
    #[command(flatten)]
    common: Common,
    /// Repetitions of native timings (figures are medians).
    #[arg(long)]
    reps: Option<usize>,
    /// tmpfs directory for scratch registries.
    #[arg(long, default_value = "/dev/shm")]
    scratch: PathBuf,
    /// Only Figures 11 and 12 (SAMtools; 1 GiB of SAM, 64 MiB with --quick).
    #[arg(long, conflicts_with = "no_sam")]
    sam_only: bool,
    /// Skip Figures 11 and 12.
    #[arg(long)]
    no_sam: bool,
    /// Skip Figures 10a-c (Redis_JMP beside the real Redis, as `pmlab kv bench
    /// --vs-redis` with every available switch mechanism; kv.json beside spacejmp.json).
    #[arg(long)]
    no_kv: bool,
}

/// Runs `pmlab reproduce spacejmp`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let out = args.common.out_dir("spacejmp");
    let mut config = if args.common.quick {
        spacejmp::Config::quick(out)
    } else {
        spacejmp::Config::full(out)
    };
    config.seed = args.common.seed;
    config.progress = !args.common.no_progress;
    config.scratch = args.scratch;
    if let Some(r) = args.reps {
        config.reps = r.max(1);
    }
    let sam = crate::cmd::sam_bench::config(
        args.common.quick,
        args.common.seed,
        &config.scratch,
        config.progress,
    )?;
    if args.sam_only {
        return crate::cmd::sam_bench::measure_and_write(&sam, &config.out_dir);
    }
    let report = spacejmp::reproduce(&config)?;
    print!("{report}");
    report.write(&config)?;
    println!(
        "written: {}/{{fig1,switch,table2,fig6,fig8,fig9,targets}}.csv, spacejmp.json, fig1.svg, fig6.svg, fig8-native.svg, fig8-model.svg, fig9.svg",
        config.out_dir.display()
    );
    if !args.no_sam {
        crate::cmd::sam_bench::measure_and_write(&sam, &config.out_dir)?;
    }
    if !args.no_kv {
        crate::cmd::kv_bench::reproduce(
            args.common.quick,
            args.common.seed,
            &config.out_dir,
            !config.progress,
        )?;
    }
    Ok(())
}

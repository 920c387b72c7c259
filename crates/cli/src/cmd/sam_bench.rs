//! `pmlab sam bench`: Figures 11 and 12 on their own (also part of `pmlab reproduce
//! spacejmp`).

use std::path::{Path, PathBuf};

use pmlab_experiments::spacejmp::{sam, sam_report};

/// Arguments of `pmlab sam bench`.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Bytes of generated SAM (default 1 GiB; 64 MiB with --quick).
    #[arg(long, value_parser = pmlab_spine::parse_size)]
    bytes: Option<u64>,
    /// A smaller data set.
    #[arg(long)]
    quick: bool,
    /// Timed repetitions per operation (medians).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Data-set seed (xoshiro256++).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// tmpfs directory for the files, registry and region file.
    #[arg(long, default_value = "/dev/shm")]
    scratch: PathBuf,
    /// Where sam.json, fig11.csv, fig11.svg and fig12.svg go.
    #[arg(long, default_value = "results/spacejmp")]
    out: PathBuf,
    /// The region `view` queries.
    #[arg(long, default_value = "chr1:1000000-1100000")]
    region: String,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// The configuration for a run in `out` (used by `reproduce spacejmp` too).
pub fn config(
    quick: bool,
    seed: u64,
    scratch: &Path,
    progress: bool,
) -> anyhow::Result<sam::SamConfig> {
    Ok(sam::SamConfig {
        sam_bytes: if quick { 64 << 20 } else { 1 << 30 },
        reps: 3,
        scratch: scratch.to_path_buf(),
        pmlab: std::env::current_exe()?,
        seed,
        region: "chr1:1000000-1100000".into(),
        progress,
    })
}

/// Runs the comparison, prints it and writes its files into `out`.
pub fn measure_and_write(cfg: &sam::SamConfig, out: &Path) -> anyhow::Result<()> {
    let b = sam::run(cfg)?;
    print!("{}", sam_report::table(&b));
    for t in sam_report::targets(&b) {
        println!("target {t}");
    }
    std::fs::create_dir_all(out)?;
    sam_report::write(&b, out)?;
    println!(
        "written: {}/{{sam.json, fig11.csv, fig11.svg, fig12.svg}}",
        out.display()
    );
    Ok(())
}

/// Runs `pmlab sam bench`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut cfg = config(args.quick, args.seed, &args.scratch, !args.no_progress)?;
    if let Some(b) = args.bytes {
        cfg.sam_bytes = b;
    }
    cfg.reps = args.reps.max(1);
    cfg.region = args.region;
    measure_and_write(&cfg, &args.out)
}

//! `pmlab reproduce PAPER`: run a paper's evaluation and lay it beside the paper.

use anyhow::{Context, bail};
use pmlab_experiments::aerie;
use pmlab_experiments::kessler_hill::{self, Config, Workload};
use pmlab_native::scm_model::{WriteModel, process_charges, set_write_model};
use std::path::PathBuf;

/// Arguments of `pmlab reproduce`.
#[derive(clap::Args)]
pub struct Args {
    /// The paper: `kessler-hill` or `aerie`.
    paper: String,
    /// Quick mode: the built-in small traces (kessler-hill); small files and fewer
    /// iterations, under two minutes (aerie).
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
    /// Where tables (CSV), JSON and plots (SVG) are written (default: results/PAPER).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// aerie: repetitions (figures are medians).
    #[arg(long)]
    reps: Option<usize>,
    /// aerie: FileBench iterations timed per personality.
    #[arg(long)]
    iterations: Option<usize>,
    /// aerie: files in every personality's fileset (default: the paper's variants).
    #[arg(long)]
    nfiles: Option<usize>,
    /// aerie: Table 2's large file in MiB (paper: 1024).
    #[arg(long)]
    file_mib: Option<u64>,
    /// aerie: MiB Table 2's random tests touch (paper: 100).
    #[arg(long)]
    random_mib: Option<u64>,
    /// aerie: Table 2's small files opened, created, deleted (paper: 1024).
    #[arg(long)]
    small_files: Option<usize>,
    /// aerie: KVFS's fixed object size in KiB, which also bounds webproxy's file sizes
    /// on every file system (default 128).
    #[arg(long)]
    kv_object_kib: Option<u64>,
    /// aerie: do not try ext4 on a loop device.
    #[arg(long)]
    no_ext4: bool,
    /// aerie: tmpfs directory for volumes, tmpfs runs and the ext4 image.
    #[arg(long, default_value = "/dev/shm")]
    scratch: PathBuf,
    /// aerie: the paper's SCM write model (150 ns per written-back line, 4 GB/s) on
    /// pmlab's own persists (the kernel file systems cannot be delayed).
    #[arg(long)]
    scm_write_model: bool,
}

/// The traces shipped with pmlab (see data/traces/README.md).
fn builtin_traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/traces")
}

/// Runs `pmlab reproduce`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.paper.as_str() {
        "kessler-hill" => {}
        "aerie" => return run_aerie(args),
        other => bail!("unknown paper {other:?}; available: kessler-hill, aerie"),
    }
    if !args.quick && args.traces.is_none() {
        bail!(
            "the full Kessler-Hill run needs long traces: record them with `pmlab trace record` \
             into a directory and pass --traces DIR, or use --quick for the built-in set"
        );
    }
    let dir = args.traces.clone().unwrap_or_else(builtin_traces);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results/kessler-hill"));
    let mut config = Config::paper(out);
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

/// `pmlab reproduce aerie`: Table 2 and Figure 2 of the Aerie paper.
fn run_aerie(args: Args) -> anyhow::Result<()> {
    let out = args.out.unwrap_or_else(|| PathBuf::from("results/aerie"));
    let mut config = if args.quick {
        aerie::Config::quick(out)
    } else {
        aerie::Config::full(out)
    };
    config.seed = args.seed;
    config.progress = !args.no_progress;
    config.scratch = args.scratch;
    config.ext4 = !args.no_ext4;
    if let Some(r) = args.reps {
        config.reps = r.max(1);
    }
    for (_, p) in &mut config.personalities {
        if let Some(i) = args.iterations {
            p.iterations = i.max(1);
        }
        if let Some(n) = args.nfiles {
            p.nfiles = n.max(1);
        }
    }
    if let Some(m) = args.file_mib {
        config.table2.file_bytes = m.max(1) << 20;
    }
    if let Some(m) = args.random_mib {
        config.table2.random_bytes = m.max(1) << 20;
    }
    if let Some(k) = args.kv_object_kib {
        config.webproxy_max_file = k.max(4) << 10;
    }
    if let Some(n) = args.small_files {
        config.table2.files = n.max(1);
        config.table2.appends = n.max(1);
    }
    if args.scm_write_model {
        // Process-wide: the in-process service's and clients' persists are charged; the
        // kernel file systems' stores cannot be.
        set_write_model(WriteModel::AERIE_PCM);
        config.scm_write_model = true;
    }
    let report = aerie::reproduce(&config)?;
    print!("{report}");
    report.write(&config)?;
    if args.scm_write_model {
        let c = process_charges();
        println!(
            "SCM write model: {} written-back lines charged, {:.1} ms of modelled stall",
            c.lines,
            c.stall_ps as f64 / 1e9
        );
    }
    println!(
        "written: {}/{{table2.csv, figure2.csv, targets.csv, aerie.json, table2.svg, figure2.svg}}",
        config.out_dir.display()
    );
    Ok(())
}

//! `pmlab reproduce aerie`: Aerie's Table 2 and Figure 2.

use super::Common;
use pmlab_experiments::aerie;
use pmlab_native::scm_model::{WriteModel, process_charges, set_write_model};
use std::path::PathBuf;

/// Arguments of `pmlab reproduce aerie`.
#[derive(clap::Args)]
pub struct Args {
    /// `--quick`: small files and fewer iterations, under a minute.
    #[command(flatten)]
    common: Common,
    /// Repetitions (figures are medians).
    #[arg(long)]
    reps: Option<usize>,
    /// FileBench iterations timed per personality.
    #[arg(long)]
    iterations: Option<usize>,
    /// Files in every personality's fileset (default: the paper's variants).
    #[arg(long)]
    nfiles: Option<usize>,
    /// Table 2's large file in MiB (paper: 1024).
    #[arg(long)]
    file_mib: Option<u64>,
    /// MiB Table 2's random tests touch (paper: 100).
    #[arg(long)]
    random_mib: Option<u64>,
    /// Table 2's small files opened, created, deleted (paper: 1024).
    #[arg(long)]
    small_files: Option<usize>,
    /// KVFS's fixed object size in KiB, which also bounds webproxy's file sizes on every
    /// file system (default 128).
    #[arg(long)]
    kv_object_kib: Option<u64>,
    /// Run only these FileBench personalities (comma-separated: fileserver, webserver,
    /// webproxy, varmail; default: all four).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Threads that run each FileBench personality, in one process sharing one file
    /// system client (libFS is one per process), as a comma-separated list of counts and
    /// `paper` (FileBench's own: 50 for
    /// fileserver, 100 for webserver and webproxy, 16 for varmail); every entry is a run
    /// of its own. Default: 1,paper (full), 1 (--quick).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<aerie::Threads>,
    /// Run only these file systems (comma-separated: tmpfs, ext4, PXFS, KVFS; default:
    /// all): to profile one of them alone. Ratios need tmpfs in the same run.
    #[arg(long, value_delimiter = ',')]
    systems: Vec<String>,
    /// Skip Table 2 (the microbenchmarks); run only the personalities.
    #[arg(long)]
    no_table2: bool,
    /// Do not try ext4 on a loop device.
    #[arg(long)]
    no_ext4: bool,
    /// tmpfs directory for volumes, tmpfs runs and the ext4 image.
    #[arg(long, default_value = "/dev/shm")]
    scratch: PathBuf,
    /// The paper's SCM write model (150 ns per written-back line, 4 GB/s) on pmlab's own
    /// persists (the kernel file systems cannot be delayed).
    #[arg(long)]
    scm_write_model: bool,
}

/// `pmlab reproduce aerie`: Table 2 and Figure 2 of the Aerie paper.
pub fn run(args: Args) -> anyhow::Result<()> {
    let out = args.common.out_dir("aerie");
    let mut config = if args.common.quick {
        aerie::Config::quick(out)
    } else {
        aerie::Config::full(out)
    };
    config.seed = args.common.seed;
    config.progress = !args.common.no_progress;
    config.scratch = args.scratch;
    config.ext4 = !args.no_ext4;
    if !args.only.is_empty() {
        for name in &args.only {
            anyhow::ensure!(
                aerie::Personality::ALL.iter().any(|p| p.name() == name),
                "--only {name:?} is not one of fileserver, webserver, webproxy, varmail"
            );
        }
        config
            .personalities
            .retain(|(p, _)| args.only.iter().any(|n| n == p.name()));
    }
    for name in &args.systems {
        anyhow::ensure!(
            aerie::SYSTEMS.contains(&name.as_str()),
            "--systems {name:?} is not one of tmpfs, ext4, PXFS, KVFS"
        );
    }
    config.systems = args.systems.clone();
    config.run_table2 = !args.no_table2;
    if !args.threads.is_empty() {
        config.threads = args.threads.clone();
    }
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

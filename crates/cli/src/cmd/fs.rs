//! `pmlab fs`: the Aerie file system — build, check and serve volumes.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;
use pmlab_fs::layout::Params;

/// Arguments of `pmlab fs`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

// Clap prints these doc comments as the commands' help, where `<ns>ns` reads as a
// placeholder to fill in, not as HTML.
#[allow(rustdoc::invalid_html_tags)]
#[derive(Subcommand)]
enum Cmd {
    /// Build an empty volume (a directory holding the metadata and data spaces).
    Mkfs {
        /// The volume directory to create (must not exist, or be empty).
        volume: PathBuf,
        /// Pages of the metadata space.
        #[arg(long, default_value_t = Params::default().meta_pages)]
        meta_pages: u64,
        /// Inodes in the inode table.
        #[arg(long, default_value_t = Params::default().inodes)]
        inodes: u64,
        /// Pages of the service's redo log.
        #[arg(long, default_value_t = Params::default().log_pages)]
        log_pages: u64,
        /// Most permission domains.
        #[arg(long, default_value_t = Params::default().max_domains)]
        domains: u64,
        /// Pages of each domain's data space.
        #[arg(long, default_value_t = Params::default().domain_pages)]
        domain_pages: u64,
        /// Pages of one KVFS object.
        #[arg(long, default_value_t = Params::default().kv_object_pages)]
        kv_object_pages: u64,
        /// Permission bits of the root directory (octal).
        #[arg(long, default_value = "755")]
        root_mode: String,
    },
    /// Check a volume; exits non-zero if anything is wrong, naming what and where.
    Fsck {
        /// The volume directory.
        volume: PathBuf,
    },
    /// Crash-test the service's journal and commit path on the machine model: every
    /// crash point of a seeded workload's batches (plus random subsets of pending
    /// write-backs) is recovered, fsck'd and held against an oracle. Exits non-zero if
    /// any crash image fails. `--fault` runs a deliberately broken commit protocol,
    /// which must fail.
    Crashtest {
        /// Seed of the workload, the cache and the pending-subset draws (xoshiro256++).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The longer configuration (100 batches, more subsets and recoveries explored).
        #[arg(long)]
        large: bool,
        /// Batches to commit and explore (default: 16, or 100 with --large).
        #[arg(long)]
        batches: Option<usize>,
        /// Lines of the model's cache (a power of two; a few lines evict early and often).
        #[arg(long)]
        cache_lines: Option<u64>,
        /// Random subsets of the pending write-backs tried at each crash point.
        #[arg(long)]
        samples: Option<u32>,
        /// Break the commit protocol (pmlab-tx's redo log) on purpose: skip-log-fence,
        /// skip-apply-fence or header-only-checksum.
        #[arg(long)]
        fault: Option<String>,
    },
    /// Kill client processes and the service at random points (SIGKILL) while a seeded
    /// workload runs; after each kill the volume must recover, pass fsck, and keep every
    /// promise of the clients' fsync oracle logs (kept in `<volume>.oracle/`).
    Stress {
        /// The volume directory (created if missing).
        volume: PathBuf,
        /// Rounds, each ending in a kill (the service on even rounds, a client on odd).
        #[arg(long, default_value_t = 6)]
        kills: u32,
        /// Client processes per round.
        #[arg(long, default_value_t = 3)]
        clients: u32,
        /// Seed of the workload and of the kill points (xoshiro256++).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// SCM write model of the service and the clients: off, pcm (Aerie's 150 ns per
        /// written-back line, 4 GB/s) or <ns>ns,<MB/s>MB/s.
        #[arg(long, default_value = "off")]
        scm_model: pmlab_native::scm_model::WriteModel,
    },
    /// The paper's microbenchmarks (Table 2), PXFS beside the kernel file system at
    /// `--peer` in the same run; medians over repetitions.
    Bench {
        /// A directory on the kernel file system to compare with (tmpfs, ext4...).
        #[arg(long, default_value = "/dev/shm")]
        peer: PathBuf,
        /// Scratch directory for the Aerie volume (default: a new one under /dev/shm).
        #[arg(long)]
        scratch: Option<PathBuf>,
        /// Files (and operations) per kind.
        #[arg(long, default_value_t = 1024)]
        files: usize,
        /// Repetitions.
        #[arg(long, default_value_t = 5)]
        reps: usize,
    },
    /// One client process of `pmlab fs stress`.
    #[command(hide = true)]
    StressWorker {
        /// The service's socket.
        #[arg(long)]
        socket: PathBuf,
        /// Seed of this client's workload.
        #[arg(long)]
        seed: u64,
        /// The client's own directory in the volume (it must exist).
        #[arg(long)]
        dir: String,
        /// The oracle log to append to.
        #[arg(long)]
        oracle: PathBuf,
    },
    /// Run the trusted service for a volume on a Unix socket. Run it under a uid of its
    /// own: it refuses a volume whose directory or files another user could write, or
    /// that another user owns (mkfs makes them 0600), since it must be their only writer.
    Serve {
        /// The volume directory.
        volume: PathBuf,
        /// Path of the Unix socket to listen on.
        #[arg(long)]
        socket: PathBuf,
        /// How long a lease holder may take to answer a revocation, in milliseconds,
        /// before the service reclaims its leases by disconnecting it.
        #[arg(long, default_value_t = 2000)]
        lease_timeout_ms: u64,
        /// SCM write model: off, pcm (Aerie's 150 ns per written-back line, 4 GB/s) or
        /// <ns>ns,<MB/s>MB/s (default: the PMLAB_SCM_WRITE_MODEL environment variable,
        /// else off).
        #[arg(long)]
        scm_model: Option<pmlab_native::scm_model::WriteModel>,
    },
}

/// Runs `pmlab fs`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.cmd {
        Cmd::Mkfs {
            volume,
            meta_pages,
            inodes,
            log_pages,
            domains,
            domain_pages,
            kv_object_pages,
            root_mode,
        } => {
            let p = Params {
                meta_pages,
                inodes,
                log_pages,
                max_domains: domains,
                domain_pages,
                kv_object_pages,
                ..Params::default()
            };
            mkfs(&volume, p, &root_mode)
        }
        Cmd::Fsck { volume } => fsck(&volume),
        Cmd::Crashtest {
            seed,
            large,
            batches,
            cache_lines,
            samples,
            fault,
        } => crashtest(seed, large, batches, cache_lines, samples, fault.as_deref()),
        Cmd::Stress {
            volume,
            kills,
            clients,
            seed,
            scm_model,
        } => stress(volume, kills, clients, seed, scm_model),
        Cmd::Bench {
            peer,
            scratch,
            files,
            reps,
        } => bench(peer, scratch, files, reps),
        Cmd::StressWorker {
            socket,
            seed,
            dir,
            oracle,
        } => {
            pmlab_native::scm_model::set_write_model_from_env().map_err(anyhow::Error::msg)?;
            pmlab_fscheck::stress::worker(&pmlab_fscheck::stress::WorkerArgs {
                socket,
                seed,
                dir,
                oracle,
            })
            .with_context(|| format!("worker {seed}"))
        }
        Cmd::Serve {
            volume,
            socket,
            lease_timeout_ms,
            scm_model,
        } => serve(&volume, &socket, lease_timeout_ms, scm_model),
    }
}

/// `pmlab fs mkfs`.
fn mkfs(volume: &Path, p: Params, root_mode: &str) -> anyhow::Result<()> {
    let mode = u32::from_str_radix(root_mode, 8)
        .with_context(|| format!("--root-mode {root_mode:?} is not an octal mode"))?;
    let owner = pmlab_fs::mkfs::RootOwner::current_user(mode);
    let sb = pmlab_fs::volume::create(volume, &p, owner)
        .with_context(|| format!("mkfs {}", volume.display()))?;
    println!(
        "{}: {} metadata pages ({} inodes, {} pool pages, redo log of {} pages), up to {} domains of {} pages",
        volume.display(),
        sb.meta_pages,
        sb.inode_count - 1,
        sb.meta_pages - sb.pool_first,
        sb.log_pages,
        sb.max_domains,
        sb.domain_pages
    );
    Ok(())
}

/// `pmlab fs fsck`: prints every finding; fails on an error.
fn fsck(volume: &Path) -> anyhow::Result<()> {
    let report = pmlab_fs::fsck::fsck_volume(volume)
        .with_context(|| format!("fsck {}", volume.display()))?;
    for f in &report.findings {
        println!("{f}");
    }
    let s = &report.summary;
    println!(
        "{}: {} directories, {} files, {} KVFS objects, {} domains, {} metadata pages and {} data pages in use",
        volume.display(),
        s.dirs,
        s.files,
        s.kv_objects,
        s.domains,
        s.meta_pages_used,
        s.data_pages_used
    );
    let errors = report
        .findings
        .iter()
        .filter(|f| f.severity == pmlab_fs::fsck::Severity::Error)
        .count();
    if errors > 0 {
        anyhow::bail!("{}: {errors} errors", volume.display());
    }
    println!("clean");
    Ok(())
}

/// `pmlab fs crashtest`.
fn crashtest(
    seed: u64,
    large: bool,
    batches: Option<usize>,
    cache_lines: Option<u64>,
    samples: Option<u32>,
    fault: Option<&str>,
) -> anyhow::Result<()> {
    use pmlab_fs::redo::{FAULTS, Fault, FaultPlan};
    use pmlab_fscheck::crashtest;
    let mut cfg = if large {
        crashtest::Config::large(seed)
    } else {
        crashtest::Config::small(seed)
    };
    if let Some(b) = batches {
        cfg.batches = b;
    }
    if let Some(c) = cache_lines {
        anyhow::ensure!(
            c.is_power_of_two(),
            "--cache-lines {c} is not a power of two"
        );
        cfg.cache_lines = c;
    }
    if let Some(n) = samples {
        cfg.pending_samples = n;
    }
    if let Some(name) = fault {
        let f = Fault::from_name(name)
            .filter(|f| FAULTS.contains(f))
            .with_context(|| {
                let known: Vec<&str> = FAULTS.iter().map(|f| f.name()).collect();
                format!("--fault {name:?} is not one of {}", known.join(", "))
            })?;
        cfg.faults = FaultPlan::broken(f);
    }
    println!(
        "crash test: seed {seed}, {} batches, {}-line cache, {} pending subsets per point, protocol {}",
        cfg.batches, cfg.cache_lines, cfg.pending_samples, cfg.faults
    );
    let t = std::time::Instant::now();
    let report = crashtest::run(&cfg).context("crash test")?;
    println!("{report}");
    println!("{:.1} s", t.elapsed().as_secs_f64());
    anyhow::ensure!(
        report.passed(),
        "{} crash images failed the oracle or fsck",
        report.failures.len()
    );
    Ok(())
}

/// `pmlab fs stress`: one line per round, then the summary.
fn stress(
    volume: PathBuf,
    kills: u32,
    clients: u32,
    seed: u64,
    scm_model: pmlab_native::scm_model::WriteModel,
) -> anyhow::Result<()> {
    // The driver's own recoveries write back lines too.
    pmlab_native::scm_model::set_write_model(scm_model);
    let cfg = pmlab_fscheck::stress::Config {
        volume: volume.clone(),
        kills,
        clients,
        seed,
        pmlab: std::env::current_exe().context("locating the pmlab executable")?,
        scm_model,
    };
    println!(
        "round  killed     ran(ms)  notes  dirs  files  meta-pages  data-pages  acks  checked"
    );
    let t0 = std::time::Instant::now();
    let rounds = pmlab_fscheck::stress::run(&cfg, |r| {
        println!(
            "{:>5}  {:<9}  {:>7}  {:>5}  {:>4}  {:>5}  {:>10}  {:>10}  {:>4}  {:>7}",
            r.round,
            r.killed,
            r.ran_ms,
            r.notes_before_recovery,
            r.summary.dirs,
            r.summary.files,
            r.summary.meta_pages_used,
            r.summary.data_pages_used,
            r.acks,
            r.checked
        )
    })
    .with_context(|| format!("stress {}", volume.display()))?;
    let acks: usize = rounds.iter().map(|r| r.acks).sum();
    println!(
        "{} kills in {:.1} s, volume clean and all {acks} fsync acknowledgements kept after every recovery",
        rounds.len(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `pmlab fs bench`: Table 2's operations on PXFS beside a kernel directory.
fn bench(peer: PathBuf, scratch: Option<PathBuf>, files: usize, reps: usize) -> anyhow::Result<()> {
    let scratch = scratch.unwrap_or_else(|| {
        PathBuf::from("/dev/shm").join(format!("pmlab-fs-bench-{}", std::process::id()))
    });
    std::fs::create_dir_all(&scratch).with_context(|| format!("mkdir {}", scratch.display()))?;
    let cfg = pmlab_fscheck::bench::Config {
        scratch: scratch.clone(),
        peer: peer.clone(),
        files,
        reps,
    };
    let rows = pmlab_fscheck::bench::run(&cfg);
    let _ = std::fs::remove_dir_all(&scratch);
    let rows = rows.context("bench")?;
    let kind = pmlab_fscheck::bench::fs_type(&peer);
    println!("4 KiB operations, mean latency per operation (us), median of {reps} runs of {files}");
    println!(
        "{:<8} {:>10} {:>12} {:>8}",
        "op",
        "PXFS",
        kind.as_str(),
        "ratio"
    );
    for r in rows {
        println!(
            "{:<8} {:>10.2} {:>12.2} {:>8.2}",
            r.op,
            r.pxfs_us,
            r.peer_us,
            r.pxfs_us / r.peer_us
        );
    }
    Ok(())
}

/// `pmlab fs serve`: runs the service until SIGINT or SIGTERM; refuses (saying why) a
/// volume whose files another user could write.
fn serve(
    volume: &Path,
    socket: &Path,
    lease_timeout_ms: u64,
    scm_model: Option<pmlab_native::scm_model::WriteModel>,
) -> anyhow::Result<()> {
    match scm_model {
        Some(m) => pmlab_native::scm_model::set_write_model(m),
        None => {
            pmlab_native::scm_model::set_write_model_from_env().map_err(anyhow::Error::msg)?;
        }
    }
    let cfg = pmlab_fs::service::Config::with_lease_timeout(std::time::Duration::from_millis(
        lease_timeout_ms,
    ));
    pmlab_fs::service::serve(volume, socket, cfg)
        .with_context(|| format!("serve {} on {}", volume.display(), socket.display()))
}

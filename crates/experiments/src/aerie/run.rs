//! Runs every benchmark on every file system, repetition by repetition, each on a
//! fresh volume or directory.

use std::path::Path;
use std::sync::Arc;

use pmlab_fscheck::bench::{KernelDir, PxfsMount, PxfsVolume, VolumeSize, table2, tempdir_in};
use serde::Serialize;

use super::ext4::Ext4Loop;
use super::filebench::{self, Counts, Params, Personality, PosixTarget, Run, Target};
use super::kv::KvTarget;
use super::{AerieError, Config};

/// Table 2 samples of one file system: per repetition, microseconds per operation in
/// `table2::OPS` order.
#[derive(Clone, Debug, Serialize)]
pub struct Table2Samples {
    /// File system.
    pub system: String,
    /// One array per repetition.
    pub samples: Vec<[f64; 8]>,
}

/// FileBench samples of one personality on one file system with one thread count.
#[derive(Clone, Debug, Serialize)]
pub struct FilebenchSamples {
    /// The personality.
    pub personality: Personality,
    /// Its parameters.
    pub params: Params,
    /// File system.
    pub system: String,
    /// Threads (of one process, sharing its client) that ran the iterations.
    pub threads: usize,
    /// Microseconds per iteration, one per repetition.
    pub samples: Vec<f64>,
    /// Iterations per second of wall-clock time (all threads), one per repetition.
    pub throughput: Vec<f64>,
    /// Flowops executed in the last repetition.
    pub counts: Counts,
    /// Flowops skipped in the last repetition (no file to pick).
    pub skipped: u64,
    /// Lease revocations per iteration, one per repetition (empty: no leases).
    pub revocations_per_iteration: Vec<f64>,
}

/// Everything measured.
#[derive(Clone, Debug, Serialize)]
pub struct Measurements {
    /// Table 2, per file system.
    pub table2: Vec<Table2Samples>,
    /// Figure 2 (and varmail), per personality, thread count and file system.
    pub filebench: Vec<FilebenchSamples>,
    /// Why ext4 did not run, if it did not.
    pub ext4_skipped: Option<String>,
}

fn fs_err(what: String) -> impl FnOnce(pmlab_fs::FsError) -> AerieError {
    move |source| AerieError::Fs { what, source }
}

/// The systems a personality runs on: KVFS only where its interface fits (webproxy);
/// only those `config` names, if it names any.
fn systems_for(config: &Config, p: Personality, ext4: bool) -> Vec<&'static str> {
    let mut v = all_systems_for(p, ext4);
    v.retain(|s| config.runs_system(s));
    v
}

fn all_systems_for(p: Personality, ext4: bool) -> Vec<&'static str> {
    let mut v = vec!["tmpfs"];
    if ext4 {
        v.push("ext4");
    }
    v.push("PXFS");
    if p == Personality::Webproxy {
        v.push("KVFS");
    }
    v
}

/// Clients of a benchmark volume: the volume's own mount and the one the personality's
/// threads share (`aerie_run`). Reservations ahead of need are per client, so the
/// volume's headroom does not grow with the thread count.
const CLIENTS: u64 = 2;

fn volume_for(p: &Params, cap: u64, kv: bool) -> VolumeSize {
    let file = p.meanfilesize + p.appendsize;
    // Every file of the fileset at its drawn size at once (the sum of nfiles gamma draws
    // stays within a few per cent of nfiles x the mean at these counts; twice covers it
    // and the rounding up to pages) and what the iterations add; a data space is
    // populated whole before a run (SCM is present from the start), which was most of a
    // full reproduction's system time with three times the mean.
    let mut data = 2 * p.nfiles as u64 * p.meanfilesize + 2 * p.iterations as u64 * file;
    if kv {
        // Every put takes a whole fixed-size object, and each client holds a few dozen
        // ahead of need (`pmlab_fs::kvfs::extents_per_reserve`).
        data += (p.nfiles + p.iterations) as u64 * cap + CLIENTS * 32 * cap;
    }
    VolumeSize {
        // Each client holds some reserved pages ahead of need.
        data_bytes: data + (64 << 20) + CLIENTS * (16 << 20),
        inodes: 2 * p.nfiles as u64 + 256 + 64 * CLIENTS,
        kv_object_bytes: cap.max(4096),
    }
}

/// Runs `f` in a fresh directory under `parent` (a kernel file system's), removed after.
fn kernel_run<T>(
    parent: &Path,
    f: impl FnOnce(&Path) -> pmlab_fs::Result<T>,
) -> pmlab_fs::Result<T> {
    let dir = tempdir_in(parent)?;
    let r = f(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// Runs the personality on `targets`, one thread each.
fn run_on<T: Target + Send>(
    p: Personality,
    params: &Params,
    cap: u64,
    seed: u64,
    targets: &mut [T],
) -> pmlab_fs::Result<Run> {
    let mut refs: Vec<&mut (dyn Target + Send)> = targets
        .iter_mut()
        .map(|t| t as &mut (dyn Target + Send))
        .collect();
    filebench::run(p, params, cap, seed, &mut refs)
}

/// One repetition of personality `p` with `threads` threads on system `sys`.
fn personality_on(
    config: &Config,
    ext4: Option<&Ext4Loop>,
    sys: &str,
    (p, params): (Personality, Params),
    threads: usize,
    seed: u64,
) -> Result<Run, AerieError> {
    let what = format!("{} with {threads} threads on {sys}", p.name());
    let cap = if p == Personality::Webproxy {
        config.webproxy_max_file
    } else {
        0
    };
    let kernel = |at: &Path| {
        kernel_run(at, |dir| {
            let mut ks: Vec<KernelDir> = (0..threads).map(|_| KernelDir::new(sys, dir)).collect();
            let mut ts: Vec<PosixTarget<'_, KernelDir>> = ks
                .iter_mut()
                .map(|k| PosixTarget::new(k, params.iosize))
                .collect();
            run_on(p, &params, cap, seed, &mut ts)
        })
    };
    let r = match sys {
        "PXFS" | "KVFS" => {
            let vol = PxfsVolume::create(&config.scratch, volume_for(&params, cap, sys == "KVFS"))
                .map_err(fs_err(what.clone()))?;
            let r = aerie_run(&vol, sys == "KVFS", (p, &params), cap, threads, seed);
            vol.destroy().map_err(fs_err(what.clone()))?;
            r
        }
        "ext4" => kernel(ext4.expect("listed only when mounted").path()),
        _ => kernel(&config.scratch),
    };
    r.map_err(fs_err(what))
}

/// The personality on an Aerie volume, one client shared by all the threads, as the
/// threads of one application process share its libFS (§3.1): a PXFS mount or a KVFS
/// store, with a handle per thread.
fn aerie_run(
    vol: &PxfsVolume,
    kv: bool,
    (p, params): (Personality, &Params),
    cap: u64,
    threads: usize,
    seed: u64,
) -> pmlab_fs::Result<Run> {
    if kv {
        let store = Arc::new(vol.kvfs("/kv")?);
        let max = store.max_value() as usize;
        let mut ts: Vec<KvTarget> = (0..threads)
            .map(|i| KvTarget::new(store.clone(), max, i == 0))
            .collect();
        run_on(p, params, cap, seed, &mut ts)
    } else {
        let first = vol.mount()?;
        let mut mounts: Vec<PxfsMount> = (1..threads).map(|_| first.share()).collect();
        mounts.insert(0, first);
        let mut ts: Vec<PosixTarget<'_, PxfsMount>> = mounts
            .iter_mut()
            .map(|m| PosixTarget::new(m, params.iosize))
            .collect();
        run_on(p, params, cap, seed, &mut ts)
    }
}

/// One repetition of Table 2 on `sys`.
fn table2_on(
    config: &Config,
    ext4: Option<&Ext4Loop>,
    sys: &str,
    seed: u64,
) -> Result<[f64; 8], AerieError> {
    let what = format!("Table 2 on {sys}");
    let sizes = table2::Sizes {
        seed,
        ..config.table2
    };
    let r = match sys {
        "PXFS" => {
            let s = &config.table2;
            let mut vol = PxfsVolume::create(
                &config.scratch,
                VolumeSize {
                    data_bytes: s.file_bytes + (s.files + s.appends) as u64 * 8192 + (64 << 20),
                    inodes: s.files as u64 + 256,
                    kv_object_bytes: 4096,
                },
            )
            .map_err(fs_err(what.clone()))?;
            let r = table2::run(&mut vol, &sizes);
            vol.destroy().map_err(fs_err(what.clone()))?;
            r
        }
        "ext4" => {
            let at = ext4.expect("listed only when mounted").path();
            kernel_run(at, |d| table2::run(&mut KernelDir::new(sys, d), &sizes))
        }
        _ => kernel_run(&config.scratch, |d| {
            table2::run(&mut KernelDir::new(sys, d), &sizes)
        }),
    };
    r.map_err(fs_err(what))
}

/// The loop device for ext4, or why there is none.
fn mount_ext4(config: &Config) -> (Option<Ext4Loop>, Option<String>) {
    if !config.ext4 {
        return (None, Some("not requested (--no-ext4)".to_string()));
    }
    if !config.runs_system("ext4") {
        return (None, Some("not among --systems".to_string()));
    }
    match Ext4Loop::mount(&config.scratch, &config.mount_parent, config.ext4_bytes) {
        Ok(m) => (Some(m), None),
        Err(why) => {
            eprintln!("ext4 on a loop device skipped: {why}");
            (None, Some(why))
        }
    }
}

fn progress_bar(config: &Config, steps: usize) -> indicatif::ProgressBar {
    if !config.progress {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(steps as u64);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} runs  {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    b
}

/// Adds one repetition's run to the samples of (personality, system, threads).
fn record(fb: &mut Vec<FilebenchSamples>, (p, params): (Personality, Params), sys: &str, r: Run) {
    let found = fb
        .iter_mut()
        .find(|s| s.personality == p && s.system == sys && s.threads == r.threads);
    let revoked = r
        .revocations
        .map(|n| n as f64 / params.iterations.max(1) as f64);
    match found {
        Some(s) => {
            s.samples.push(r.us_per_iteration);
            s.throughput.push(r.iterations_per_s);
            s.counts = r.counts;
            s.skipped = r.skipped;
            s.revocations_per_iteration.extend(revoked);
        }
        None => fb.push(FilebenchSamples {
            personality: p,
            params,
            system: sys.to_string(),
            threads: r.threads,
            samples: vec![r.us_per_iteration],
            throughput: vec![r.iterations_per_s],
            counts: r.counts,
            skipped: r.skipped,
            revocations_per_iteration: revoked.into_iter().collect(),
        }),
    }
}

/// Runs Table 2 and the personalities (at each of the configured thread counts) on
/// every file system, `config.reps` times.
pub fn measure(config: &Config) -> Result<Measurements, AerieError> {
    let (ext4, ext4_skipped) = mount_ext4(config);
    let t2_systems: Vec<&str> = ["tmpfs", "ext4", "PXFS"]
        .into_iter()
        .filter(|_| config.run_table2)
        .filter(|s| *s != "ext4" || ext4.is_some())
        .filter(|s| config.runs_system(s))
        .collect();
    let runs: Vec<(Personality, Params, usize)> = config
        .personalities
        .iter()
        .flat_map(|&(p, params)| {
            config
                .thread_counts(p)
                .into_iter()
                .map(move |n| (p, params, n))
        })
        .collect();
    let steps = config.reps
        * (t2_systems.len()
            + runs
                .iter()
                .map(|(p, _, _)| systems_for(config, *p, ext4.is_some()).len())
                .sum::<usize>());
    let bar = progress_bar(config, steps);
    let mut t2: Vec<Table2Samples> = t2_systems
        .iter()
        .map(|s| Table2Samples {
            system: s.to_string(),
            samples: Vec::new(),
        })
        .collect();
    let mut fb: Vec<FilebenchSamples> = Vec::new();
    for rep in 0..config.reps {
        let seed = config.seed + rep as u64;
        for (i, &sys) in t2_systems.iter().enumerate() {
            bar.set_message(format!("rep {}: Table 2 on {sys}", rep + 1));
            t2[i]
                .samples
                .push(table2_on(config, ext4.as_ref(), sys, seed)?);
            bar.inc(1);
        }
        for &(p, params, threads) in &runs {
            for sys in systems_for(config, p, ext4.is_some()) {
                bar.set_message(format!("rep {}: {} x{threads} on {sys}", rep + 1, p.name()));
                let r = personality_on(config, ext4.as_ref(), sys, (p, params), threads, seed)?;
                record(&mut fb, (p, params), sys, r);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    drop(ext4);
    Ok(Measurements {
        table2: t2,
        filebench: fb,
        ext4_skipped,
    })
}

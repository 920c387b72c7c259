//! `pmlab vas stress --kills N`: worker processes switch into a VAS holding a lockable
//! segment read-write (exclusive lock) or read-only (shared), and are SIGKILLed at
//! random moments, holding or not. Checked throughout:
//!
//! * mutual exclusion: a writer marks the segment with its pid while inside; a process
//!   entering finds no live writer's mark (a dead writer's mark stays until the next
//!   writer overwrites it; whoever acquired first after the death was told of it, which
//!   `crates/vas/tests/native.rs` checks on its own);
//! * no lock is held by a dead process past the next acquire: every kill is followed by
//!   acquisitions, and at the end one exclusive acquire succeeds after all workers are
//!   killed, reporting every dead holder;
//! * the registry stays consistent (`pmlab vas check`).
//!
//! Kill moments, victims and workers' choices come from xoshiro256++ seeded by `--seed`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use pmlab_vas::native::{Holder, NativeSpaces, Registry, SegLock, check::check};
use pmlab_vas::{Access, AttachTo, Mode, SpaceJmp};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Arguments of `pmlab vas stress`.
#[derive(clap::Args)]
pub struct Args {
    /// SIGKILLs to deliver.
    #[arg(long, default_value_t = 20)]
    kills: u32,
    /// Worker processes alive at once.
    #[arg(long, default_value_t = 4)]
    workers: u32,
    /// Seed of the xoshiro256++ generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Longest pause before a kill, in milliseconds.
    #[arg(long, default_value_t = 20)]
    max_pause_ms: u64,
}

/// Arguments of one worker.
#[derive(clap::Args)]
pub struct WorkerArgs {
    /// Seed of this worker's choices.
    #[arg(long)]
    seed: u64,
}

/// Word offsets in the stress segment.
const WRITER_MARK: usize = 0;
const WRITES: usize = 1;
const RECOVERED: usize = 2;

fn word(base: *mut u8, i: usize) -> &'static AtomicU64 {
    // SAFETY: the segment is at least a page, mapped for the process's life; words are
    // accessed atomically. (A read-only mapping is only ever loaded from.)
    unsafe { &*(base.cast::<AtomicU64>().add(i)) }
}

fn pid_alive(pid: u64) -> bool {
    pid != 0
        && Holder {
            pid: pid as u32,
            start: 0,
        }
        .alive_ignoring_start()
}

/// One worker: forever, enter read-only or read-write at random, check, leave.
pub fn worker(a: &WorkerArgs, dir: &Path) -> anyhow::Result<()> {
    let mut s = NativeSpaces::open_with(dir, Default::default(), false)?;
    let rw = s.vas_attach(s.vas_find("stress-rw")?)?;
    let ro = s.vas_attach(s.vas_find("stress-ro")?)?;
    let seg = s.seg_find("stress")?;
    let base = s.segment_base(seg).context("segment mapped")?;
    let me = u64::from(std::process::id());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(a.seed);
    loop {
        let write = rng.gen_bool(0.5);
        s.vas_switch(if write { rw } else { ro })?;
        let mark = word(base, WRITER_MARK).load(Ordering::Acquire);
        if mark != 0 && mark != me && pid_alive(mark) {
            eprintln!(
                "VIOLATION: pid {me} entered ({}) while writer {mark} is inside",
                if write { "rw" } else { "ro" }
            );
            std::process::exit(3);
        }
        if write {
            if mark != 0 {
                // The previous writer died inside (its mark's pid is dead, checked
                // above). Its hold was cleared by whoever acquired next: this writer,
                // or a reader before it (who cannot clear the mark: read-only).
                word(base, RECOVERED).fetch_add(1, Ordering::Relaxed);
            }
            word(base, WRITER_MARK).store(me, Ordering::Release);
            word(base, WRITES).fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..2000)));
        if write {
            word(base, WRITER_MARK).store(0, Ordering::Release);
        }
        s.vas_switch_home()?;
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..1000)));
    }
}

fn spawn(dir: &Path, seed: u64) -> anyhow::Result<Child> {
    Command::new(std::env::current_exe()?)
        .args(["vas", "--dir"])
        .arg(dir)
        .args(["stress-worker", "--seed", &seed.to_string()])
        .spawn()
        .context("starting a stress worker")
}

fn setup(dir: &Path) -> anyhow::Result<()> {
    Registry::create(dir, 0)?;
    let mut s = NativeSpaces::open_with(dir, Default::default(), false)?;
    let seg = s.seg_alloc("stress", None, 4096, Mode(0o600))?;
    let rw = s.vas_create("stress-rw", Mode(0o600))?;
    let ro = s.vas_create("stress-ro", Mode(0o600))?;
    s.seg_attach(AttachTo::Vas(rw), seg, Access::ReadWrite)?;
    s.seg_attach(AttachTo::Vas(ro), seg, Access::ReadOnly)?;
    Ok(())
}

/// The workers alive, killed whenever the test ends (also on an error), so that none
/// outlives it.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.0 {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// Runs the kill test.
pub fn run(a: &Args, dir: Option<PathBuf>) -> anyhow::Result<()> {
    let scratch = match &dir {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("pmlab-vas-stress")
                .tempdir_in("/dev/shm")?,
        ),
    };
    let dir = dir.unwrap_or_else(|| scratch.as_ref().expect("made").path().to_path_buf());
    setup(&dir).with_context(|| format!("setting up {}", dir.display()))?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(a.seed);
    let mut next_seed = a.seed.wrapping_mul(1000);
    let mut guard = Workers(Vec::new());
    for _ in 0..a.workers.max(1) {
        next_seed += 1;
        guard.0.push(spawn(&dir, next_seed)?);
    }
    let workers = &mut guard.0;
    let started = Instant::now();
    let progress = indicatif::ProgressBar::new(u64::from(a.kills));
    for _ in 0..a.kills {
        std::thread::sleep(Duration::from_millis(
            rng.gen_range(1..=a.max_pause_ms.max(1)),
        ));
        let i = rng.gen_range(0..workers.len());
        if let Some(st) = workers[i].try_wait()? {
            bail!(
                "worker {} exited by itself ({st}): a violation (see its message)",
                workers[i].id()
            );
        }
        workers[i].kill()?;
        workers[i].wait()?;
        next_seed += 1;
        workers[i] = spawn(&dir, next_seed)?;
        progress.inc(1);
    }
    progress.finish_and_clear();
    // Let the survivors run past the last kill, then kill them all, holding or not.
    std::thread::sleep(Duration::from_millis(50));
    for w in workers.iter_mut() {
        if let Some(st) = w.try_wait()? {
            bail!("worker {} exited by itself ({st}): a violation", w.id());
        }
        w.kill()?;
        w.wait()?;
    }
    summarize(&dir, a, started.elapsed())
}

fn summarize(dir: &Path, a: &Args, took: Duration) -> anyhow::Result<()> {
    let s = NativeSpaces::open_with(dir, Default::default(), false)?;
    let lock = SegLock::open(&s.registry().lock_path("stress"))?;
    let before = lock.state();
    // Every worker is dead: one exclusive acquire must succeed now, clearing any hold.
    let me = Holder::me();
    let dead = lock
        .try_acquire(me, true)?
        .context("a lock held only by dead processes was not recovered by the next acquire")?;
    lock.release(me, true)?;
    let after = lock.state();
    let r = check(s.registry(), false)?;
    println!(
        "vas stress: {} kills of {} workers in {:.1} s; {} lock acquisitions, {} dead holders recovered by later acquirers, {} cleared by the final acquire (held at the end: writer {:?}, {} readers); 0 violations",
        a.kills,
        a.workers,
        took.as_secs_f64(),
        after.acquisitions,
        before.recoveries,
        dead.len(),
        before.writer.map(|h| h.pid),
        before.readers.len()
    );
    println!(
        "registry check: {} VASes, {} segments, {} problems, {} dead holders",
        r.vases,
        r.segments,
        r.problems.len(),
        r.dead_holders.len()
    );
    if !r.clean(false) || after.writer.is_some() || !after.readers.is_empty() {
        bail!("the registry or the lock is inconsistent after the kill test: {r:?}");
    }
    Ok(())
}

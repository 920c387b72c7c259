//! Running a personality: its flowops, iteration after iteration, on one thread or on
//! several sharing one fileset.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex, OnceLock};
use std::time::Instant;

use pmlab_fs::Result;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::Flowop::*;
use super::fileset::Picker;
use super::{Counts, Fileset, Params, Personality, SIZE_GAMMA_SHAPE, gamma};

/// What a personality runs against: FileBench's flowops on the open file in slot 1.
/// One per thread; each thread's has a file system client (or descriptor table) of its
/// own, as FileBench's threads have.
pub trait Target {
    /// Name for tables.
    fn name(&self) -> String;
    /// Creates the fileset's directories and preallocated files (untimed), and opens
    /// the log file (webserver) for this target's thread.
    fn populate(&mut self, set: &Fileset, log: Option<(&str, u64)>) -> Result<()>;
    /// Opens the log file (webserver) for this target's thread, once another target
    /// populated the fileset (untimed). Nothing else to do by default.
    fn attach(&mut self, _log: Option<&str>) -> Result<()> {
        Ok(())
    }
    /// `createfile` of file `k`.
    fn create(&mut self, set: &Fileset, k: usize) -> Result<()>;
    /// `writewholefile`: `size` bytes in `iosize` pieces to the open file.
    fn write_whole(&mut self, size: u64, iosize: u64) -> Result<()>;
    /// `appendfilerand`: `n` bytes at the end of the open file.
    fn append(&mut self, n: u64) -> Result<()>;
    /// `closefile`.
    fn close(&mut self) -> Result<()>;
    /// `openfile` of file `k`.
    fn open(&mut self, set: &Fileset, k: usize) -> Result<()>;
    /// `readwholefile` of the open file in `iosize` pieces.
    fn read_whole(&mut self, iosize: u64) -> Result<()>;
    /// `deletefile` of file `k`.
    fn delete(&mut self, set: &Fileset, k: usize) -> Result<()>;
    /// `statfile` of file `k`.
    fn stat(&mut self, set: &Fileset, k: usize) -> Result<()>;
    /// `fsync` of the open file.
    fn fsync(&mut self) -> Result<()>;
    /// `appendfilerand` of `n` bytes to the log file.
    fn append_log(&mut self, n: u64) -> Result<()>;
    /// Ships batched work after the timed loop (counted in the last iteration).
    fn finish(&mut self) -> Result<()>;
    /// Lease revocations this target's client answered so far (`None`: no leases).
    fn revocations(&self) -> Option<u64> {
        None
    }
}

/// The measurement of one personality on one set of targets.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Mean microseconds per iteration, as each thread saw its own iterations.
    pub us_per_iteration: f64,
    /// Threads that ran the iterations.
    pub threads: usize,
    /// Iterations completed per second of wall-clock time, all threads together.
    pub iterations_per_s: f64,
    /// Flowops executed.
    pub counts: Counts,
    /// Flowops skipped because the fileset had no file to pick.
    pub skipped: u64,
    /// Lease revocations the threads' clients answered during the iterations (`None`:
    /// a file system without leases).
    pub revocations: Option<u64>,
}

/// Path of webserver's log file (the one-file `logfiles` fileset).
pub const LOG_PATH: &str = "/fb/log";

/// What one thread did: seconds spent in its iterations, and its flowops.
struct Share {
    secs: f64,
    /// When the thread left the barrier, and when it finished.
    span: (Instant, Instant),
    counts: Counts,
    skipped: u64,
}

/// Runs `p.iterations` iterations of `personality`, after populating a fresh fileset
/// under `/fb` through the first target, shared among the targets, one thread each.
/// `cap` bounds file sizes (0: none).
///
/// The threads start together (a barrier; every thread's time counts from the moment
/// the first one leaves it) and take iterations from one pool until it is empty, so
/// every thread is in the run from its start to its end, as FileBench's threads all
/// run for its whole timed run: each thread's time then counts the time it waited for
/// the others, on every system alike. (With a fixed share per thread, each timed from
/// when it first ran, a file system whose calls never block lets each thread run its
/// share within one scheduler time slice and end before the next one starts, so its
/// latency would be that of one thread alone, while one whose threads block would show
/// the latency of N threads sharing the cores: the ratio would compare unlike things.)
///
/// The fileset and the first thread's picks come from `seed`, so one thread runs the
/// same iterations on every system; further threads draw from seeds of their own, and
/// which thread picks what, and how many iterations each runs, then depends on how
/// they interleave.
pub fn run(
    personality: Personality,
    p: &Params,
    cap: u64,
    seed: u64,
    targets: &mut [&mut (dyn Target + Send)],
) -> Result<Run> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let set = Fileset::new("/fb", p, cap, &mut rng);
    let log = (personality == Personality::Webserver).then(|| {
        let s = gamma(
            &mut rng,
            SIZE_GAMMA_SHAPE,
            p.meanfilesize as f64 / SIZE_GAMMA_SHAPE,
        );
        (LOG_PATH, s as u64)
    });
    let n = targets.len().max(1);
    let (first, rest) = targets
        .split_first_mut()
        .ok_or_else(|| pmlab_fs::FsError::BadHandle("no target to run on".into()))?;
    first.populate(&set, log)?;
    for t in rest.iter_mut() {
        t.attach(log.map(|l| l.0))?;
    }
    let shared = Shared {
        personality,
        p,
        set: &set,
        picker: Mutex::new(Picker::new(&set)),
        pool: AtomicUsize::new(p.iterations),
        start: Barrier::new(n),
        began: OnceLock::new(),
    };
    let revoked_before = revocations(targets);
    let shares = run_threads(&shared, &rng, seed, targets);
    crate::aerie::perfctl::timed_phase_ends();
    let revocations = revocations(targets)
        .zip(revoked_before)
        .map(|(after, before)| after - before);
    let mut counts = Counts::default();
    let (mut secs, mut skipped) = (0.0, 0);
    let (mut began, mut ended) = (None::<Instant>, None::<Instant>);
    for s in shares {
        let s = s?;
        secs += s.secs;
        counts.merge(&s.counts);
        skipped += s.skipped;
        began = Some(began.map_or(s.span.0, |b| b.min(s.span.0)));
        ended = Some(ended.map_or(s.span.1, |e| e.max(s.span.1)));
    }
    let wall = match (began, ended) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    let iters = p.iterations.max(1) as f64;
    Ok(Run {
        us_per_iteration: secs * 1e6 / iters,
        threads: n,
        iterations_per_s: iters / wall,
        counts,
        skipped,
        revocations,
    })
}

/// Runs one thread per target over `shared`; the first draws from `rng` (the one-thread
/// run's picks), the others from seeds of their own derived from `seed`.
fn run_threads(
    shared: &Shared<'_>,
    rng: &Xoshiro256PlusPlus,
    seed: u64,
    targets: &mut [&mut (dyn Target + Send)],
) -> Vec<Result<Share>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter_mut()
            .enumerate()
            .map(|(i, t)| {
                let rng = if i == 0 {
                    rng.clone()
                } else {
                    Xoshiro256PlusPlus::seed_from_u64(
                        seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    )
                };
                scope.spawn(move || thread_run(shared, rng, &mut **t))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a benchmark thread panicked"))
            .collect()
    })
}

/// Revocations answered so far by all the targets' clients together.
fn revocations(targets: &[&mut (dyn Target + Send)]) -> Option<u64> {
    targets.iter().map(|t| t.revocations()).sum()
}

/// What the threads of one run share: the fileset, its picker, the iterations not yet
/// taken, and the barrier they start at.
struct Shared<'a> {
    personality: Personality,
    p: &'a Params,
    set: &'a Fileset,
    picker: Mutex<Picker>,
    pool: AtomicUsize,
    start: Barrier,
    /// When the first thread left the barrier.
    began: OnceLock<Instant>,
}

impl Shared<'_> {
    /// Takes one iteration from the pool; false once it is empty.
    fn take(&self) -> bool {
        self.pool
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| k.checked_sub(1))
            .is_ok()
    }
}

/// One thread's iterations, taken from the pool until it is empty: timed from the
/// barrier all threads start at to the end of its target's `finish` (which ships what
/// the target batched).
fn thread_run(
    sh: &Shared<'_>,
    mut rng: Xoshiro256PlusPlus,
    t: &mut (dyn Target + Send),
) -> Result<Share> {
    let mut counts = Counts::default();
    let mut skipped = 0;
    let mut current: Option<usize> = None;
    sh.start.wait();
    // The run starts when the first thread leaves the barrier, for every thread: one
    // the scheduler runs only later has waited for the others meanwhile.
    let start = *sh.began.get_or_init(|| {
        crate::aerie::perfctl::timed_phase_begins();
        Instant::now()
    });
    while sh.take() {
        for &op in sh.personality.flowops() {
            if flowop(op, sh.p, sh.set, &sh.picker, &mut rng, t, &mut current)? {
                counts.add(op);
            } else {
                skipped += 1;
            }
        }
    }
    if let Some(k) = current.take() {
        sh.picker.lock().expect("picker").release(k);
    }
    t.finish()?;
    let end = Instant::now();
    Ok(Share {
        secs: (end - start).as_secs_f64(),
        span: (start, end),
        counts,
        skipped,
    })
}

/// Runs one flowop; false if it had no file to act on (FileBench skips it then).
fn flowop(
    op: super::Flowop,
    p: &Params,
    set: &Fileset,
    picker: &Mutex<Picker>,
    rng: &mut Xoshiro256PlusPlus,
    t: &mut (dyn Target + Send),
    current: &mut Option<usize>,
) -> Result<bool> {
    let pick = |existing: bool, rng: &mut Xoshiro256PlusPlus| {
        picker.lock().expect("picker").pick(existing, rng)
    };
    let done = |k: usize, moved: Option<bool>| {
        let mut g = picker.lock().expect("picker");
        if let Some(to) = moved {
            g.moved(k, to);
        }
        g.release(k);
    };
    match op {
        CreateFile | OpenFile => {
            let Some(k) = pick(op == OpenFile, rng) else {
                return Ok(false);
            };
            if let Some(old) = current.take() {
                done(old, None);
            }
            if op == CreateFile {
                t.create(set, k)?;
                picker.lock().expect("picker").moved(k, true);
            } else {
                t.open(set, k)?;
            }
            *current = Some(k);
        }
        DeleteFile | StatFile => {
            let Some(k) = pick(true, rng) else {
                return Ok(false);
            };
            if op == DeleteFile {
                t.delete(set, k)?;
                done(k, Some(false));
            } else {
                let r = t.stat(set, k);
                done(k, None);
                r?;
            }
        }
        WriteWholeFile | AppendFileRand | CloseFile | ReadWholeFile | Fsync => {
            let Some(k) = *current else {
                return Ok(false);
            };
            match op {
                WriteWholeFile => t.write_whole(set.sizes[k], p.iosize)?,
                AppendFileRand => t.append(rng.gen_range(1..=p.appendsize.max(1)))?,
                ReadWholeFile => t.read_whole(p.iosize)?,
                Fsync => t.fsync()?,
                _ => {
                    t.close()?;
                    *current = None;
                    done(k, None);
                }
            }
        }
        AppendLog => t.append_log(rng.gen_range(1..=p.appendsize.max(1)))?,
    }
    Ok(true)
}

//! Running a personality: its flowops, iteration after iteration, on one thread or on
//! several sharing one fileset.

use std::sync::Mutex;
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
    counts: Counts,
    skipped: u64,
}

/// Runs `p.iterations` iterations of `personality`, after populating a fresh fileset
/// under `/fb` through the first target, split among the targets, one thread each
/// (their counts of iterations differ by one at most). `cap` bounds file sizes (0: none).
///
/// The fileset and the first thread's picks come from `seed`, so one thread runs the
/// same iterations on every system; further threads draw from seeds of their own, and
/// which thread picks what then depends on how they interleave.
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
    let picker = Mutex::new(Picker::new(&set));
    let revoked_before = revocations(targets);
    let start = Instant::now();
    let shares: Vec<Result<Share>> = std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter_mut()
            .enumerate()
            .map(|(i, t)| {
                let iters = p.iterations / n + usize::from(i < p.iterations % n);
                let rng = if i == 0 {
                    rng.clone()
                } else {
                    Xoshiro256PlusPlus::seed_from_u64(
                        seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    )
                };
                let (set, picker) = (&set, &picker);
                scope.spawn(move || thread_run(personality, p, set, picker, rng, &mut **t, iters))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a benchmark thread panicked"))
            .collect()
    });
    let wall = start.elapsed().as_secs_f64();
    let revocations = revocations(targets)
        .zip(revoked_before)
        .map(|(after, before)| after - before);
    let mut counts = Counts::default();
    let (mut secs, mut skipped) = (0.0, 0);
    for s in shares {
        let s = s?;
        secs += s.secs;
        counts.merge(&s.counts);
        skipped += s.skipped;
    }
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

/// Revocations answered so far by all the targets' clients together.
fn revocations(targets: &[&mut (dyn Target + Send)]) -> Option<u64> {
    targets.iter().map(|t| t.revocations()).sum()
}

/// One thread's iterations: timed from its first flowop to the end of its target's
/// `finish` (which ships what the target batched).
fn thread_run(
    personality: Personality,
    p: &Params,
    set: &Fileset,
    picker: &Mutex<Picker>,
    mut rng: Xoshiro256PlusPlus,
    t: &mut (dyn Target + Send),
    iterations: usize,
) -> Result<Share> {
    let mut counts = Counts::default();
    let mut skipped = 0;
    let mut current: Option<usize> = None;
    let start = Instant::now();
    for _ in 0..iterations {
        for &op in personality.flowops() {
            if flowop(op, p, set, picker, &mut rng, t, &mut current)? {
                counts.add(op);
            } else {
                skipped += 1;
            }
        }
    }
    if let Some(k) = current.take() {
        picker.lock().expect("picker").release(k);
    }
    t.finish()?;
    Ok(Share {
        secs: start.elapsed().as_secs_f64(),
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

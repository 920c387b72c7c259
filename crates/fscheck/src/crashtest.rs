//! Crash testing the service's journal and apply path on the machine model.
//!
//! A volume is built (`mkfs`) in the memory of a [`Machine`] with one write-back cache
//! (a few lines that evict early and often, or enough to hold a whole commit) and
//! chaos write-backs of random dirty lines between operations. A
//! seeded workload ([`workload::Workload`], xoshiro256++) draws batches of valid metadata
//! operations; each batch goes the service's way — encoded as a journal, decoded,
//! validated and applied ([`pmlab_fs::apply::apply_batch`]), committed through the redo log
//! ([`pmlab_fs::redo::MetaLog::commit`], pmlab-tx's two-fence redo transaction) — while
//! the machine records every change of its
//! durable state. A batch whose commit returned is acknowledged, as the service's reply
//! to an fsync is.
//!
//! Each recording is then explored: at every boundary where the durable state changed
//! (every eviction, every issued write-back, every fence), the durable image, plus
//! random subsets of the write-backs still pending there, is crashed, recovered
//! ([`pmlab_fs::redo::recover_with`]), checked with [`pmlab_fs::fsck::fsck`] (no error
//! allowed) and held against the oracle: its namespace and attributes must equal the
//! state before the batch or the state after it, never a mixture, and after the commit
//! returned only the state after. Since each batch starts from a durable state holding
//! every earlier acknowledged batch, this is "a prefix of the batches that includes every
//! acknowledged one". Identical images (the same crash image recurs at many points) are
//! judged once. Some images whose recovery replays the log are booted on a machine of
//! their own and that recovery is explored the same way: a crash while recovering must
//! recover again to the same state.
//!
//! A broken [`FaultPlan`] (one of [`pmlab_fs::redo::FAULTS`], pmlab-tx's redo faults) must
//! make the exploration fail: that is the evidence that it would catch a real bug.
//! `skip-apply-fence` only shows once a later batch's log overwrites the one that
//! still vouches for the unfenced pages, so a run needs at least two batches.

pub mod oracle;
pub mod snapshot;
pub mod workload;

use pmlab_model::{
    ChaosConfig, CrashImage, ExploreOptions, Granularity, Machine, MachineConfig, PendingChoice,
    PointKind, Recording,
};
use pmlab_spine::Memory;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use thiserror::Error;

use oracle::{Oracle, Recovered};
use pmlab_fs::apply::{AllRights, apply_batch, domain_for};
use pmlab_fs::domain::Domain;
use pmlab_fs::error::FsError;
use pmlab_fs::journal::{decode_batch, encode_batch};
use pmlab_fs::layout::{Params, Superblock};
use pmlab_fs::mkfs::{RootOwner, mkfs_at};
use pmlab_fs::redo::{self, FaultPlan, MetaLog};
use snapshot::{ImageRead, first_difference};
use workload::{DIR_MODE, FILE_MODES, OP_NAMES, Workload};

/// How a crash test runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Seed of the workload, the cache's replacement, chaos write-backs and the
    /// pending-subset draws (each its own xoshiro256++ stream derived from it).
    pub seed: u64,
    /// Batches to commit and explore.
    pub batches: usize,
    /// Most operations per batch (a write counts as two: map pages, set size).
    pub max_ops: usize,
    /// Lines of the machine's only cache (a power of two). A few lines evict early and
    /// often; a cache that holds a whole commit leaves the order of write-backs to the
    /// fences, the chaos write-backs and the pending subsets tried at each crash point.
    /// (A tiny cache writes a page back line by line as it is written, which can hide a
    /// missing fence: the commit header is durable by eviction long before it is fenced.)
    pub cache_lines: u64,
    /// Probability of a chaos write-back of a random dirty line before each operation
    /// (`None`: write-backs happen only by eviction, flush and fence).
    pub chaos: Option<f64>,
    /// Which boundaries are crash points.
    pub granularity: Granularity,
    /// Random subsets of the pending write-backs tried at each crash point, besides none.
    pub pending_samples: u32,
    /// Check every `stride`-th crash point only (1: all of them).
    pub stride: usize,
    /// The commit protocol (correct, or with one deliberate bug, see
    /// [`pmlab_fs::redo::FAULTS`]).
    pub faults: FaultPlan,
    /// Stop exploring after this many failures.
    pub max_failures: usize,
    /// Per batch, how many crash images whose recovery replays the log are booted on a
    /// machine of their own, with that recovery explored crash point by crash point.
    pub recovery_crashes: usize,
}

impl Config {
    /// The CI-sized run: sixteen batches, every crash point, two random subsets of the
    /// pending write-backs at each, one recovery per batch crashed in turn.
    pub fn small(seed: u64) -> Config {
        Config {
            seed,
            batches: 16,
            max_ops: 4,
            cache_lines: 1024,
            chaos: Some(0.05),
            granularity: Granularity::EveryOp,
            pending_samples: 2,
            stride: 1,
            faults: FaultPlan::CORRECT,
            max_failures: 8,
            recovery_crashes: 1,
        }
    }

    /// A longer run: more and bigger batches, more pending subsets per crash point,
    /// more recoveries crashed in turn.
    pub fn large(seed: u64) -> Config {
        Config {
            batches: 100,
            max_ops: 6,
            pending_samples: 4,
            recovery_crashes: 2,
            ..Config::small(seed)
        }
    }
}

/// The geometry of the crash-test volume: small, so that each crash image is cheap to
/// recover and check, yet with room for the workload's namespace.
pub fn volume_params() -> Params {
    Params {
        meta_pages: 128,
        inodes: 62,
        log_pages: 40,
        max_domains: 2,
        domain_pages: 256,
        kv_object_pages: 4,
        volume_id: 0xc4a5_4e57,
    }
}

/// A crash image the oracle rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The batch being committed (0 is the first).
    pub batch: usize,
    /// Boundary of the recording (see `pmlab_model::CrashImage::boundary`).
    pub boundary: usize,
    /// What ended at that boundary.
    pub kind: PointKind,
    /// The pending write-backs the image included.
    pub applied: Vec<usize>,
    /// What was wrong.
    pub message: String,
}

impl Failure {
    fn of(batch: usize, f: pmlab_model::CrashFailure, context: &str) -> Failure {
        Failure {
            batch,
            boundary: f.boundary,
            kind: f.kind,
            applied: f.applied,
            message: format!("{context}{}", f.message),
        }
    }
}

/// What a crash test explored and found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Batches committed and acknowledged.
    pub batches: usize,
    /// Operations in them.
    pub ops: usize,
    /// Operations by kind, in the order of [`workload::OP_NAMES`].
    pub ops_by_kind: [usize; OP_NAMES.len()],
    /// Metadata pages the batches committed, summed.
    pub pages_committed: usize,
    /// Crash points explored.
    pub points: usize,
    /// Crash images handed to the oracle.
    pub images: usize,
    /// Distinct images among them (each recovered, fsck'd and compared once).
    pub distinct_images: usize,
    /// Distinct images that recovered to the state before their batch.
    pub recovered_before: usize,
    /// Distinct images that recovered to the state after their batch.
    pub recovered_after: usize,
    /// Crash points explored in recoveries (see [`Config::recovery_crashes`]).
    pub recovery_points: usize,
    /// Crash images of those recoveries handed to the oracle.
    pub recovery_images: usize,
    /// Fences of the batches' commits, summed (2 per commit).
    pub commit_fences: u64,
    /// Cache lines flushed by the batches' commits, summed.
    pub commit_flushes: u64,
    /// Rejected images (up to the configured limit).
    pub failures: Vec<Failure>,
}

impl Report {
    /// Whether every image passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} batches ({} operations, {} metadata pages committed)",
            self.batches, self.ops, self.pages_committed
        )?;
        let kinds: Vec<String> = OP_NAMES
            .iter()
            .zip(self.ops_by_kind)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        writeln!(f, "operations: {}", kinds.join(", "))?;
        if self.batches > 0 {
            let per = |x: u64| x as f64 / self.batches as f64;
            writeln!(
                f,
                "per commit: {:.1} fences, {:.1} lines flushed ({} fences, {} flushes in all)",
                per(self.commit_fences),
                per(self.commit_flushes),
                self.commit_fences,
                self.commit_flushes
            )?;
        }
        writeln!(
            f,
            "{} crash points, {} crash images, {} distinct ({} recovered to the state before their batch, {} after)",
            self.points,
            self.images,
            self.distinct_images,
            self.recovered_before,
            self.recovered_after
        )?;
        writeln!(
            f,
            "recoveries crashed in turn: {} crash points, {} crash images",
            self.recovery_points, self.recovery_images
        )?;
        if self.failures.is_empty() {
            return write!(f, "no failures");
        }
        writeln!(f, "{} failures; first:", self.failures.len())?;
        let x = &self.failures[0];
        write!(
            f,
            "batch {}, boundary {} ({:?}), {} pending write-backs applied: {}",
            x.batch,
            x.boundary,
            x.kind,
            x.applied.len(),
            x.message
        )
    }
}

/// Why a crash test could not run (as opposed to a crash image failing the oracle).
#[derive(Debug, Error)]
pub enum CrashTestError {
    /// The machine configuration is unusable.
    #[error("machine model: {0}")]
    Machine(#[from] pmlab_model::ConfigError),
    /// Building the volume or reading it failed.
    #[error("file system: {0}")]
    Fs(#[from] FsError),
    /// A recording reached the machine's limit, so it could not be explored whole.
    #[error("{0}")]
    Recording(#[from] pmlab_model::RecordingOverflow),
    /// The service refused a batch the workload drew as valid (a workload or service bug).
    #[error("seed {seed}, batch {batch}: the service refused the batch: {why}")]
    Refused {
        /// The run's seed.
        seed: u64,
        /// The batch.
        batch: usize,
        /// The service's reason.
        why: String,
    },
    /// After a commit the volume differs from the workload's model.
    #[error(
        "seed {seed}, batch {batch}: after the commit the volume differs from the model: {diff}"
    )]
    Diverged {
        /// The run's seed.
        seed: u64,
        /// The batch.
        batch: usize,
        /// The first difference.
        diff: String,
    },
}

/// Derives independent seeds from the run's seed (SplitMix64's increment).
fn sub_seed(seed: u64, stream: u64) -> u64 {
    seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn machine_config(cfg: &Config) -> MachineConfig {
    let size = volume_params().meta_pages * pmlab_fs::media::PAGE;
    let mut c = MachineConfig::tiny(size, cfg.cache_lines);
    c.cache_seed = sub_seed(cfg.seed, 1);
    c.chaos = cfg.chaos.map(|probability| ChaosConfig {
        seed: sub_seed(cfg.seed, 2),
        probability,
    });
    c
}

/// What one served batch changed and cost.
struct Served {
    pages: usize,
    fences: u64,
    flushes: u64,
}

/// One batch the service's way: journal bytes decoded, validated and applied, committed.
fn serve(
    m: &mut Machine,
    sb: Superblock,
    log: &mut MetaLog,
    journal: &[u8],
) -> Result<Served, String> {
    let ops = decode_batch(journal).map_err(|e| format!("malformed journal: {e}"))?;
    let out = apply_batch(m, sb, &AllRights, &ops).map_err(|r| format!("batch rejected: {r}"))?;
    let before = m.persist_counters();
    log.commit(m, &out.changes).map_err(|e| e.to_string())?;
    let after = m.persist_counters();
    Ok(Served {
        pages: out.changes.len(),
        fences: after.fences - before.fences,
        flushes: after.flushes - before.flushes,
    })
}

/// Builds the volume on a fresh machine: mkfs, then one permission domain per file
/// mode (the service adds domains in transactions of their own, as here). Returns the
/// log handle the batches commit through, running `cfg.faults`.
fn build(cfg: &Config) -> Result<(Machine, Superblock, [u16; 2], MetaLog), CrashTestError> {
    let mut m = Machine::new(machine_config(cfg))?;
    let owner = RootOwner {
        uid: 0,
        gid: 0,
        mode: DIR_MODE,
    };
    // A fixed time: the crash images are then a function of the seed.
    let sb = mkfs_at(&mut m, &volume_params(), owner, 0)?;
    let (mut log, _) = MetaLog::open_with(&mut m, &sb, cfg.faults)?;
    let mut domains = [0u16; 2];
    for (slot, mode) in domains.iter_mut().zip(FILE_MODES) {
        let d = Domain {
            uid: 0,
            gid: 0,
            mode,
        };
        let (id, _, changes) = domain_for(&mut m, sb, d)?;
        log.commit(&mut m, &changes)?;
        *slot = id;
    }
    m.persist_all();
    Ok((m, sb, domains, log))
}

/// Explores a crash during the recovery of `image` (whose log holds a committed
/// transaction of batch `batch`): the machine boots with the image, recovery runs while
/// recorded, and every crash image of that run must recover again to `want`. Returns
/// the crash points and images explored, and the failures.
fn explore_recovery(
    cfg: &Config,
    opts: &ExploreOptions,
    oracle: &mut Oracle<'_>,
    batch: usize,
    image: Vec<u8>,
    want: Recovered,
) -> Result<(usize, usize, Vec<Failure>), CrashTestError> {
    let mut m = Machine::with_image(machine_config(cfg), image)?;
    let faults = cfg.faults;
    let (res, rec) = m.record(|m| -> pmlab_fs::Result<()> {
        let sb = Superblock::read(m)?;
        redo::recover_with(m, &sb, faults)?;
        Ok(())
    });
    res?;
    if let Some(o) = rec.overflow() {
        return Err(o.into());
    }
    let explored = rec.explore(opts, |c| match oracle.judge(c.bytes)?.state {
        s if s == want => Ok(()),
        s => Err(format!(
            "a crash while recovering a committed batch (which recovered to {want:?}) recovers to {s:?}"
        )),
    });
    let failures = explored
        .failures
        .into_iter()
        .map(|f| Failure::of(batch, f, "during recovery: "))
        .collect();
    Ok((explored.points, explored.images, failures))
}

/// A volume image after `batches` seeded batches of the crash test's workload, all
/// committed and durable: a realistic metadata space (directories, files with mapped
/// pages, KVFS objects, links, a used redo log) for tests that damage volumes.
pub fn populated_image(seed: u64, batches: usize) -> Result<Vec<u8>, CrashTestError> {
    let cfg = Config::small(seed);
    let (mut m, sb, domains, mut log) = build(&cfg)?;
    let mut workload = Workload::new(sb.inode_count, sb.domain_pages, sb.kv_object_pages, domains);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(sub_seed(seed, 3));
    for batch in 0..batches {
        let (ops, _) = workload.batch(&mut rng, cfg.max_ops);
        serve(&mut m, sb, &mut log, &encode_batch(&ops))
            .map_err(|why| CrashTestError::Refused { seed, batch, why })?;
    }
    m.persist_all();
    Ok(m.crash())
}

/// Runs a crash test: builds the volume, commits `cfg.batches` seeded batches and
/// explores every crash point of each (and of the recovery of some of their images).
pub fn run(cfg: &Config) -> Result<Report, CrashTestError> {
    let (mut m, sb, domains, mut log) = build(cfg)?;
    let mut workload = Workload::new(sb.inode_count, sb.domain_pages, sb.kv_object_pages, domains);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(sub_seed(cfg.seed, 3));
    let opts = ExploreOptions {
        granularity: cfg.granularity,
        pending: PendingChoice::Random {
            samples: cfg.pending_samples,
            seed: sub_seed(cfg.seed, 4),
        },
        skip_unchanged: true,
        max_failures: cfg.max_failures,
        stride: cfg.stride,
    };
    let mut report = Report::default();
    let mut before = workload.snapshot();
    for batch in 0..cfg.batches {
        let (ops, kinds) = workload.batch(&mut rng, cfg.max_ops);
        let after = workload.snapshot();
        let journal = encode_batch(&ops);
        let (served, rec) = m.record(|m| serve(m, sb, &mut log, &journal));
        let served = served.map_err(|why| CrashTestError::Refused {
            seed: cfg.seed,
            batch,
            why,
        })?;
        let live = snapshot::read(&mut ImageRead(m.current_image()))?;
        if let Some(diff) = first_difference(&live, &after) {
            return Err(CrashTestError::Diverged {
                seed: cfg.seed,
                batch,
                diff,
            });
        }
        report.batches += 1;
        report.ops += ops.len();
        report.pages_committed += served.pages;
        report.commit_fences += served.fences;
        report.commit_flushes += served.flushes;
        for k in kinds {
            report.ops_by_kind[k] += 1;
        }
        let mut oracle = Oracle::new(cfg.faults, &before, &after);
        explore_batch(cfg, &opts, &mut oracle, batch, &rec, &mut report)?;
        if report.failures.len() >= cfg.max_failures {
            break;
        }
        before = after;
    }
    Ok(report)
}

/// Every crash point of one batch's recorded commit, judged by `oracle`, then the
/// recoveries of up to `cfg.recovery_crashes` of its images that replay the log.
fn explore_batch(
    cfg: &Config,
    opts: &ExploreOptions,
    oracle: &mut Oracle<'_>,
    batch: usize,
    rec: &Recording,
    report: &mut Report,
) -> Result<(), CrashTestError> {
    // Images whose recovery replays the log, to crash that recovery in turn.
    let mut replays: Vec<(Vec<u8>, Recovered)> = Vec::new();
    if let Some(o) = rec.overflow() {
        return Err(o.into());
    }
    let explored = rec.explore(opts, |c: &CrashImage<'_>| {
        let v = oracle.judge(c.bytes)?;
        if v.replayed && replays.len() < cfg.recovery_crashes {
            replays.push((c.bytes.to_vec(), v.state));
        }
        // The commit returned at the end of the recording: the batch is acknowledged.
        if c.kind == PointKind::End && v.state != Recovered::After {
            return Err("the commit returned (the batch was acknowledged) but the crash image recovers to the state before it".into());
        }
        Ok(())
    });
    report.points += explored.points;
    report.images += explored.images;
    let mut failures: Vec<Failure> = explored
        .failures
        .into_iter()
        .map(|f| Failure::of(batch, f, ""))
        .collect();
    for (image, want) in replays {
        let (points, images, more) = explore_recovery(cfg, opts, oracle, batch, image, want)?;
        report.recovery_points += points;
        report.recovery_images += images;
        failures.extend(more);
    }
    let (distinct, b, a) = oracle.counts();
    report.distinct_images += distinct;
    report.recovered_before += b;
    report.recovered_after += a;
    report.failures.extend(failures);
    Ok(())
}

//! Crash exploration of a workload under a transaction protocol on the machine model:
//! `pmlab tx crashtest`.
//!
//! A pool (header, the protocol's log, the workload's data area) is made in the
//! memory of a [`Machine`] with a tiny write-back cache (a few lines, so evictions
//! reorder what reaches memory) and chaos write-backs of random dirty lines. Then
//! each transaction of a seeded operation stream is recorded
//! ([`pmlab_model::Recording`], the one crash explorer of pmlab) and every crash point
//! of the recording — every operation boundary where the durable state changed, with
//! every subset of the write-backs still pending there — yields a crash image. Each
//! image is recovered by the protocol, its workload is opened and checked (the
//! workload's invariant checker), and what it holds must be what a prefix of the
//! committed transactions left that contains every acknowledged one (the oracle: the
//! contents after each transaction are kept). At the recording's end — the commit has
//! returned — only the acknowledged states remain allowed.
//!
//! Recovery is crash-tested too: for a few images per transaction, evenly spread over
//! those whose recovery had work to do, recovery itself is recorded on a machine
//! holding the image, followed by the next transaction, and both recordings are
//! explored the same way: a crash during recovery must recover to the same state, and
//! a crash during the next transaction to its before or after.

use pmlab_model::{
    ChaosConfig, CrashImage, ExploreOptions, Granularity, Machine, MachineConfig, PendingChoice,
    PointKind, Recording,
};
use pmlab_tx::{PoolLayout, Protocol, TxError};
use pmlab_workloads::{Contents, Kind, Ops, Params, Workload, WorkloadError};

use crate::proto::Harness;

/// What to explore.
#[derive(Clone, Debug)]
pub struct Config {
    /// The workload.
    pub workload: Kind,
    /// Its size and operation mix.
    pub params: Params,
    /// Transactions recorded and explored (after the workload is made).
    pub txs: u64,
    /// Seed of the operation stream, the chaos write-backs and the pending subsets.
    pub seed: u64,
    /// Lines of the machine's one cache (a power of two).
    pub cache_lines: u64,
    /// Probability of a chaos write-back of a random dirty line before an operation.
    pub chaos: f64,
    /// Bytes of the protocol's log.
    pub log_len: u64,
    /// Which crash points and pending subsets.
    pub explore: ExploreOptions,
    /// Crash images per transaction whose recovery (and the next transaction) is
    /// itself recorded and explored.
    pub recovery_samples: usize,
}

impl Config {
    /// The CI-sized exploration of `kind`: a small structure, a few dozen
    /// transactions, every crash point, every pending subset up to 8.
    pub fn small(kind: Kind, seed: u64) -> Config {
        let elements = match kind {
            Kind::BpTree => 260,
            Kind::Db => 48,
            Kind::Sps => 64,
            _ => 40,
        };
        let txs = match kind {
            Kind::BpTree | Kind::Db => 12,
            _ => 30,
        };
        Config {
            workload: kind,
            params: Params {
                elements,
                dist: pmlab_workloads::Dist::Uniform,
                ops_per_tx: kind.default_ops_per_tx(),
            },
            txs,
            seed,
            cache_lines: 8,
            chaos: 0.05,
            log_len: 64 * 1024,
            explore: ExploreOptions {
                granularity: Granularity::EveryOp,
                pending: PendingChoice::Exhaustive { max_pending: 8 },
                skip_unchanged: true,
                max_failures: 4,
                stride: 1,
            },
            recovery_samples: 2,
        }
    }

    fn machine(&self, size: u64, salt: u64) -> MachineConfig {
        let mut c = MachineConfig::tiny(size, self.cache_lines);
        c.chaos = Some(ChaosConfig {
            seed: self.seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            probability: self.chaos,
        });
        c
    }
}

/// Which run a crash image came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// A transaction of the workload.
    Transaction,
    /// Recovery from an earlier crash image.
    Recovery,
    /// The transaction after such a recovery.
    AfterRecovery,
}

impl Stage {
    /// A name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Transaction => "transaction",
            Stage::Recovery => "recovery",
            Stage::AfterRecovery => "after-recovery",
        }
    }
}

/// A crash image that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The transaction (0-based) being recorded, or whose image was recovered.
    pub tx: u64,
    /// Which run.
    pub stage: Stage,
    /// The boundary of the recording.
    pub boundary: usize,
    /// What was wrong.
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "transaction {} ({}), boundary {}: {}",
            self.tx,
            self.stage.name(),
            self.boundary,
            self.message
        )
    }
}

/// The figures of an exploration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Transactions explored.
    pub txs: u64,
    /// Crash points of the transactions' recordings.
    pub points: u64,
    /// Crash images of those points.
    pub images: u64,
    /// Points with more pending write-backs than were enumerated.
    pub truncated_points: u64,
    /// Recoveries recorded and explored.
    pub recoveries: u64,
    /// Crash images of the recoveries and the transactions after them.
    pub recovery_images: u64,
    /// Every image that failed.
    pub failing_images: u64,
    /// The first failures (up to the options' `max_failures` per recording).
    pub failures: Vec<Failure>,
}

impl Report {
    /// Whether every image passed.
    pub fn passed(&self) -> bool {
        self.failing_images == 0
    }
}

/// Why an exploration could not run (not a crash image that failed: that is in the
/// report).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The machine configuration.
    #[error(transparent)]
    Machine(#[from] pmlab_model::ConfigError),
    /// The protocol.
    #[error(transparent)]
    Tx(#[from] TxError),
    /// The workload.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The live run's own state failed its checker (the protocol broke it without a
    /// crash).
    #[error("the live structure after transaction {tx}: {message}")]
    Live {
        /// The transaction.
        tx: u64,
        /// The checker's message.
        message: String,
    },
}

/// The states a crash image may hold: the contents after each prefix of the
/// workload's transactions, and which prefixes each point allows.
struct Oracle {
    /// `history[k]`: the contents after `k` transactions.
    history: Vec<Contents>,
}

impl Oracle {
    fn allows(&self, got: &Contents, from: usize, to: usize) -> bool {
        self.history[from..=to].contains(got)
    }
}

/// Recovers an image, opens and checks its workload; the recovered contents and
/// whether recovery changed anything.
fn recover_image<H: Harness>(
    h: &H,
    layout: &PoolLayout,
    kind: Kind,
    bytes: &[u8],
) -> Result<(Contents, bool), String> {
    let mut p = h
        .attach_image(bytes, layout.log, layout.data)
        .map_err(|e| format!("attach: {e}"))?;
    let rec = p.recover().map_err(|e| format!("recovery failed: {e}"))?;
    let w = Workload::open(&mut p, kind, layout.data).map_err(|e| format!("open: {e}"))?;
    let c = w.check(&mut p).map_err(|e| format!("checker: {e}"))?;
    Ok((c, rec.repaired))
}

/// A live instance's view: its workload's contents, or the checker's complaint.
fn live_contents<P: Protocol>(w: &Workload, p: &mut P, tx: u64) -> Result<Contents, Error> {
    w.check(p).map_err(|e| Error::Live {
        tx,
        message: e.to_string(),
    })
}

/// Explores `cfg.workload` under the protocol `h` makes; `progress` is told each
/// transaction done.
pub fn explore<H: Harness>(
    h: &H,
    cfg: &Config,
    progress: &mut dyn FnMut(u64),
) -> Result<Report, Error> {
    let footprint = Workload::footprint(cfg.workload, &cfg.params);
    let need = PoolLayout::needed(cfg.log_len, footprint);
    let layout = PoolLayout::plan(need, h.name(), cfg.workload.name(), cfg.log_len, footprint)?;
    let m = Machine::new(cfg.machine(need, 0))?;
    let mut p = h.format(m, layout.log, layout.data)?;
    let mut w = Workload::format(&mut p, cfg.workload, &cfg.params, layout.data)?;
    layout.write(p.memory_mut())?;
    p.memory_mut().persist_all();
    let id0 = p.stats().commits;
    let mut ops = Ops::new(cfg.seed, &w, &cfg.params);
    let mut oracle = Oracle {
        history: vec![live_contents(&w, &mut p, 0)?],
    };
    let mut report = Report::default();
    let acked = |p: &H::Live| p.durable().saturating_sub(id0) as usize;
    for t in 0..cfg.txs {
        let acked_before = acked(&p);
        p.memory_mut().start_recording();
        let run = w.run_tx(&mut p, &mut ops);
        let rec = p.memory_mut().stop_recording();
        run?;
        let done = t as usize + 1;
        oracle.history.push(live_contents(&w, &mut p, t)?);
        let acked_after = acked(&p);
        let mut repaired = Vec::new();
        let r = rec.explore(&cfg.explore, |c| {
            let (got, fixed) = recover_image(h, &layout, cfg.workload, c.bytes)?;
            let from = if c.kind == PointKind::End {
                acked_after
            } else {
                acked_before
            };
            if !oracle.allows(&got, from, done) {
                return Err(format!(
                    "recovered {got}, not the state after any of transactions {from}..={done}"
                ));
            }
            if fixed {
                repaired.push((c.boundary, c.applied.to_vec()));
            }
            Ok(())
        });
        add(&mut report, &r, t, Stage::Transaction);
        report.txs += 1;
        for (b, applied) in spread(&repaired, cfg.recovery_samples) {
            let image = image_at(&rec, b, &applied);
            let allowed = &oracle.history[acked_before..=done];
            explore_recovery(h, cfg, &layout, &image, allowed, &ops, t, &mut report)?;
        }
        progress(t + 1);
    }
    Ok(report)
}

/// Adds one recording's figures and failures.
fn add(report: &mut Report, r: &pmlab_model::ExploreReport, tx: u64, stage: Stage) {
    if stage == Stage::Transaction {
        report.points += r.points as u64;
        report.images += r.images as u64;
        report.truncated_points += r.truncated_points as u64;
    } else {
        report.recovery_images += r.images as u64;
    }
    report.failing_images += r.failures.len() as u64;
    report.failures.extend(r.failures.iter().map(|f| Failure {
        tx,
        stage,
        boundary: f.boundary,
        message: f.message.clone(),
    }));
}

/// Up to `n` items of `v`, evenly spread (the first and, with two or more, the last).
fn spread<T: Clone>(v: &[T], n: usize) -> Vec<T> {
    if v.is_empty() || n == 0 {
        return Vec::new();
    }
    let n = n.min(v.len());
    if n == 1 {
        return vec![v[0].clone()];
    }
    (0..n)
        .map(|i| v[i * (v.len() - 1) / (n - 1)].clone())
        .collect()
}

/// The bytes of the crash image at `boundary` with the pending write-backs `applied`.
fn image_at(rec: &Recording, boundary: usize, applied: &[usize]) -> Vec<u8> {
    let state = rec
        .state_at(boundary)
        .expect("the explorer reported this boundary");
    state.image_with(applied.iter().copied())
}

/// Records recovery from `image` on a machine, then the next transaction, and
/// explores both: a crash during recovery must recover to a state `allowed` (the
/// recovered one at its end), and one during the next transaction to its before or
/// after.
#[allow(clippy::too_many_arguments)]
fn explore_recovery<H: Harness>(
    h: &H,
    cfg: &Config,
    layout: &PoolLayout,
    image: &[u8],
    allowed: &[Contents],
    ops: &Ops,
    tx: u64,
    report: &mut Report,
) -> Result<(), Error> {
    report.recoveries += 1;
    let size = image.len() as u64;
    let m = Machine::with_image(cfg.machine(size, tx + 1), image.to_vec())?;
    let mut p = h.attach_live(m, layout.log, layout.data)?;
    p.memory_mut().start_recording();
    let recovered = p.recover();
    let rec = p.memory_mut().stop_recording();
    if let Err(e) = recovered {
        report.failing_images += 1;
        report.failures.push(Failure {
            tx,
            stage: Stage::Recovery,
            boundary: 0,
            message: format!("recovery failed on the machine: {e}"),
        });
        return Ok(());
    }
    let mut w = Workload::open(&mut p, cfg.workload, layout.data)?;
    let c1 = match w.check(&mut p) {
        Ok(c) if allowed.contains(&c) => c,
        other => {
            report.failing_images += 1;
            report.failures.push(Failure {
                tx,
                stage: Stage::Recovery,
                boundary: 0,
                message: format!("recovery on the machine left {other:?}, not an allowed state"),
            });
            return Ok(());
        }
    };
    let judge = |c: &CrashImage<'_>, ok: &[Contents], end: &Contents| {
        let (got, _) = recover_image(h, layout, cfg.workload, c.bytes)?;
        let fine = if c.kind == PointKind::End {
            got == *end
        } else {
            ok.contains(&got)
        };
        if fine {
            Ok(())
        } else {
            Err(format!("recovered {got}, expected one of {ok:?}"))
        }
    };
    let r = rec.explore(&cfg.explore, |c| judge(c, allowed, &c1));
    add(report, &r, tx, Stage::Recovery);
    let mut next_ops = ops.clone();
    p.memory_mut().start_recording();
    let run = w.run_tx(&mut p, &mut next_ops);
    let rec = p.memory_mut().stop_recording();
    run?;
    let c2 = live_contents(&w, &mut p, tx)?;
    let r = rec.explore(&cfg.explore, |c| judge(c, &[c1, c2], &c2));
    add(report, &r, tx, Stage::AfterRecovery);
    Ok(())
}

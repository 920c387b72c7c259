//! `pmlab tx bench`: a workload's transactions timed on a real region (a file on tmpfs
//! or DAX, mapped, with real clwb/clflushopt + sfence), under each protocol asked for,
//! and — with `--vs-pmdk`, for SPS — PMDK's libpmemobj on the same operations in the
//! same run. Repetitions interleave the systems (pmlab redo, pmlab undo, PMDK, then
//! again), each repetition a fresh stream of the same length from its own seed, so that
//! the machine's load falls on all alike; the figures are medians.
//!
//! Reported per protocol: transactions per second, and per transaction the cache lines
//! flushed, the fences, and the bytes written to the log (from the region's persist
//! counters and the protocol's statistics). PMDK's flushes are not visible to pmlab:
//! only its rate is reported.

use std::path::{Path, PathBuf};
use std::time::Instant;

use pmlab_native::Region;
use pmlab_spine::Memory;
use pmlab_tx::{FaultPlan, Protocol, RedoProtocol, UndoProtocol};
use pmlab_workloads::{Kind, Ops, Params};
use serde::Serialize;

use crate::pmdk::{Pmdk, PmdkError, PmdkPool};
use crate::pool::{self, Place, Pool, PoolError, Spec};
use crate::proto::{ProtocolKind, Software};

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The workload.
    pub workload: Kind,
    /// Its size and operation mix.
    pub params: Params,
    /// Protocols to time.
    pub protocols: Vec<ProtocolKind>,
    /// Transactions per repetition.
    pub ops: u64,
    /// Repetitions (medians are reported).
    pub reps: u32,
    /// Seed of the first repetition's operation stream (then seed + 1, ...).
    pub seed: u64,
    /// Directory for scratch pools (tmpfs by default).
    pub dir: PathBuf,
    /// A pool to use (made if missing, kept afterwards; one protocol only).
    pub region: Option<PathBuf>,
    /// Time PMDK on the same operations (SPS only).
    pub vs_pmdk: bool,
    /// Log bytes of a new pool.
    pub log_len: u64,
}

/// One protocol's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The workload.
    pub workload: String,
    /// The protocol.
    pub protocol: String,
    /// `uniform` or `zipf`.
    pub dist: String,
    /// Elements of the structure.
    pub elements: u64,
    /// Operations per transaction.
    pub ops_per_tx: u32,
    /// Transactions per repetition.
    pub txs: u64,
    /// Repetitions.
    pub reps: u32,
    /// Median transactions per second.
    pub tx_per_s: f64,
    /// Every repetition's rate.
    pub tx_per_s_reps: Vec<f64>,
    /// Cache lines flushed per transaction.
    pub flushes_per_tx: f64,
    /// Fences per transaction.
    pub fences_per_tx: f64,
    /// Bytes written to the log per transaction.
    pub log_bytes_per_tx: f64,
    /// Bytes of transactional stores per transaction.
    pub write_bytes_per_tx: f64,
    /// The persist instruction the region used (`clwb`, `clflushopt`, ...).
    pub persist_mode: String,
    /// What backs the region (`tmpfs`, `dax`, ...).
    pub medium: String,
    /// PMDK's median rate on the same operations, if it ran.
    pub pmdk_tx_per_s: Option<f64>,
    /// PMDK's rate per repetition.
    pub pmdk_tx_per_s_reps: Vec<f64>,
    /// Whether PMDK flushed with CPU instructions (libpmem's `pmem_is_pmem`).
    pub pmdk_is_pmem: Option<bool>,
    /// `tx_per_s / pmdk_tx_per_s`.
    pub speedup_vs_pmdk: Option<f64>,
    /// The machine's 1-minute load average before and after the run, and its CPUs.
    pub load_before: f64,
    /// See `load_before`.
    pub load_after: f64,
    /// CPUs online.
    pub cpus: usize,
    /// The checker's verdict on each pool after the run (`ok` or its complaint).
    pub checked: String,
}

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A pool.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// PMDK.
    #[error(transparent)]
    Pmdk(#[from] PmdkError),
    /// A workload error during the run.
    #[error("{protocol}: {error}")]
    Run {
        /// The protocol.
        protocol: &'static str,
        /// What failed.
        error: pmlab_workloads::WorkloadError,
    },
    /// An existing pool whose structure fails its checker.
    #[error("{path}: the pool's structure fails its checker, so no operation runs on it: {error}")]
    Unsound {
        /// The region.
        path: String,
        /// The checker's finding.
        error: pmlab_workloads::CheckError,
    },
    /// Options that do not go together.
    #[error("{0}")]
    Usage(String),
    /// Scratch files.
    #[error("scratch directory {dir}: {error}")]
    Scratch {
        /// The directory.
        dir: String,
        /// What failed.
        error: std::io::Error,
    },
}

/// One repetition's counts.
#[derive(Clone, Copy, Debug, Default)]
struct Rep {
    secs: f64,
    flushes: u64,
    fences: u64,
    log_bytes: u64,
    write_bytes: u64,
}

/// A system being timed: a pmlab protocol on its pool, or PMDK.
trait Timed {
    fn name(&self) -> &'static str;
    /// What backs the pool and the persist instruction it uses.
    fn medium(&self) -> Option<(String, String)> {
        None
    }
    fn rep(&mut self, seed: u64, txs: u64) -> Result<Rep, BenchError>;
    fn check(&mut self) -> String;
}

struct Native<P: Protocol<Mem = Region>> {
    name: &'static str,
    pool: Pool<P>,
    params: Params,
    _place: Place,
}

impl<P: Protocol<Mem = Region>> Timed for Native<P> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn medium(&self) -> Option<(String, String)> {
        let r = self.pool.protocol.memory();
        Some((
            r.medium().name().to_string(),
            r.persist_mode().name().to_string(),
        ))
    }

    fn rep(&mut self, seed: u64, txs: u64) -> Result<Rep, BenchError> {
        let (p, w) = (&mut self.pool.protocol, &mut self.pool.workload);
        let mut ops = Ops::new(seed, w, &self.params);
        let (c0, s0) = (p.memory().persist_counters(), p.stats());
        let t = Instant::now();
        for _ in 0..txs {
            w.run_tx(p, &mut ops).map_err(|error| BenchError::Run {
                protocol: self.name,
                error,
            })?;
        }
        let secs = t.elapsed().as_secs_f64();
        let (c, s) = (p.memory().persist_counters(), p.stats());
        Ok(Rep {
            secs,
            flushes: c.flushes - c0.flushes,
            fences: c.fences - c0.fences,
            log_bytes: s.log_bytes - s0.log_bytes,
            write_bytes: s.write_bytes - s0.write_bytes,
        })
    }

    fn check(&mut self) -> String {
        match self.pool.workload.check(&mut self.pool.protocol) {
            Ok(_) => "ok".into(),
            Err(e) => e.to_string(),
        }
    }
}

struct PmdkSps<'a> {
    pool: PmdkPool<'a>,
    params: Params,
}

impl Timed for PmdkSps<'_> {
    fn name(&self) -> &'static str {
        "pmdk"
    }

    fn rep(&mut self, seed: u64, txs: u64) -> Result<Rep, BenchError> {
        let mut ops = Ops::over(seed, self.params.elements, &self.params);
        let t = Instant::now();
        for _ in 0..txs {
            let (i, j) = (ops.pick(), ops.pick());
            self.pool.swap(i, j)?;
        }
        Ok(Rep {
            secs: t.elapsed().as_secs_f64(),
            ..Rep::default()
        })
    }

    fn check(&mut self) -> String {
        if self.pool.is_permutation() {
            "ok".into()
        } else {
            "not a permutation".into()
        }
    }
}

/// The 1-minute load average (0 where /proc is not there).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Opens (or makes) the pool of `protocol` for `cfg` and wraps it for timing.
fn native(cfg: &Config, protocol: ProtocolKind) -> Result<Box<dyn Timed>, BenchError> {
    fn with<S: Software<Region> + 'static>(
        cfg: &Config,
        protocol: ProtocolKind,
    ) -> Result<Box<dyn Timed>, BenchError> {
        let spec = Spec {
            workload: cfg.workload,
            params: cfg.params,
            protocol,
            log_len: cfg.log_len,
        };
        let place = match &cfg.region {
            Some(p) => Place::Kept(p.clone()),
            None => {
                let dir = scratch(cfg, "pmlab-tx-bench-")?;
                let path = dir.path().join(format!("{}.pool", protocol.name()));
                Place::Scratch(dir, path)
            }
        };
        let path = place.path().to_path_buf();
        let pool: Pool<S> = if path.exists() {
            let region = Region::open(&path).map_err(PoolError::from)?;
            let mut pool: Pool<S> = pool::open(
                region,
                protocol,
                cfg.workload,
                Some(cfg.params.elements),
                FaultPlan::CORRECT,
                &path,
            )?;
            // A pool from elsewhere is checked before any operation runs on it.
            if let Err(e) = pool.workload.check(&mut pool.protocol) {
                return Err(BenchError::Unsound {
                    path: path.display().to_string(),
                    error: e,
                });
            }
            pool
        } else {
            let region = pool::create_region(&path, &spec)?;
            pool::make(region, &spec, FaultPlan::CORRECT, &path)?
        };
        Ok(Box::new(Native {
            name: protocol.name(),
            pool,
            params: cfg.params,
            _place: place,
        }))
    }
    match protocol {
        ProtocolKind::Redo => with::<RedoProtocol<Region>>(cfg, protocol),
        ProtocolKind::Undo => with::<UndoProtocol<Region>>(cfg, protocol),
    }
}

/// The protocol of the pool at `path`, if there is one (to bench an existing pool
/// without naming its protocol).
pub fn existing_protocol(path: &Path) -> Result<Option<ProtocolKind>, BenchError> {
    if !path.exists() {
        return Ok(None);
    }
    let mut region = Region::open(path).map_err(PoolError::from)?;
    Ok(Some(pool::protocol_of(&mut region, path)?))
}

/// Runs the benchmark; `progress` is told each repetition done (of `reps`).
pub fn run(cfg: &Config, progress: &mut dyn FnMut(u32)) -> Result<Vec<Row>, BenchError> {
    check_usage(cfg)?;
    let load_before = load_average();
    let pmdk = if cfg.vs_pmdk {
        Some(Pmdk::load()?)
    } else {
        None
    };
    let pmdk_dir = scratch(cfg, "pmlab-tx-pmdk-")?;
    let mut systems: Vec<Box<dyn Timed + '_>> = Vec::new();
    for &p in &cfg.protocols {
        systems.push(native(cfg, p)?);
    }
    let mut pmdk_is_pmem = None;
    if let Some(pmdk) = &pmdk {
        let path = pmdk_dir.path().join("sps.pmdk");
        let pool = PmdkPool::create_sps(pmdk, &path, cfg.params.elements)?;
        pmdk_is_pmem = pool.is_pmem();
        systems.push(Box::new(PmdkSps {
            pool,
            params: cfg.params,
        }));
    }
    let reps = measure(cfg, &mut systems, progress)?;
    let checked: Vec<String> = systems
        .iter_mut()
        .map(|s| format!("{}: {}", s.name(), s.check()))
        .collect();
    let pmdk_reps: Vec<f64> = match &pmdk {
        Some(_) => reps[systems.len() - 1]
            .iter()
            .map(|r| cfg.ops as f64 / r.secs)
            .collect(),
        None => Vec::new(),
    };
    let pmdk_rate = (!pmdk_reps.is_empty()).then(|| median(&pmdk_reps));
    let load = (load_before, load_average());
    let rows = cfg.protocols.iter().enumerate().map(|(s, &p)| {
        let medium = systems[s].medium().unwrap_or_default();
        let pmdk = Peer {
            rate: pmdk_rate,
            reps: &pmdk_reps,
            is_pmem: pmdk_is_pmem,
        };
        row(cfg, p, &reps[s], medium, pmdk, load, &checked)
    });
    Ok(rows.collect())
}

/// Refuses option combinations that cannot run.
fn check_usage(cfg: &Config) -> Result<(), BenchError> {
    if cfg.region.is_some() && cfg.protocols.len() != 1 {
        return Err(BenchError::Usage(
            "--region takes one protocol (the pool's)".into(),
        ));
    }
    if cfg.vs_pmdk && cfg.workload != Kind::Sps {
        return Err(BenchError::Usage(format!(
            "--vs-pmdk compares SPS only: PMDK's hashmap/rbtree/btree examples are not in Debian's libpmemobj-dev, so there is no PMDK {} to compare with",
            cfg.workload
        )));
    }
    Ok(())
}

/// A temporary directory in the scratch directory.
fn scratch(cfg: &Config, prefix: &str) -> Result<tempfile::TempDir, BenchError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&cfg.dir)
        .map_err(|error| BenchError::Scratch {
            dir: cfg.dir.display().to_string(),
            error,
        })
}

/// Runs every system once per repetition, interleaved.
fn measure(
    cfg: &Config,
    systems: &mut [Box<dyn Timed + '_>],
    progress: &mut dyn FnMut(u32),
) -> Result<Vec<Vec<Rep>>, BenchError> {
    let mut reps: Vec<Vec<Rep>> = vec![Vec::new(); systems.len()];
    for r in 0..cfg.reps {
        for (s, sys) in systems.iter_mut().enumerate() {
            reps[s].push(sys.rep(cfg.seed + u64::from(r), cfg.ops)?);
        }
        progress(r + 1);
    }
    Ok(reps)
}

/// PMDK's figures, for the rows.
struct Peer<'a> {
    rate: Option<f64>,
    reps: &'a [f64],
    is_pmem: Option<bool>,
}

fn row(
    cfg: &Config,
    p: ProtocolKind,
    reps: &[Rep],
    (medium, persist_mode): (String, String),
    pmdk: Peer<'_>,
    load: (f64, f64),
    checked: &[String],
) -> Row {
    let txs = (cfg.ops * u64::from(cfg.reps)) as f64;
    let sum = |f: fn(&Rep) -> u64| reps.iter().map(f).sum::<u64>() as f64 / txs;
    let rates: Vec<f64> = reps.iter().map(|r| cfg.ops as f64 / r.secs).collect();
    let tx_per_s = median(&rates);
    Row {
        workload: cfg.workload.name().into(),
        protocol: p.name().into(),
        dist: cfg.params.dist.name().into(),
        elements: cfg.params.elements,
        ops_per_tx: cfg.params.ops_per_tx,
        txs: cfg.ops,
        reps: cfg.reps,
        tx_per_s,
        tx_per_s_reps: rates,
        flushes_per_tx: sum(|r| r.flushes),
        fences_per_tx: sum(|r| r.fences),
        log_bytes_per_tx: sum(|r| r.log_bytes),
        write_bytes_per_tx: sum(|r| r.write_bytes),
        persist_mode,
        medium,
        pmdk_tx_per_s: pmdk.rate,
        pmdk_tx_per_s_reps: pmdk.reps.to_vec(),
        pmdk_is_pmem: pmdk.is_pmem,
        speedup_vs_pmdk: pmdk.rate.map(|r| tx_per_s / r),
        load_before: load.0,
        load_after: load.1,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        checked: checked.join("; "),
    }
}

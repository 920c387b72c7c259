//! `pmlab tx stress`: a native kill test. The driver makes a pool on a real region and
//! then, round after round, starts `pmlab tx bench` on it (which recovers the pool and
//! runs the workload's transactions until it dies) and kills it with SIGKILL at a
//! random moment: on even rounds after a random delay (a timer in the driver), on odd
//! rounds at a random store (the bench's memory raises SIGKILL on itself right after
//! its n-th store reaches the region, so kills land anywhere in a transaction, commit
//! and recovery included, not only where the bench spends its time). After each kill
//! the driver recovers the pool, runs the workload's checker, and holds what the pool
//! holds against the oracle: the bench counts the transactions whose commit returned
//! (acknowledged) in a shared page after each commit, and the driver replays the same
//! seeded operations on a reference pool in memory; the recovered contents must be
//! those after the acknowledged transactions, or after one more (the one whose commit
//! had not returned).
//!
//! Every random choice (delays, store counts, the rounds' seeds) comes from
//! xoshiro256++ seeded from the run's seed.
//!
//! A process kill loses nothing the process stored (the page cache keeps it), so this
//! test sees atomicity and recovery bugs — a recovery that skips a step, a commit that
//! breaks its order — but not missing flushes or fences, which only a power failure
//! would show: those are the machine model's to catch (`pmlab tx crashtest`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use pmlab_native::Region;
use pmlab_spine::{Addr, FlushKind, Memory, PersistCounters, SpineError, VecMemory};
use pmlab_tx::{Fault, FaultPlan, RedoProtocol, UndoProtocol};
use pmlab_workloads::{Contents, Kind, Ops, Params};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::pool::{self, Pool, PoolError, Spec};
use crate::proto::{ProtocolKind, Software};

/// What a stress run does.
#[derive(Clone, Debug)]
pub struct Config {
    /// The pool's contents.
    pub spec: Spec,
    /// A deliberate fault of the protocol (in the bench and in the driver's recovery).
    pub faults: FaultPlan,
    /// Rounds, each ending in a kill.
    pub kills: u32,
    /// Seed of the run.
    pub seed: u64,
    /// Directory for the pool (tmpfs by default).
    pub dir: PathBuf,
    /// The `pmlab` executable that plays the bench.
    pub pmlab: PathBuf,
    /// Longest delay of a timed kill, in milliseconds (drawn from 1..=this).
    pub max_delay_ms: u64,
    /// Largest store count of a self-kill (drawn from 1..=this).
    pub max_stores: u64,
}

/// What one round saw.
#[derive(Clone, Debug)]
pub struct Round {
    /// Round number.
    pub round: u32,
    /// How the bench was killed.
    pub kill: String,
    /// Transactions it acknowledged.
    pub acked: u64,
    /// Whether the pool held the state after one more (the unacknowledged last).
    pub one_more: bool,
    /// What recovery did.
    pub recovery: String,
}

/// A stress run's outcome.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The rounds that passed.
    pub rounds: Vec<Round>,
    /// What failed (the run stops at the first failure).
    pub violation: Option<String>,
}

/// Why a stress run could not run.
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    /// A pool.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// The reference run.
    #[error("reference run: {0}")]
    Reference(String),
    /// Processes and files.
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        error: std::io::Error,
    },
    /// The ack page.
    #[error(transparent)]
    Region(#[from] pmlab_native::RegionError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StressError {
    let what = what.into();
    move |error| StressError::Io { what, error }
}

/// The seed of round `r`'s operation stream.
pub fn round_seed(seed: u64, r: u32) -> u64 {
    seed ^ (u64::from(r) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Runs the stress test; `progress` is told each round done.
pub fn run(cfg: &Config, progress: &mut dyn FnMut(u32)) -> Result<Report, StressError> {
    match cfg.spec.protocol {
        ProtocolKind::Redo => {
            run_with::<RedoProtocol<Region>, RedoProtocol<VecMemory>>(cfg, progress)
        }
        ProtocolKind::Undo => {
            run_with::<UndoProtocol<Region>, UndoProtocol<VecMemory>>(cfg, progress)
        }
    }
}

fn run_with<S, R>(cfg: &Config, progress: &mut dyn FnMut(u32)) -> Result<Report, StressError>
where
    S: Software<Region>,
    R: Software<VecMemory>,
{
    let dir = tempfile::Builder::new()
        .prefix("pmlab-tx-stress-")
        .tempdir_in(&cfg.dir)
        .map_err(io(format!("scratch directory in {}", cfg.dir.display())))?;
    let path = dir
        .path()
        .join(format!("{}-{}.pool", cfg.spec.workload, cfg.spec.protocol));
    let ack_path = dir.path().join("ack");
    {
        let region = pool::create_region(&path, &cfg.spec)?;
        let _: Pool<S> = pool::make(region, &cfg.spec, FaultPlan::CORRECT, &path)?;
    }
    let mut reference = Reference::<R>::new(&cfg.spec)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let mut report = Report::default();
    for r in 0..cfg.kills {
        let mut ack = Region::create_file(&ack_path, 2 * pmlab_native::DATA_OFFSET)?;
        ack.write_u64(0, 0).expect("the ack page holds a word");
        let kill = if r % 2 == 0 {
            Kill::After(Duration::from_millis(
                rng.gen_range(1..=cfg.max_delay_ms.max(1)),
            ))
        } else {
            Kill::AtStore(rng.gen_range(1..=cfg.max_stores.max(1)))
        };
        let seed = round_seed(cfg.seed, r);
        let outcome = bench_round(cfg, &path, &ack_path, seed, &kill)?;
        let acked = ack.read_u64(0).expect("the ack page holds a word");
        drop(ack);
        std::fs::remove_file(&ack_path).map_err(io("remove the ack page"))?;
        if let Err(v) = outcome {
            report.violation = Some(format!("round {r} ({kill}): {v}"));
            break;
        }
        match judge::<S, R>(cfg, &path, &mut reference, seed, acked)? {
            Ok((one_more, recovery)) => report.rounds.push(Round {
                round: r,
                kill: kill.to_string(),
                acked,
                one_more,
                recovery,
            }),
            Err(v) => {
                report.violation = Some(format!("round {r} ({kill}, {acked} acknowledged): {v}"));
                break;
            }
        }
        progress(r + 1);
    }
    Ok(report)
}

/// How a round's bench dies.
enum Kill {
    /// The driver kills it after this long.
    After(Duration),
    /// It kills itself right after this store.
    AtStore(u64),
}

impl std::fmt::Display for Kill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kill::After(d) => write!(f, "killed after {} ms", d.as_millis()),
            Kill::AtStore(n) => write!(f, "killed itself at store {n}"),
        }
    }
}

/// Runs one bench and kills it; `Ok(Err(why))` if the bench died otherwise.
fn bench_round(
    cfg: &Config,
    path: &Path,
    ack: &Path,
    seed: u64,
    kill: &Kill,
) -> Result<Result<(), String>, StressError> {
    let s = &cfg.spec;
    let mut c = Command::new(&cfg.pmlab);
    c.args([
        "tx",
        "bench",
        "--no-progress",
        "--workload",
        s.workload.name(),
    ])
    .args([
        "--protocol",
        s.protocol.name(),
        "--dist",
        s.params.dist.name(),
    ])
    .args(["--elements", &s.params.elements.to_string()])
    .args(["--ops-per-tx", &s.params.ops_per_tx.to_string()])
    .args(["--seed", &seed.to_string(), "--region"])
    .arg(path)
    .arg("--ack")
    .arg(ack)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if let Some(f) = cfg.faults.fault {
        c.args(["--fault", f.name()]);
    }
    if let Kill::AtStore(n) = kill {
        c.args(["--kill-at-store", &n.to_string()]);
    }
    let mut child = c
        .spawn()
        .map_err(io(format!("start {}", cfg.pmlab.display())))?;
    if let Kill::After(d) = kill {
        std::thread::sleep(*d);
        // The bench may have died already (and then says why below).
        let _ = child.kill();
    }
    let out = child.wait_with_output().map_err(io("wait for the bench"))?;
    use std::os::unix::process::ExitStatusExt;
    if out.status.signal() == Some(9) {
        return Ok(Ok(()));
    }
    Ok(Err(format!(
        "the bench exited with {} instead of being killed: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// The same workload in memory, replaying each round's acknowledged transactions.
struct Reference<R> {
    spec: Spec,
    pool: Pool<R>,
}

impl<R: Software<VecMemory>> Reference<R> {
    fn new(spec: &Spec) -> Result<Self, StressError> {
        let mem = VecMemory::new((spec.region_size() - pmlab_native::DATA_OFFSET) as usize);
        let pool = pool::make(mem, spec, FaultPlan::CORRECT, Path::new("reference"))?;
        Ok(Reference {
            spec: spec.clone(),
            pool,
        })
    }

    fn contents(&mut self) -> Result<Contents, StressError> {
        self.pool
            .workload
            .check(&mut self.pool.protocol)
            .map_err(|e| StressError::Reference(e.to_string()))
    }

    fn run(&mut self, ops: &mut Ops, n: u64) -> Result<(), StressError> {
        for _ in 0..n {
            self.pool
                .workload
                .run_tx(&mut self.pool.protocol, ops)
                .map_err(|e| StressError::Reference(e.to_string()))?;
        }
        Ok(())
    }

    /// Goes back to a copy of its memory taken earlier.
    fn restore(&mut self, mem: VecMemory) -> Result<(), StressError> {
        let path = Path::new("reference");
        self.pool = pool::open(
            mem,
            self.spec.protocol,
            self.spec.workload,
            None,
            FaultPlan::CORRECT,
            path,
        )?;
        Ok(())
    }
}

/// A round's verdict: the oracle's match (whether the pool held one more than the
/// acknowledged transactions, and what recovery did), or what was wrong.
type Verdict = Result<(bool, String), String>;

/// Recovers the pool, checks it, and compares it with the reference after `acked`
/// and `acked + 1` of the round's transactions; advances the reference to the match.
fn judge<S, R>(
    cfg: &Config,
    path: &Path,
    reference: &mut Reference<R>,
    seed: u64,
    acked: u64,
) -> Result<Verdict, StressError>
where
    S: Software<Region>,
    R: Software<VecMemory>,
{
    let s = &cfg.spec;
    let region = match Region::open(path) {
        Ok(r) => r,
        Err(e) => return Ok(Err(format!("the pool does not open: {e}"))),
    };
    let opened: Result<Pool<S>, _> = pool::open(
        region,
        s.protocol,
        s.workload,
        Some(s.params.elements),
        cfg.faults,
        path,
    );
    let mut pool = match opened {
        Ok(p) => p,
        Err(e) => return Ok(Err(format!("recovery: {e}"))),
    };
    let got = match pool.workload.check(&mut pool.protocol) {
        Ok(c) => c,
        Err(e) => return Ok(Err(format!("checker: {e}"))),
    };
    let note = pool.recovery.map(|r| r.note).unwrap_or_default();
    let mut ops = Ops::new(seed, &reference.pool.workload, &s.params);
    reference.run(&mut ops, acked)?;
    let at_acked = reference.contents()?;
    let saved = reference.pool.protocol.memory().clone();
    reference.run(&mut ops, 1)?;
    let one_more = reference.contents()?;
    if got == one_more {
        return Ok(Ok((true, note)));
    }
    if got == at_acked {
        reference.restore(saved)?;
        return Ok(Ok((false, note)));
    }
    Ok(Err(format!(
        "the pool holds {got}: neither the state after the {acked} acknowledged transactions ({at_acked}) nor after one more ({one_more})"
    )))
}

/// A memory that SIGKILLs its process right after its `n`-th store (the bench's
/// self-kill in odd rounds).
pub struct KillSwitch<M> {
    inner: M,
    left: u64,
}

impl<M> KillSwitch<M> {
    /// Wraps `inner`; `at` is the store to die after (`None`: never).
    pub fn new(inner: M, at: Option<u64>) -> Self {
        KillSwitch {
            inner,
            left: at.unwrap_or(u64::MAX),
        }
    }
}

impl<M: Memory> Memory for KillSwitch<M> {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        self.inner.read(addr, buf)
    }
    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        let r = self.inner.write(addr, data);
        self.left -= 1;
        if self.left == 0 {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
        r
    }
    fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError> {
        self.inner.flush(addr, len, kind)
    }
    fn fence(&mut self) {
        self.inner.fence()
    }
    fn persist_counters(&self) -> PersistCounters {
        self.inner.persist_counters()
    }
}

/// What the bench does as a stress worker (`pmlab tx bench --ack`).
#[derive(Clone, Debug)]
pub struct WorkerArgs {
    /// The pool (it must exist).
    pub region: PathBuf,
    /// Its workload and parameters.
    pub workload: Kind,
    /// Its size and operation mix.
    pub params: Params,
    /// Its protocol.
    pub protocol: ProtocolKind,
    /// A deliberate fault.
    pub faults: FaultPlan,
    /// The operations' seed.
    pub seed: u64,
    /// The page to count acknowledged transactions in.
    pub ack: PathBuf,
    /// Die right after this store.
    pub kill_at_store: Option<u64>,
}

/// Opens and recovers the pool, then runs transactions until killed, counting each
/// acknowledged one in the ack page. Returns only on an error.
pub fn worker(a: &WorkerArgs) -> Result<(), String> {
    match a.protocol {
        ProtocolKind::Redo => worker_with::<RedoProtocol<KillSwitch<Region>>>(a),
        ProtocolKind::Undo => worker_with::<UndoProtocol<KillSwitch<Region>>>(a),
    }
}

fn worker_with<S: Software<KillSwitch<Region>>>(a: &WorkerArgs) -> Result<(), String> {
    let mut ack = Region::open(&a.ack).map_err(|e| e.to_string())?;
    let region = Region::open(&a.region).map_err(|e| e.to_string())?;
    let mem = KillSwitch::new(region, a.kill_at_store);
    let mut pool: Pool<S> = pool::open(
        mem,
        a.protocol,
        a.workload,
        Some(a.params.elements),
        a.faults,
        &a.region,
    )
    .map_err(|e| e.to_string())?;
    let mut ops = Ops::new(a.seed, &pool.workload, &a.params);
    let mut n = 0u64;
    loop {
        pool.workload
            .run_tx(&mut pool.protocol, &mut ops)
            .map_err(|e| e.to_string())?;
        n += 1;
        // A plain store to a shared page: the kernel keeps it when the process dies.
        ack.write_u64(0, n).map_err(|e| e.to_string())?;
    }
}

/// The faults whose effect a process kill can show (recovery that skips a step).
pub fn kill_visible(f: Fault) -> bool {
    matches!(
        f,
        Fault::RedoRecoverySkipsReplay | Fault::UndoRecoverySkipsRollback
    )
}

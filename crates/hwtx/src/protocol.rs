//! The protocols of paper 001 behind pmlab's transaction interface
//! ([`pmlab_tx::Protocol`]): [`HwProtocol`] on the machine model, and [`HwImage`], which
//! recovers a crash image (any memory) with the same recovery the machine runs.
//!
//! Transaction numbers: the interface numbers every commit 1, 2, 3, ...; the hardware
//! numbers only transactions that store (a read-only transaction takes no hardware ID).
//! [`Protocol::durable`] is the last commit whose hardware transaction the protocol has
//! acknowledged persistent (LOC's `LastCommittedTxID`; for S-WAL, H-WAL and Kiln every
//! commit, when it returns). The baseline acknowledges nothing: it has no persistence.

use std::collections::VecDeque;

use pmlab_model::Machine;
use pmlab_spine::{Memory, VecMemory};
use pmlab_tx::{Area, Protocol, Recovery, TxError, TxId, TxStats};

use crate::baseline::Baseline;
use crate::core::ComputeModel;
use crate::engine::{Engine, HwError};
use crate::kiln::{self, Kiln};
use crate::loc::{HwWal, WalConfig};
use crate::wal::format::{Layout, Reading};
use crate::wal::recovery::{self, CommitRule, RecoveryFaults};
use crate::wal::swal::SWal;

/// The protocols of paper 001's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum HwKind {
    /// No persistence: the normalization baseline.
    Baseline,
    /// Software WAL.
    SWal,
    /// Hardware WAL.
    HWal,
    /// Eager Commit.
    EcWal,
    /// Eager Commit + Speculative Persistence.
    LocWal,
    /// Non-volatile LLC.
    Kiln,
    /// Non-volatile LLC + Speculative Persistence.
    LocKiln,
}

impl HwKind {
    /// Every protocol, the baseline first.
    pub const ALL: [HwKind; 7] = [
        HwKind::Baseline,
        HwKind::SWal,
        HwKind::HWal,
        HwKind::EcWal,
        HwKind::LocWal,
        HwKind::Kiln,
        HwKind::LocKiln,
    ];

    /// The paper's name (`S-WAL`, `LOC-Kiln`, ...).
    pub fn label(self) -> &'static str {
        match self {
            HwKind::Baseline => "baseline",
            HwKind::SWal => "S-WAL",
            HwKind::HWal => "H-WAL",
            HwKind::EcWal => "EC-WAL",
            HwKind::LocWal => "LOC-WAL",
            HwKind::Kiln => "Kiln",
            HwKind::LocKiln => "LOC-Kiln",
        }
    }

    /// The name on command lines and in pools (`s-wal`, `loc-kiln`, ...).
    pub fn name(self) -> &'static str {
        match self {
            HwKind::Baseline => "baseline",
            HwKind::SWal => "s-wal",
            HwKind::HWal => "h-wal",
            HwKind::EcWal => "ec-wal",
            HwKind::LocWal => "loc-wal",
            HwKind::Kiln => "kiln",
            HwKind::LocKiln => "loc-kiln",
        }
    }

    /// Parses [`HwKind::name`] or [`HwKind::label`].
    pub fn from_name(s: &str) -> Option<HwKind> {
        HwKind::ALL
            .into_iter()
            .find(|k| k.name() == s || k.label() == s)
    }

    /// Whether it survives crashes (all but the baseline).
    pub fn persistent(self) -> bool {
        self != HwKind::Baseline
    }

    /// Whether it keeps its persistent state in a non-volatile LLC.
    pub fn nv_llc(self) -> bool {
        matches!(self, HwKind::Kiln | HwKind::LocKiln)
    }
}

/// Deliberately broken variants, for the crash tests to catch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct HwFaults {
    /// EC recovery that trusts a partial block group (commits on finding TxCnt without
    /// counting the blocks).
    pub ec_trust_partial: bool,
    /// Speculative Persistence committing out of order (recovery without the in-order
    /// cut).
    pub sp_out_of_order: bool,
    /// Kiln commit that does not wait for the NV-LLC (the register is written before
    /// the lines reach it).
    pub kiln_no_wait: bool,
}

impl HwFaults {
    /// No fault.
    pub const NONE: HwFaults = HwFaults {
        ec_trust_partial: false,
        sp_out_of_order: false,
        kiln_no_wait: false,
    };

    fn recovery(&self) -> RecoveryFaults {
        RecoveryFaults {
            trust_partial: self.ec_trust_partial,
            out_of_order: self.sp_out_of_order,
        }
    }
}

/// One protocol, fully configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HwConfig {
    /// Which protocol.
    pub kind: HwKind,
    /// Speculation degree of LOC-WAL and LOC-Kiln (the others: 1).
    pub sd: u32,
    /// What a block-group block is (the WAL protocols).
    pub reading: Reading,
    /// The workload's computation.
    pub compute: ComputeModel,
    /// Broken variants.
    pub faults: HwFaults,
    /// Strict ordering as a total order of persistent writes, one 64-byte write in
    /// flight at a time: S-WAL's `clflush` waits for its write-back (as on a core with
    /// one outstanding memory request, gem5's TimingSimpleCPU), H-WAL and EC-WAL write
    /// the lines of their block groups one after another, Kiln flushes one line into its
    /// NV-LLC at a time; LOC-WAL and LOC-Kiln with a speculation degree above 1 persist
    /// their windows' writes in any order, as before. Off by default: a commit's
    /// independent writes then overlap across the banks. The reproduction runs both.
    pub serial_persist: bool,
    /// Strict WAL's in-place phase ordered too (paper 001 §II-B, Phases 3-4: "one phase
    /// cannot be started before the previous phase is complete"; §I: "waiting for the
    /// completeness of all memory writes within the transaction before a single write
    /// for the next transaction can be performed"): once a transaction is persistent
    /// in the log, its new data are written to their home locations and the next
    /// transaction waits for them. Applies to S-WAL (a `clflush` of every home line and
    /// an `mfence` after the in-place stores), H-WAL and EC-WAL (the hardware writes
    /// the lines home and the next `TxBegin` waits). Off by default: the in-place
    /// writes then reach memory as the cache evicts the lines or a checkpoint finds
    /// them, as LOC's own in-place phase does (§IV-C, the ordinary dirty flag); the
    /// paper does not say which its H-WAL does. LOC-WAL with SD above 1 and the Kiln
    /// protocols are unchanged. The sensitivity study runs both.
    pub ordered_in_place: bool,
    /// LOC-WAL's speculation window complete only once its data are home too: when a
    /// window is persistent in the log, the hardware writes its lines home (overlapped
    /// across the banks) and the next `TxBegin` waits for them as well. A reading the
    /// paper leaves open: "CRL stalls new transactions until the current speculation
    /// window completes" (§IV-B), and the Tx State Table's Phase field follows each
    /// transaction through "log writing phase, in-place writing phase updating home
    /// locations or ... the entire write-back", but §IV-C lets home writes happen
    /// "using the original dirty flag as in a conventional CPU cache". Off by default
    /// (the in-place writes are lazy); the sensitivity study runs it.
    pub window_in_place: bool,
    /// LOC-WAL's speculation windows persisted as the strict protocols persist a
    /// transaction under [`HwConfig::serial_persist`]: the log writer issues one block
    /// group at a time, each once the one before it completed, rather than overlapping
    /// a window's groups across the banks. The paper leaves it open: a window's blocks
    /// "can be persisted in any order" (§III-B), which allows overlapping them, and it
    /// gives no limit on the log writes in flight; but EC-WAL, "the LOC mechanism for
    /// WAL with only Eager Commit" (§V-C), issues its groups one at a time under
    /// strict ordering, which suggests one log writer. Off by default (the text's
    /// "in any order"); the sensitivity study runs it, with Figure 8 swept in it.
    pub serial_windows: bool,
}

impl HwConfig {
    /// `kind` with the paper's defaults: SD 16, line blocks.
    pub fn new(kind: HwKind) -> HwConfig {
        HwConfig {
            kind,
            sd: crate::loc::DEFAULT_SD,
            reading: Reading::Line,
            compute: ComputeModel::default(),
            faults: HwFaults::NONE,
            serial_persist: false,
            ordered_in_place: false,
            window_in_place: false,
            serial_windows: false,
        }
    }

    /// The speculation degree in effect.
    pub fn effective_sd(&self) -> u32 {
        match self.kind {
            HwKind::LocWal | HwKind::LocKiln => self.sd.max(1),
            _ => 1,
        }
    }

    fn wal(&self) -> Option<WalConfig> {
        let faults = self.faults.recovery();
        let w = match self.kind {
            HwKind::HWal => WalConfig::hwal(self.reading),
            HwKind::EcWal => WalConfig::ecwal(self.reading),
            HwKind::LocWal => WalConfig::locwal(self.effective_sd(), self.reading),
            _ => return None,
        };
        Some(WalConfig {
            faults,
            serial: self.serial_persist,
            ordered_in_place: self.ordered_in_place,
            window_in_place: self.window_in_place,
            serial_windows: self.serial_windows,
            ..w
        })
    }

    fn rule(&self) -> CommitRule {
        match self.kind {
            HwKind::EcWal | HwKind::LocWal => CommitRule::Count,
            _ => CommitRule::Record,
        }
    }

    fn layout(&self, log: Area) -> Result<Layout, TxError> {
        let reading = if self.kind == HwKind::SWal {
            Reading::Line
        } else {
            self.reading
        };
        Layout::new(log.base, log.len, reading)
            .ok_or_else(|| bad_area(log, "too small for the memory log"))
    }
}

fn bad_area(log: Area, problem: &str) -> TxError {
    TxError::BadArea {
        structure: "hardware log",
        addr: log.base,
        problem: problem.into(),
    }
}

fn hw_error(e: HwError, log: Area) -> TxError {
    match e {
        HwError::LogFull => TxError::LogFull {
            kind: "hardware",
            needed: log.len + 1,
            capacity: log.len,
        },
        other => TxError::BadArea {
            structure: "hardware transaction",
            addr: log.base,
            problem: other.to_string(),
        },
    }
}

fn setup_error(e: crate::HwSetupError, log: Area) -> TxError {
    bad_area(log, &e.to_string())
}

enum State {
    /// Attached to memory that may have crashed: recover first.
    /// (Boxed: a machine is large beside an engine's pointer.)
    Waiting(Box<Machine>),
    Running(Box<dyn Engine>),
    /// Only while a transition is under way.
    Gone,
}

/// A protocol of paper 001 on the machine model.
pub struct HwProtocol {
    cfg: HwConfig,
    log: Area,
    data: Area,
    state: State,
    in_tx: bool,
    commits: u64,
    /// Committed transactions whose hardware ID is not yet acknowledged persistent.
    unacked: VecDeque<(TxId, u64)>,
    stats: TxStats,
}

impl std::fmt::Debug for HwProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HwProtocol")
            .field("cfg", &self.cfg)
            .field("commits", &self.commits)
            .finish_non_exhaustive()
    }
}

impl HwProtocol {
    /// A freshly formatted instance over `m`: its log (or NV-LLC state) in `log`, the
    /// transactions' data in `data`.
    /// The log area of the WAL protocols must be zero (fresh memory): a group left
    /// there by something else could read as valid.
    pub fn format(m: Machine, log: Area, data: Area, cfg: HwConfig) -> Result<HwProtocol, TxError> {
        check_areas(&m, log, data)?;
        let (a, b) = (log.base as usize, log.end() as usize);
        if !cfg.kind.nv_llc()
            && cfg.kind.persistent()
            && m.durable().image()[a..b].iter().any(|&x| x != 0)
        {
            return Err(bad_area(
                log,
                "the log area is not zero: format needs fresh memory",
            ));
        }
        let e = |e| setup_error(e, log);
        let engine: Box<dyn Engine> = match cfg.kind {
            HwKind::Baseline => Box::new(Baseline::new(m, cfg.compute).map_err(e)?),
            HwKind::SWal => Box::new(
                SWal::format(m, log.base, log.len, cfg.compute)
                    .map_err(e)?
                    .with_serial(cfg.serial_persist)
                    .with_ordered_in_place(cfg.ordered_in_place),
            ),
            HwKind::HWal | HwKind::EcWal | HwKind::LocWal => {
                let w = cfg.wal().expect("a WAL protocol");
                Box::new(HwWal::format(m, log.base, log.len, w, cfg.compute).map_err(e)?)
            }
            HwKind::Kiln | HwKind::LocKiln => Box::new(
                Kiln::format(m, log.base, log.len, cfg.effective_sd(), cfg.compute)
                    .map_err(e)?
                    .with_no_wait(cfg.faults.kiln_no_wait)
                    .with_serial(cfg.serial_persist),
            ),
        };
        Ok(HwProtocol::new(cfg, log, data, State::Running(engine)))
    }

    /// An instance attached to a machine holding an earlier (possibly crashed) run;
    /// [`Protocol::recover`] before anything else.
    pub fn attach(m: Machine, log: Area, data: Area, cfg: HwConfig) -> Result<HwProtocol, TxError> {
        check_areas(&m, log, data)?;
        Ok(HwProtocol::new(cfg, log, data, State::Waiting(Box::new(m))))
    }

    fn new(cfg: HwConfig, log: Area, data: Area, state: State) -> HwProtocol {
        HwProtocol {
            cfg,
            log,
            data,
            state,
            in_tx: false,
            commits: 0,
            unacked: VecDeque::new(),
            stats: TxStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &HwConfig {
        &self.cfg
    }

    /// The running engine (its core and counters); `None` before recovery.
    pub fn engine(&self) -> Option<&dyn Engine> {
        match &self.state {
            State::Running(e) => Some(e.as_ref()),
            _ => None,
        }
    }

    fn running(&mut self) -> Result<&mut Box<dyn Engine>, TxError> {
        match &mut self.state {
            State::Running(e) => Ok(e),
            _ => Err(TxError::NeedsRecovery),
        }
    }

    fn prune(&mut self) {
        if let State::Running(e) = &self.state {
            let d = e.durable_hw();
            while self.unacked.front().is_some_and(|&(_, hw)| hw <= d) {
                self.unacked.pop_front();
            }
        }
    }

    fn take_machine(&mut self) -> Result<Machine, TxError> {
        match std::mem::replace(&mut self.state, State::Gone) {
            State::Waiting(m) => Ok(*m),
            State::Running(e) => e.shutdown().map_err(|e| hw_error(e, self.log)),
            State::Gone => unreachable!("never left gone"),
        }
    }
}

fn check_areas(m: &Machine, log: Area, data: Area) -> Result<(), TxError> {
    let size = m.size();
    if log.end() > size || data.end() > size || (log.base < data.end() && data.base < log.end()) {
        return Err(bad_area(
            log,
            "log and data areas must lie in memory and not overlap",
        ));
    }
    Ok(())
}

/// Runs `cfg`'s recovery on `m` (the machine, or a crash image).
fn recover_on<M: Memory + ?Sized>(
    m: &mut M,
    cfg: &HwConfig,
    log: Area,
) -> Result<(Recovery, u64), TxError> {
    let corrupt = |problem: String| TxError::Corrupt {
        structure: "hardware log",
        addr: log.base,
        offset: 0,
        field: "head",
        problem,
    };
    match cfg.kind {
        HwKind::Baseline => Ok((
            Recovery {
                note: "the baseline keeps no log: nothing to recover".into(),
                ..Recovery::default()
            },
            0,
        )),
        HwKind::Kiln | HwKind::LocKiln => {
            let r = kiln::recovery::recover(m, log.base, log.len)
                .map_err(|e| corrupt(e.to_string()))?;
            Ok((
                Recovery {
                    repaired: r.written > 0,
                    entries: r.written,
                    note: format!(
                        "NV-LLC: register {}, {} committed versions written home, {} uncommitted dropped",
                        r.register, r.written, r.dropped
                    ),
                },
                r.register,
            ))
        }
        _ => {
            let layout = cfg.layout(log)?;
            let r = recovery::recover(m, &layout, cfg.rule(), cfg.faults.recovery())
                .map_err(|e| corrupt(e.to_string()))?;
            Ok((
                Recovery {
                    repaired: r.blocks > 0,
                    entries: r.blocks,
                    note: format!(
                        "memory log: {} groups, {} transactions committed ({} blocks home), {} discarded",
                        r.groups, r.committed, r.blocks, r.discarded
                    ),
                },
                r.head.base_tx,
            ))
        }
    }
}

impl Protocol for HwProtocol {
    type Mem = Machine;

    fn name(&self) -> &'static str {
        self.cfg.kind.name()
    }

    fn recover(&mut self) -> Result<Recovery, TxError> {
        if self.in_tx {
            return Err(TxError::InTransaction);
        }
        let mut m = self.take_machine()?;
        let result = recover_on(&mut m, &self.cfg, self.log);
        let (rec, resume) = match result {
            Ok(r) => r,
            Err(e) => {
                self.state = State::Waiting(Box::new(m));
                return Err(e);
            }
        };
        let (cfg, log) = (self.cfg, self.log);
        let e = |e| setup_error(e, log);
        let engine: Box<dyn Engine> = match cfg.kind {
            HwKind::Baseline => Box::new(Baseline::new(m, cfg.compute).map_err(e)?),
            HwKind::SWal => {
                let layout = cfg.layout(log)?;
                let head = recovery::read_head(&mut m, &layout)
                    .map_err(|x| bad_area(log, &x.to_string()))?;
                Box::new(
                    SWal::resume(m, layout, head, cfg.compute)
                        .map_err(e)?
                        .with_serial(cfg.serial_persist),
                )
            }
            HwKind::HWal | HwKind::EcWal | HwKind::LocWal => {
                let layout = cfg.layout(log)?;
                let head = recovery::read_head(&mut m, &layout)
                    .map_err(|x| bad_area(log, &x.to_string()))?;
                debug_assert_eq!(head.base_tx, resume);
                let w = cfg.wal().expect("a WAL protocol");
                Box::new(HwWal::resume(m, layout, head, w, cfg.compute).map_err(e)?)
            }
            HwKind::Kiln | HwKind::LocKiln => Box::new(
                Kiln::resume(
                    m,
                    log.base,
                    log.len,
                    resume,
                    cfg.effective_sd(),
                    cfg.compute,
                )
                .map_err(e)?
                .with_no_wait(cfg.faults.kiln_no_wait)
                .with_serial(cfg.serial_persist),
            ),
        };
        self.state = State::Running(engine);
        self.unacked.clear();
        Ok(rec)
    }

    fn begin(&mut self) -> Result<(), TxError> {
        let log = self.log;
        let in_tx = self.in_tx;
        let e = self.running()?;
        if in_tx {
            return Err(TxError::InTransaction);
        }
        e.begin().map_err(|x| hw_error(x, log))?;
        self.in_tx = true;
        Ok(())
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TxError> {
        let log = self.log;
        let e = self.running()?;
        pmlab_spine::check_bounds(addr, buf.len() as u64, e.core().m.size())?;
        e.read(addr, buf).map_err(|x| hw_error(x, log))
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), TxError> {
        let (log, area, in_tx) = (self.log, self.data, self.in_tx);
        let e = self.running()?;
        if !in_tx {
            return Err(TxError::NoTransaction { op: "write" });
        }
        if !area.contains(addr, data.len() as u64) {
            return Err(TxError::OutsideData {
                op: "write",
                addr,
                len: data.len() as u64,
                lo: area.base,
                hi: area.end(),
            });
        }
        e.write(addr, data).map_err(|x| hw_error(x, log))?;
        self.stats.writes += 1;
        self.stats.write_bytes += data.len() as u64;
        Ok(())
    }

    fn commit(&mut self) -> Result<TxId, TxError> {
        let (log, in_tx) = (self.log, self.in_tx);
        let e = self.running()?;
        if !in_tx {
            return Err(TxError::NoTransaction { op: "commit" });
        }
        let hw = e.commit().map_err(|x| hw_error(x, log))?;
        self.in_tx = false;
        self.commits += 1;
        self.stats.commits += 1;
        if let Some(hw) = hw {
            self.unacked.push_back((self.commits, hw));
        }
        self.prune();
        Ok(self.commits)
    }

    fn abort(&mut self) -> Result<(), TxError> {
        let (log, in_tx) = (self.log, self.in_tx);
        let e = self.running()?;
        if !in_tx {
            return Err(TxError::NoTransaction { op: "abort" });
        }
        e.abort().map_err(|x| hw_error(x, log))?;
        self.in_tx = false;
        self.stats.aborts += 1;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TxError> {
        let log = self.log;
        self.running()?.flush().map_err(|x| hw_error(x, log))?;
        self.prune();
        Ok(())
    }

    fn durable(&self) -> TxId {
        let State::Running(e) = &self.state else {
            return 0;
        };
        if !self.cfg.kind.persistent() {
            return 0;
        }
        let d = e.durable_hw();
        match self.unacked.iter().find(|&&(_, hw)| hw > d) {
            Some(&(id, _)) => id - 1,
            None => self.commits,
        }
    }

    fn in_transaction(&self) -> bool {
        self.in_tx
    }

    fn stats(&self) -> TxStats {
        let mut s = self.stats;
        if let State::Running(e) = &self.state {
            s.log_bytes = e.stats().log_writes * 64;
        }
        s
    }

    fn memory(&self) -> &Machine {
        match &self.state {
            State::Waiting(m) => m,
            State::Running(e) => &e.core().m,
            State::Gone => unreachable!("never left gone"),
        }
    }

    fn memory_mut(&mut self) -> &mut Machine {
        match &mut self.state {
            State::Waiting(m) => m,
            State::Running(e) => &mut e.core_mut().m,
            State::Gone => unreachable!("never left gone"),
        }
    }

    fn into_memory(mut self) -> Machine {
        self.in_tx = false;
        self.take_machine()
            .expect("a clean shutdown of a running protocol cannot fail")
    }
}

/// A crash image recovered the way the machine recovers, then read: what the crash
/// tests check. It runs no transactions (the machine does).
#[derive(Debug)]
pub struct HwImage<M: Memory = VecMemory> {
    cfg: HwConfig,
    log: Area,
    mem: M,
    recovered: bool,
}

impl<M: Memory> HwImage<M> {
    /// An image in `mem`, not yet recovered.
    pub fn new(mem: M, log: Area, cfg: HwConfig) -> HwImage<M> {
        HwImage {
            cfg,
            log,
            mem,
            recovered: false,
        }
    }
}

fn image_only(log: Area) -> TxError {
    TxError::BadArea {
        structure: "crash image",
        addr: log.base,
        problem: "a crash image of a hardware protocol is recovered and read, not run".into(),
    }
}

impl<M: Memory> Protocol for HwImage<M> {
    type Mem = M;

    fn name(&self) -> &'static str {
        self.cfg.kind.name()
    }

    fn recover(&mut self) -> Result<Recovery, TxError> {
        let (r, _) = recover_on(&mut self.mem, &self.cfg, self.log)?;
        self.recovered = true;
        Ok(r)
    }

    fn begin(&mut self) -> Result<(), TxError> {
        Err(image_only(self.log))
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TxError> {
        if !self.recovered {
            return Err(TxError::NeedsRecovery);
        }
        Ok(self.mem.read(addr, buf)?)
    }

    fn write(&mut self, _addr: u64, _data: &[u8]) -> Result<(), TxError> {
        Err(TxError::NoTransaction { op: "write" })
    }

    fn commit(&mut self) -> Result<TxId, TxError> {
        Err(TxError::NoTransaction { op: "commit" })
    }

    fn abort(&mut self) -> Result<(), TxError> {
        Err(TxError::NoTransaction { op: "abort" })
    }

    fn flush(&mut self) -> Result<(), TxError> {
        Ok(())
    }

    fn durable(&self) -> TxId {
        0
    }

    fn in_transaction(&self) -> bool {
        false
    }

    fn stats(&self) -> TxStats {
        TxStats::default()
    }

    fn memory(&self) -> &M {
        &self.mem
    }

    fn memory_mut(&mut self) -> &mut M {
        &mut self.mem
    }

    fn into_memory(self) -> M {
        self.mem
    }
}

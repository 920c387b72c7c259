//! Hardware write-ahead logging in the cache (paper 001): H-WAL, EC-WAL and LOC-WAL, one
//! engine with two knobs.
//!
//! Every one keeps a single copy of each line in the caches, tagged with the
//! transaction that wrote it and a transaction-dirty flag (not yet in the memory log),
//! besides the ordinary dirty flag (not yet home). A transaction's dirty lines reach the
//! memory log when the LLC evicts them or when its speculation window ends; a line
//! reaches home (the in-place write) only once its transaction is persistent, by an
//! ordinary eviction, so the log is checkpointed lazily.
//!
//! - **H-WAL** ([`WalConfig::hwal`]): at `TxCommit` the transaction's remaining blocks are
//!   written to the log, the core waits for them (intra-transaction ordering), then a
//!   commit record, and waits again; the next transaction starts after the
//!   acknowledgment (inter-transaction ordering) — S-WAL's ordering, done by hardware.
//! - **EC-WAL** ([`WalConfig::ecwal`]): Eager Commit. No commit record: each block group
//!   carries its blocks' tags and the transaction's last block its block count (TxCnt),
//!   and recovery counts. `TxCommit` issues the log writes and returns; the next
//!   `TxBegin` waits until they are persistent (a speculation window of one).
//! - **LOC-WAL** ([`WalConfig::locwal`]): Eager Commit and Speculative Persistence. A
//!   speculation window of SD transactions (default 16) commits without waiting: their
//!   blocks stay in the cache unless a conflict evicts one, and only the newest version
//!   of a line written by several of them is logged at the window's end (write
//!   coalescing), the older writers counting it through a dependency pair `<Tx, Ty, n>`.
//!   An older version is kept in the LLC beside the newer (multi-versioned cache) until
//!   the newer's transaction commits, so an abort can restore it; when the set is full
//!   the LRU version — often the oldest — goes to the log (version overflow). The
//!   transaction after the window waits until the whole window is persistent (in-order
//!   commit: `LastCommittedTxID` advances a window at a time, and recovery cuts at the
//!   first transaction that did not commit).
//!
//! EC-WAL is LOC-WAL with SD = 1, as in the paper (its SD = 1 point, 0.353, equals
//! EC-WAL's, 6.4 % above H-WAL's 0.331).
//!
//! The Tx State Table tracks 128 transactions (§IV-B): when it is full, the oldest
//! persistent windows are checkpointed — their lines still owed home are written
//! there — and the log is truncated past them (one head write); the same happens when
//! the log itself is full.

mod abort;
mod checkpoint;
mod evict;
mod versions;
mod window;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use pmlab_model::Machine;

use crate::core::{ComputeModel, Core};
use crate::engine::{Engine, EngineStats, HwError};
use crate::ledger::Wait;
use crate::wal::format::{Layout, Reading};
use crate::wal::recovery::{CommitRule, RecoveryFaults};
use crate::wal::writer::LogWriter;

/// Transactions the Tx State Table tracks (LOC §IV-B: "128 transactions allowed").
pub const TRACKED_TXS: u64 = 128;
/// The default speculation degree (§V-A).
pub const DEFAULT_SD: u32 = 16;

/// Which protocol of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalConfig {
    /// How commit is decided: commit records (H-WAL) or counts (EC-WAL, LOC-WAL).
    pub rule: CommitRule,
    /// Speculation degree: transactions per speculation window.
    pub sd: u32,
    /// What a block of a block group is.
    pub reading: Reading,
    /// Deliberately broken recovery, for the crash tests.
    pub faults: RecoveryFaults,
    /// Strict ordering persists one block group at a time (see
    /// [`crate::HwConfig::serial_persist`]); speculation windows of more than one
    /// transaction are never serialized.
    pub serial: bool,
    /// With a speculation degree of 1 (H-WAL, EC-WAL), a persistent transaction's lines
    /// are written home at once and the next transaction waits for them (see
    /// [`crate::HwConfig::ordered_in_place`]).
    pub ordered_in_place: bool,
    /// With a speculation degree above 1, a persistent window's lines are written home
    /// and the next transaction waits for them (see
    /// [`crate::HwConfig::window_in_place`]).
    pub window_in_place: bool,
    /// Speculation windows of more than one transaction persisted one block group at a
    /// time too (see [`crate::HwConfig::serial_windows`]).
    pub serial_windows: bool,
}

impl WalConfig {
    /// H-WAL.
    pub fn hwal(reading: Reading) -> WalConfig {
        WalConfig {
            rule: CommitRule::Record,
            sd: 1,
            reading,
            faults: RecoveryFaults::default(),
            serial: false,
            ordered_in_place: false,
            window_in_place: false,
            serial_windows: false,
        }
    }

    /// EC-WAL: Eager Commit alone.
    pub fn ecwal(reading: Reading) -> WalConfig {
        WalConfig {
            rule: CommitRule::Count,
            ..WalConfig::hwal(reading)
        }
    }

    /// Whether the log writer has one block group in flight at a time: strict
    /// ordering (a speculation degree of 1) under `serial`, or `serial_windows`.
    pub fn serial_log(&self) -> bool {
        (self.serial && self.sd == 1) || self.serial_windows
    }

    /// LOC-WAL with speculation degree `sd`.
    pub fn locwal(sd: u32, reading: Reading) -> WalConfig {
        WalConfig {
            sd,
            ..WalConfig::ecwal(reading)
        }
    }
}

/// The running transaction.
#[derive(Debug, Default)]
struct Active {
    /// Its hardware ID, taken at its first store.
    hw: Option<u64>,
    /// Lines it stored to, in first-store order.
    lines: Vec<u64>,
    first: HashSet<u64>,
    /// Each line's bytes before its first store (the version an abort restores).
    undo: Vec<(u64, [u8; 64])>,
    /// Blocks of it already in the log (evicted before commit).
    logged: u32,
    /// The log group its first evicted block went to.
    first_seq: Option<u64>,
}

/// A committed transaction of the current speculation window.
#[derive(Debug)]
struct WinTx {
    hw: u64,
    lines: Vec<u64>,
    logged: u32,
    coalesced: u32,
    /// `ty -> n`: blocks coalesced into each later transaction's.
    pairs: BTreeMap<u64, u32>,
}

/// The current speculation window.
#[derive(Debug, Default)]
struct Window {
    txs: Vec<WinTx>,
    /// Its first hardware ID.
    first_hw: u64,
    /// The log's sequence number when it began: its groups are at or after it.
    first_seq: u64,
    /// Ended: its writes are issued and complete at `done_at`.
    ended: bool,
    done_at: u64,
}

/// A persistent window not yet truncated from the log.
#[derive(Debug)]
struct Tracked {
    first_hw: u64,
    /// One past its last hardware ID.
    end_hw: u64,
    first_seq: u64,
    /// The latest completion of a home write of one of its versions.
    home_done: u64,
}

/// The engine of H-WAL, EC-WAL and LOC-WAL.
pub struct HwWal {
    core: Core,
    cfg: WalConfig,
    log: LogWriter,
    next_hw: u64,
    durable_hw: u64,
    active: Option<Active>,
    window: Window,
    tracked: VecDeque<Tracked>,
    /// Bytes of the older versions the LLC keeps, by `(line, tx)`.
    versions: HashMap<(u64, u64), [u8; 64]>,
    /// Versions that left the cache still owed home, by `(line, tx)`; the newest of a
    /// line is written home once its transaction is persistent.
    owed: BTreeMap<(u64, u64), [u8; 64]>,
    stats: EngineStats,
}

impl HwWal {
    /// A fresh instance over `m`, its memory log in `[log_base, log_base + log_len)`
    /// (formatted here).
    pub fn format(
        m: Machine,
        log_base: u64,
        log_len: u64,
        cfg: WalConfig,
        compute: ComputeModel,
    ) -> Result<HwWal, crate::HwSetupError> {
        let layout = Layout::new(log_base, log_len, cfg.reading)
            .ok_or(crate::HwSetupError::LogArea(log_base, log_len))?;
        let mut core = Core::new(m, compute)?;
        let log = LogWriter::format(&mut core.m, layout, 1);
        Ok(HwWal::with_log(
            core,
            cfg,
            log.with_serial(cfg.serial_log()),
        ))
    }

    /// An instance continuing after a recovery left `head` in the log.
    pub fn resume(
        m: Machine,
        layout: Layout,
        head: crate::wal::format::Head,
        cfg: WalConfig,
        compute: ComputeModel,
    ) -> Result<HwWal, crate::HwSetupError> {
        let core = Core::new(m, compute)?;
        let log = LogWriter::new(layout, head).with_serial(cfg.serial_log());
        Ok(HwWal::with_log(core, cfg, log))
    }

    fn with_log(core: Core, cfg: WalConfig, log: LogWriter) -> HwWal {
        let base = log.head().base_tx;
        HwWal {
            core,
            cfg,
            window: Window {
                first_hw: base,
                first_seq: log.next_seq(),
                ..Window::default()
            },
            log,
            next_hw: base,
            durable_hw: base - 1,
            active: None,
            tracked: VecDeque::new(),
            versions: HashMap::new(),
            owed: BTreeMap::new(),
            stats: EngineStats::default(),
        }
    }

    /// The log's layout.
    pub fn layout(&self) -> &Layout {
        self.log.layout()
    }

    /// The configuration.
    pub fn config(&self) -> &WalConfig {
        &self.cfg
    }

    fn bpl(&self) -> u32 {
        self.log.layout().blocks_per_line()
    }

    /// One access of `line` and the consequences: evictions handled, a refill of a
    /// version owed home taking up its obligation again.
    fn access(&mut self, line: u64) -> Result<(), HwError> {
        let served = self.core.access(line)?;
        self.drain()?;
        if served == self.core.h.levels() {
            self.refill(line);
        }
        Ok(())
    }

    /// Lands the window's writes if they are done by now.
    fn poll(&mut self) -> Result<(), HwError> {
        if self.window.ended && self.core.m.cycles() >= self.window.done_at {
            self.complete_window()?;
        }
        Ok(())
    }
}

impl Engine for HwWal {
    fn core(&self) -> &Core {
        &self.core
    }

    fn core_mut(&mut self) -> &mut Core {
        &mut self.core
    }

    fn begin(&mut self) -> Result<(), HwError> {
        self.core.instruction();
        let per_tx = self.core.compute.per_tx;
        self.core.compute(per_tx);
        if self.window.ended {
            // The CRL stalls a new transaction until the window is persistent (and,
            // where the in-place phase is ordered, home).
            let stalled = self.core.stats().persist_stall_cycles;
            self.core.persist_wait(self.window.done_at, Wait::Window);
            self.stats.barriers += 1;
            self.complete_window()?;
            self.stats.window_wait_cycles += self.core.stats().persist_stall_cycles - stalled;
        }
        self.active = Some(Active::default());
        Ok(())
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), HwError> {
        self.poll()?;
        let c = self.core.compute.per_access;
        self.core.compute(c);
        for (line, _, off, n) in Core::pieces(addr, buf.len()) {
            self.access(line)?;
            let a = addr + off as u64;
            self.core.view(a, &mut buf[off..off + n]);
        }
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), HwError> {
        self.poll()?;
        let c = self.core.compute.per_access;
        self.core.compute(c);
        for (line, _, off, n) in Core::pieces(addr, data.len()) {
            self.access(line)?;
            self.store_line(line)?;
            let a = addr + off as u64;
            self.core.set_view(a, &data[off..off + n]);
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<Option<u64>, HwError> {
        self.core.instruction();
        self.commit_active()
    }

    fn abort(&mut self) -> Result<(), HwError> {
        self.core.instruction();
        self.abort_active()
    }

    fn flush(&mut self) -> Result<(), HwError> {
        self.core.instruction();
        if !self.window.ended && !self.window.txs.is_empty() {
            self.end_window()?;
        }
        if self.window.ended {
            self.core.persist_wait(self.window.done_at, Wait::Flush);
            self.stats.barriers += 1;
            self.complete_window()?;
        }
        Ok(())
    }

    fn durable_hw(&self) -> u64 {
        if self.window.ended && self.core.m.cycles() >= self.window.done_at {
            self.window.txs.last().map_or(self.durable_hw, |t| t.hw)
        } else {
            self.durable_hw
        }
    }

    fn stats(&self) -> EngineStats {
        let mut s = self.stats.clone();
        s.log_writes = self.log.stats().lines + self.log.stats().heads;
        s.versions_kept = self.core.h.stats().versions_kept;
        s
    }

    fn shutdown(mut self: Box<Self>) -> Result<Machine, HwError> {
        if self.active.is_some() {
            self.abort_active()?;
        }
        self.flush()?;
        self.checkpoint_all()?;
        Ok(self.core.m)
    }
}

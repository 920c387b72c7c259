//! The durable-transaction interface: what every transaction protocol offers the
//! structures and workloads above it, whether it is software over the spine (redo and
//! undo logging here) or a feature of the machine model (OSP's shadow paging, a
//! hardware undo log, LOC's WAL variants, Kiln: `crates/hwtx`, to come).
//!
//! # The life of a protocol instance
//!
//! A protocol owns the memory it runs on ([`Protocol::Mem`]: a `VecMemory`, a native
//! region, or the machine model itself). It is created in one of two ways, both
//! specific to the implementation: *formatted* over fresh memory (ready at once), or
//! *attached* to memory that holds its metadata from an earlier run — which may have
//! crashed. An attached instance must [`Protocol::recover`] before its first
//! [`Protocol::begin`] (until then `begin` fails with [`TxError::NeedsRecovery`]).
//!
//! Then, one transaction at a time:
//!
//! ```text
//! begin ── read / write (transactional stores) / declare ──┬── commit -> TxId
//!                                                         └── abort
//! ```
//!
//! # The contract every implementation keeps
//!
//! - **Isolation from the durable state until commit.** A transaction's writes are
//!   visible to its own [`Protocol::read`]s at once, and become durable atomically,
//!   after every earlier committed transaction's, when it commits.
//! - **Commit and acknowledgment.** [`Protocol::commit`] returns the transaction's
//!   [`TxId`]: 1 for the first commit of this instance, then 2, 3, ... (aborted
//!   transactions take no number). A synchronous protocol (both software logs) has made
//!   the transaction durable when `commit` returns. An asynchronous one (LOC's
//!   Speculative Persistence, where `TxCommit` retires before the log writes finish)
//!   may not have: [`Protocol::durable`] says up to which id durability is
//!   *acknowledged* (LOC's `LastCommittedTxID` register), and [`Protocol::flush`]
//!   (LOC's `TxFlush`) waits until every committed transaction is durable.
//! - **Crash.** After a crash at any moment, recovery yields the state of some prefix
//!   of the committed transactions that contains every acknowledged one. This is the
//!   oracle every crash test holds recovered images against.
//! - **Abort is the same everywhere.** [`Protocol::abort`] discards every write of the
//!   running transaction: afterwards every read returns what it returned before
//!   `begin`, a crash at any moment during or after the abort recovers as if the
//!   transaction had never begun, no transaction is open, and no [`TxId`] was used.
//!   `abort` outside a transaction is [`TxError::NoTransaction`]. A write that fails
//!   (a full log, an address outside the data area) changes nothing and leaves the
//!   transaction open: the caller aborts it (or, if it can, carries on).
//! - **Misuse is an error, never a panic:** `begin` inside a transaction is
//!   [`TxError::InTransaction`]; `write`, `declare` or `commit` outside one is
//!   [`TxError::NoTransaction`].
//!
//! [`crate::conformance`] checks this contract for any implementation; the software
//! protocols run it in their tests, and a hardware protocol runs the same checks.
//!
//! # Where hardware protocols plug in
//!
//! A hardware protocol implements this trait with `Mem = pmlab_model::Machine`: `begin`,
//! `commit` and `abort` execute the machine's `TxBegin`/`TxCommit`/`TxAbort`, `write`
//! is the machine's transactional store (through OSP's extended TLB, or into LOC's
//! tracked cache lines), `flush` is `TxFlush`, `read` is an ordinary load through the
//! machine, and `recover` runs the hardware's recovery (OSP's consistent-state table
//! and journal; LOC's scan of the memory log area) on the machine after a crash. The
//! workloads (`pmlab-workloads`) and the crash explorer and benchmark drivers
//! (`pmlab-txcheck`) are generic over this trait, so they run unchanged.

use pmlab_spine::{Addr, Memory};

use crate::error::TxError;

/// The number of a committed transaction: 1 for the first commit of a protocol
/// instance, then 2, 3, ...; 0 means "none".
pub type TxId = u64;

/// A range of a protocol's memory: a log area, a data area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Area {
    /// First byte.
    pub base: Addr,
    /// Bytes.
    pub len: u64,
}

impl Area {
    /// `[base, base + len)`.
    pub const fn new(base: Addr, len: u64) -> Area {
        Area { base, len }
    }

    /// One past the last byte.
    pub fn end(&self) -> Addr {
        self.base + self.len
    }

    /// Whether `[addr, addr + len)` lies inside the area.
    pub fn contains(&self, addr: Addr, len: u64) -> bool {
        addr >= self.base && addr.checked_add(len).is_some_and(|e| e <= self.end())
    }
}

/// What a protocol counted since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Committed transactions.
    pub commits: u64,
    /// Aborted transactions.
    pub aborts: u64,
    /// Transactional stores.
    pub writes: u64,
    /// Bytes of transactional stores.
    pub write_bytes: u64,
    /// Bytes written to the protocol's log (records and headers; 0 for protocols
    /// without a log).
    pub log_bytes: u64,
}

/// What [`Protocol::recover`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Whether recovery changed data in place (replayed a redo log, rolled back an
    /// undo log, ...).
    pub repaired: bool,
    /// Log entries (records, blocks) recovery replayed or undid.
    pub entries: u64,
    /// A one-line account for people ("replayed transaction 17: 3 records").
    pub note: String,
}

/// A durable-transaction protocol over a memory: see the module documentation for the
/// contract every implementation keeps.
pub trait Protocol {
    /// The memory the protocol runs on.
    type Mem: Memory;

    /// The protocol's short name on command lines and in results (`redo`, `undo`, ...).
    fn name(&self) -> &'static str;

    /// Brings memory that may have crashed to a committed state (see the module
    /// documentation) and makes the instance ready. Idempotent; a crash during
    /// recovery is recovered by recovering again. Refused inside a transaction.
    fn recover(&mut self) -> Result<Recovery, TxError>;

    /// Starts a transaction.
    fn begin(&mut self) -> Result<(), TxError>;

    /// Reads `buf.len()` bytes at `addr` as the running transaction sees them, or as
    /// the committed state is outside a transaction.
    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError>;

    /// A transactional store of `data` at `addr`.
    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError>;

    /// Says that the running transaction is about to write `ranges` (PMDK's
    /// `pmemobj_tx_add_range`): a protocol may prepare for all of them at once (the
    /// undo log snapshots them under one fence). A pure hint: writing elsewhere stays
    /// allowed, and a protocol may ignore it (the default).
    fn declare(&mut self, ranges: &[(Addr, u64)]) -> Result<(), TxError> {
        let _ = ranges;
        if self.in_transaction() {
            Ok(())
        } else {
            Err(TxError::NoTransaction { op: "declare" })
        }
    }

    /// Commits the running transaction and returns its id.
    fn commit(&mut self) -> Result<TxId, TxError>;

    /// Discards the running transaction (see the module documentation).
    fn abort(&mut self) -> Result<(), TxError>;

    /// Returns once every committed transaction is durable (`TxFlush`). Synchronous
    /// protocols have nothing to wait for.
    fn flush(&mut self) -> Result<(), TxError>;

    /// The last transaction whose durability is acknowledged (0 if none).
    fn durable(&self) -> TxId;

    /// Whether a transaction is running.
    fn in_transaction(&self) -> bool;

    /// Counters since the instance was created.
    fn stats(&self) -> TxStats;

    /// The memory underneath: for its persist counters, and for crash recording on the
    /// machine model. Writing transactional data through it bypasses the protocol.
    fn memory(&self) -> &Self::Mem;

    /// The memory underneath, mutably (see [`Protocol::memory`]).
    fn memory_mut(&mut self) -> &mut Self::Mem;

    /// Gives the memory back (a clean shutdown: attach to it again to continue).
    fn into_memory(self) -> Self::Mem
    where
        Self: Sized;

    /// Reads a little-endian `u64` (see [`Protocol::read`]).
    fn read_u64(&mut self, addr: Addr) -> Result<u64, TxError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Writes a little-endian `u64` transactionally.
    fn write_u64(&mut self, addr: Addr, value: u64) -> Result<(), TxError> {
        self.write(addr, &value.to_le_bytes())
    }

    /// Reads a little-endian `u32`.
    fn read_u32(&mut self, addr: Addr) -> Result<u32, TxError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Writes a little-endian `u32` transactionally.
    fn write_u32(&mut self, addr: Addr, value: u32) -> Result<(), TxError> {
        self.write(addr, &value.to_le_bytes())
    }
}

/// Where an instance is in its life (shared bookkeeping of the implementations here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Attached to memory that may have crashed: recover first.
    NeedsRecovery,
    /// Ready for `begin`.
    Idle,
    /// A transaction is running.
    InTx,
}

impl Phase {
    /// Checks that a transaction may begin (or recovery's reads and writes run).
    pub(crate) fn check_begin(self) -> Result<(), TxError> {
        match self {
            Phase::NeedsRecovery => Err(TxError::NeedsRecovery),
            Phase::Idle => Ok(()),
            Phase::InTx => Err(TxError::InTransaction),
        }
    }

    /// Checks that `op` runs inside a transaction.
    pub(crate) fn check_in_tx(self, op: &'static str) -> Result<(), TxError> {
        match self {
            Phase::InTx => Ok(()),
            _ => Err(TxError::NoTransaction { op }),
        }
    }

    /// Checks that reads may run: anywhere but before recovery.
    pub(crate) fn check_read(self) -> Result<(), TxError> {
        match self {
            Phase::NeedsRecovery => Err(TxError::NeedsRecovery),
            _ => Ok(()),
        }
    }
}

//! What every protocol of paper 001 implements under the transaction interface
//! ([`crate::HwProtocol`] adds the interface's bookkeeping: phases, transaction numbers,
//! bounds, recovery).

use pmlab_model::Machine;

use crate::core::Core;

/// Why an operation of a protocol failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HwError {
    /// Kiln: every way of an NV-LLC set holds an uncommitted version, so the
    /// transaction's writes do not fit the cache (Kiln then falls back to software,
    /// which pmlab does not model).
    #[error("NV-LLC set of line {line:#x} full of uncommitted versions (Kiln's overflow)")]
    Overflow {
        /// The line that found no way.
        line: u64,
    },
    /// The memory log cannot hold the running speculation window even after every
    /// durable transaction was checkpointed.
    #[error("the memory log is too small for one speculation window")]
    LogFull,
    /// A transaction's block count does not fit TxCnt's 16 bits.
    #[error("transaction of {0} blocks: TxCnt has 16 bits")]
    TooManyBlocks(u64),
}

impl From<crate::hierarchy::Overflow> for HwError {
    fn from(o: crate::hierarchy::Overflow) -> Self {
        HwError::Overflow { line: o.line }
    }
}

/// What a protocol counted, beyond the core and the machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStats {
    /// Transactions that wrote (held a hardware transaction ID) and committed.
    pub write_commits: u64,
    /// Aborted transactions.
    pub aborts: u64,
    /// Speculation windows (or, for strict protocols, commits) made persistent.
    pub windows: u64,
    /// Data lines written to the memory log (or into the NV-LLC at commit).
    pub log_lines: u64,
    /// Memory line writes of the log (group metadata, slots, records, heads).
    pub log_writes: u64,
    /// Writes of data to home locations.
    pub home_writes: u64,
    /// Blocks whose log write was saved by coalescing into a later transaction's.
    pub coalesced_blocks: u64,
    /// Older versions the LLC kept for a later writer.
    pub versions_kept: u64,
    /// Older versions evicted to the log because the set was full (version overflow).
    pub version_overflows: u64,
    /// Truncations forced by a full Tx State Table or log.
    pub checkpoints: u64,
    /// `clflush`es (S-WAL).
    pub clflushes: u64,
    /// Fences (S-WAL) or persist barriers the core waited at.
    pub barriers: u64,
    /// Cycles `TxBegin` stalled until the previous speculation window was persistent,
    /// and home where the in-place phase is ordered (H-WAL, EC-WAL, LOC-WAL: "CRL stalls new transactions until the current
    /// speculation window completes", LOC §IV-B; this is also where in-order commit and
    /// a full window of SD transactions cost time, and the only place: no other wait
    /// of a transaction on another is modelled).
    pub window_wait_cycles: u64,
    /// Of `log_lines`, those written because the LLC evicted a block not yet logged
    /// (a running transaction's, a committed one's of the window, or an older version
    /// crowded out: version overflow), rather than at the window's end.
    pub evicted_log_lines: u64,
}

/// One protocol's machine-level behaviour.
pub trait Engine: Send {
    /// The core.
    fn core(&self) -> &Core;
    /// The core, mutably.
    fn core_mut(&mut self) -> &mut Core;
    /// `TxBegin`.
    fn begin(&mut self) -> Result<(), HwError>;
    /// A load of `buf.len()` bytes at `addr`.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), HwError>;
    /// A transactional store.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), HwError>;
    /// `TxCommit`; the hardware ID of a transaction that wrote, `None` for one that did
    /// not.
    fn commit(&mut self) -> Result<Option<u64>, HwError>;
    /// `TxAbort`.
    fn abort(&mut self) -> Result<(), HwError>;
    /// `TxFlush`: returns once every committed transaction is persistent.
    fn flush(&mut self) -> Result<(), HwError>;
    /// The last hardware transaction ID known persistent with all before it
    /// (`LastCommittedTxID`).
    fn durable_hw(&self) -> u64;
    /// Counters.
    fn stats(&self) -> EngineStats;
    /// A clean shutdown: every committed transaction in its home locations, the log
    /// empty; gives the machine back.
    fn shutdown(self: Box<Self>) -> Result<Machine, HwError>;
}

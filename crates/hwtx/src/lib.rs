//! pmlab-hwtx: durable-transaction protocols built into the machine model's hardware,
//! each behind the transaction interface ([`pmlab_tx::Protocol`]) with the machine as
//! its memory, so the workloads and the crash explorer run them unchanged. The model
//! stays a model: these are machine features built on its hooks (the software TLB miss
//! handler, physical accesses, the memory port, crash recording).
//!
//! Paper 000 (OSP):
//!
//! - [`undo`]: the hardware undo log paper 000 compares with: the first
//!   transactional store to a line logs the old line through the write-combining
//!   buffers and waits for it to be durable; commit flushes the data and marks the
//!   transaction committed.
//! - [`osp`]: optimized shadow paging: TLB entries that map a virtual page to two
//!   frames line by line (committed and updated bitmaps), a consistent state table kept
//!   durable through a lightweight journal or a super page, page consolidation when an
//!   entry leaves the TLB, and recovery.
//!
//! Both count CPU flushes as paper 000 does (§3.1): cache-line flushes and
//! write-combining buffer flushes, by source ([`CpuFlushes`]).
//!
//! Paper 001 (Lu, Shu, Sun, Mutlu, "Loose-Ordering Consistency for Persistent Memory",
//! ICCD 2014) compares write-ahead logging protocols that differ in how strictly they
//! order writes to persistent memory:
//!
//! | protocol | module | commit | ordering |
//! |---|---|---|---|
//! | baseline | [`baseline`] | none (no persistence) | none |
//! | S-WAL | [`wal::swal`] | commit record, by software | `clflush` + `mfence` after the log, after the record |
//! | H-WAL | [`loc`] | commit record, by hardware | waits for the log, then the record |
//! | EC-WAL | [`loc`] | Eager Commit: counts in block groups | next transaction waits for the log |
//! | LOC-WAL | [`loc`] | Eager Commit + Speculative Persistence | a window of SD transactions at a time |
//! | Kiln | [`kiln`] | non-volatile LLC, commit register | commit flushes L1/L2 into the NV-LLC |
//! | LOC-Kiln | [`kiln`] | NV-LLC + Speculative Persistence | a window of SD transactions at a time |
//!
//! All of paper 001's run on one [`core::Core`]: the machine model (its clock, its
//! memory controller with per-bank queues, its coherent and durable images, its crash
//! recording) and a tagged cache hierarchy of the machine's configured levels
//! ([`hierarchy`]), which carries the transactional tags the paper adds. [`HwProtocol`]
//! puts each behind pmlab's transaction interface; recovery of each runs over any
//! memory, so a crash image is recovered exactly as the machine would.

pub mod baseline;
pub mod core;
pub mod engine;
pub mod flushes;
pub mod hierarchy;
pub mod kiln;
pub mod ledger;
pub mod loc;
pub mod osp;
mod phase;
pub mod protocol;
pub mod undo;
pub mod wal;

pub use core::{ComputeModel, Core, CoreError, CoreStats};
pub use engine::{Engine, EngineStats, HwError};
pub use flushes::{CpuFlushes, Source};
pub use ledger::{CycleLedger, Wait};
pub use loc::{HwWal, WalConfig};
pub use osp::{Atomicity, Consolidation, OspConfig, OspFault, OspProtocol, OspStats};
pub use protocol::{HwConfig, HwFaults, HwImage, HwKind, HwProtocol};
pub use undo::{HwUndoFault, HwUndoProtocol};
pub use wal::format::Reading;

/// Why a protocol instance could not be set up on a machine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HwSetupError {
    /// The machine cannot carry the protocols.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The log area is unaligned or too small.
    #[error("log area at {0:#x} of {1} bytes: not line-aligned, or too small for two block groups")]
    LogArea(u64, u64),
}

//! pmlab-hwtx: durable-transaction protocols built into the machine model's hardware,
//! each behind the transaction interface ([`pmlab_tx::Protocol`]) with
//! `Mem = pmlab_model::Machine`, so the workloads and the crash explorer run them
//! unchanged.
//!
//! - [`undo`]: the hardware undo log paper 000 (OSP) compares with: the first
//!   transactional store to a line logs the old line through the write-combining
//!   buffers and waits for it to be durable; commit flushes the data and marks the
//!   transaction committed.
//! - [`osp`]: paper 000's optimized shadow paging: TLB entries that map a virtual page
//!   to two frames line by line (committed and updated bitmaps), a consistent state
//!   table kept durable through a lightweight journal or a super page, page
//!   consolidation when an entry leaves the TLB, and recovery.
//!
//! Both count CPU flushes as paper 000 does (§3.1): cache-line flushes and
//! write-combining buffer flushes, by source ([`CpuFlushes`]).

pub mod flushes;
pub mod osp;
mod phase;
pub mod undo;

pub use flushes::{CpuFlushes, Source};
pub use osp::{Atomicity, Consolidation, OspConfig, OspFault, OspProtocol, OspStats};
pub use undo::{HwUndoFault, HwUndoProtocol};

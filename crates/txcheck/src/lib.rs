//! pmlab-txcheck: the drivers of pmlab's durable transactions — every workload of
//! `pmlab-workloads` under every transaction protocol, written once against
//! [`pmlab_tx::Protocol`]:
//!
//! - [`crash`]: `pmlab tx crashtest`, crash exploration on the machine model (every
//!   crash point of every transaction, and of recovery) against each workload's checker
//!   and a committed-prefix oracle.
//! - [`bench`](mod@bench): `pmlab tx bench`, native runs on real regions beside PMDK ([`pmdk`]).
//! - [`pool`]: pools on native regions, made once and opened (and refused) by name.
//! - [`stress`]: `pmlab tx stress`, the native kill test (SIGKILL at random moments,
//!   then recovery, the checker and the acknowledged-prefix oracle).
//!
//! The protocols reach the drivers through [`proto::Harness`], which a hardware
//! protocol of the machine model implements to run under the same drivers.

pub mod bench;
pub mod crash;
pub mod hw;
pub mod pmdk;
pub mod pool;
pub mod proto;
pub mod stress;

pub use hw::HwHarness;
pub use proto::{Harness, ProtocolKind, RedoHarness, UndoHarness};

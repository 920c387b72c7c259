//! pmlab-txcheck: the drivers of pmlab's durable transactions — every workload of
//! `pmlab-workloads` under every transaction protocol, written once against
//! [`pmlab_tx::Protocol`]:
//!
//! - [`crash`]: `pmlab tx crashtest`, crash exploration on the machine model (every
//!   crash point of every transaction, and of recovery) against each workload's checker
//!   and a committed-prefix oracle.
//!
//! The protocols reach the drivers through [`proto::Harness`], which a hardware
//! protocol of the machine model implements to run under the same drivers.

pub mod crash;
pub mod hw;
pub mod proto;

pub use hw::HwHarness;
pub use proto::{Harness, ProtocolKind, RedoHarness, UndoHarness};

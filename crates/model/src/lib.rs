//! pmlab-model: the machine model — simulated hardware behind the spine.
//!
//! A [`Machine`] implements [`pmlab_spine::Memory`]: every load and store goes through a
//! TLB ([`tlb`]), page tables ([`paging`]) and a tag-only cache hierarchy
//! ([`cache_levels`]) to a memory device ([`device`]), while a persistence domain
//! ([`persist`]) keeps the current (coherent) image and the durable one. Cycles follow a
//! simple in-order CPU: one cycle per instruction plus the latency of whatever served
//! each access.
//!
//! Crash testing stands on three calls: [`Machine::crash`] (exactly the durable image;
//! pending `clwb`/`clflushopt` write-backs not applied), [`Machine::crash_with`] (a
//! random subset of them applied) and [`Machine::record`] + [`Recording::explore`]
//! (every crash point of a run, each image given to a checker). Chaos mode
//! ([`ChaosConfig`]) writes random dirty lines back between operations to explore
//! write-back orders. All randomness is xoshiro256++ (`rand_xoshiro`), seeded.

pub mod adapters;
pub mod cache_levels;
pub mod config;
pub mod device;
pub mod error;
pub mod machine;
pub mod paging;
pub mod persist;
pub mod recording;
pub mod tlb;

pub use adapters::dinero_hierarchy;
pub use cache_levels::{CacheLevels, Uncached};
pub use config::{
    CacheLevelConfig, ChaosConfig, CpuConfig, MachineConfig, PersistConfig, ReplacementPolicy,
    TranslationConfig,
};
pub use device::{Device, DeviceConfig, Endurance};
pub use error::ConfigError;
pub use machine::{Machine, MachineStats};
pub use paging::{DemandPages, IdentityPages, PageSize, PageTables};
pub use persist::{DurableState, Event, PendingFlush, PointKind};
pub use recording::{
    CrashFailure, CrashImage, ExploreOptions, ExploreReport, Granularity, PendingChoice, Recording,
};
pub use tlb::{Tlb, TlbConfig, TlbStats};

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
//!
//! A crash test of a tiny protocol (publish a record, then a flag that covers it):
//!
//! ```
//! use pmlab_model::{ExploreOptions, Machine, MachineConfig};
//! use pmlab_spine::Memory;
//!
//! let mut m = Machine::new(MachineConfig::loc(1 << 20)).unwrap();
//! let ((), run) = m.record(|m| {
//!     m.write_u64(0, 42).unwrap();
//!     m.persist(0, 8).unwrap(); // the record is durable ...
//!     m.write_u64(64, 1).unwrap();
//!     m.persist(64, 8).unwrap(); // ... before the flag that covers it
//! });
//! let report = run.explore(&ExploreOptions::default(), |crash| {
//!     let mut mem = crash.memory();
//!     let flag = mem.read_u64(64).unwrap();
//!     let record = mem.read_u64(0).unwrap();
//!     if flag == 1 && record != 42 { Err("flag without record".into()) } else { Ok(()) }
//! });
//! assert!(report.passed());
//! ```
//!
//! Stores to one 64-byte line are never torn: chaos write-backs happen between spine
//! operations and a store piece never spans lines, so a crash shows all of a store's
//! bytes in a line or none (x86 promises only aligned 8-byte atomicity).
//!
//! With paging on (`translation.identity = false`) the images are physical memory;
//! with the identity translation (the default) physical and spine addresses coincide.

pub mod adapters;
pub mod cache_levels;
pub mod config;
pub mod device;
pub mod error;
pub mod machine;
pub mod os_pages;
pub mod paging;
pub mod persist;
pub mod recording;
pub mod segment_pages;
pub mod tlb;

pub use adapters::dinero_hierarchy;
pub use cache_levels::{CacheLevels, Uncached};
pub use config::{
    CacheLevelConfig, ChaosConfig, CpuConfig, MAX_CACHE_LEVELS, MAX_CACHE_SIZE, MAX_MEMORY_SIZE,
    MachineConfig, OsCostConfig, PersistConfig, PlacementConfig, ReplacementPolicy,
    TranslationConfig,
};
pub use device::{Device, DeviceConfig, Endurance};
pub use error::ConfigError;
pub use machine::{DEFAULT_RECORDING_LIMIT, Machine, MachineStats, SwitchCost};
pub use os_pages::OsPages;
pub use paging::{DemandPages, IdentityPages, PageSize, PageTables};
pub use persist::{DurableState, Event, PendingFlush, PointKind};
pub use recording::{
    CrashFailure, CrashImage, ExploreOptions, ExploreReport, Granularity, PendingChoice, Recording,
    RecordingOverflow,
};
pub use segment_pages::SharedSegments;
pub use tlb::{MAX_TLB_ENTRIES, Tlb, TlbConfig, TlbStats};

//! pmlab-cache: a trace-driven cache and cache-hierarchy simulator whose counters agree
//! exactly with Dinero IV (version 7/8) for the features it implements.
//!
//! - [`HierarchyConfig`] / [`CacheConfig`]: up to five levels, each unified or split into
//!   instruction and data caches; any size, block size and associativity (direct-mapped
//!   to fully associative); LRU, FIFO, random (seeded xoshiro256++) or tree pseudo-LRU;
//!   write-back or write-through; write-allocate or not; optional compulsory / capacity /
//!   conflict classification. Caches are physically indexed and tagged.
//! - [`Hierarchy`]: the simulator; [`Hierarchy::access`] per reference (returning the
//!   deepest level that served it, for timing models), [`Hierarchy::flush_block`] for
//!   cache-line flushes, an optional log of writes reaching memory, and per-cache
//!   [`CacheStats`].
//! - [`MultiL2`]: one pass over a trace that simulates the level-1 caches once and feeds
//!   their traffic to several alternative lower hierarchies.
//! - [`dinero_args`] and [`report`]: Dinero IV's command line and its text report.
//!
//! Dinero IV semantics that matter for exact agreement, all reproduced: a reference that
//! spans blocks is split into one access per block (counted under "Multi-block refs");
//! a write miss in a write-allocate cache fetches the block only when the write does not
//! cover it entirely; dirty victims go to the level below as writes; traffic sent below
//! is handled fetch first, then write-through, then write-back; at the end of a run every
//! dirty block of the data side is copied back ([`Hierarchy::finish`]); the classification
//! shadows each cache by a fully associative cache of the same size and the same
//! replacement policy (LRU for tree-PLRU) plus an infinite cache.

pub mod bench;
mod cache;
pub mod config;
pub mod dinero_args;
pub mod dinero_run;
mod fasthash;
pub mod hierarchy;
mod l1hits;
pub mod multi;
pub mod report;
mod shadow;
pub mod stats;

pub use config::{CacheConfig, ConfigError, HierarchyConfig, Level, MAX_LEVELS, Replacement};
pub use dinero_args::{ArgError, DineroArgs};
pub use hierarchy::Hierarchy;
pub use multi::MultiL2;
pub use stats::{CacheStats, KindCounts, NamedStats};

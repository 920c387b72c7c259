//! The machine's view of pmlab's cache simulator (`pmlab-cache`).

use pmlab_cache::{CacheConfig, Hierarchy, HierarchyConfig, Level, Replacement};
use pmlab_trace::Kind;

use crate::cache_levels::CacheLevels;
use crate::config::{CacheLevelConfig, ReplacementPolicy};
use crate::error::ConfigError;

/// The Dinero IV-exact hierarchy of `pmlab-cache`, built from the machine's levels
/// (unified levels; the machine issues data references only), with its log of memory
/// writes switched on.
pub fn dinero_hierarchy(levels: &[CacheLevelConfig], seed: u64) -> Result<Hierarchy, ConfigError> {
    let config = HierarchyConfig {
        levels: levels
            .iter()
            .map(|c| {
                Level::Unified(CacheConfig {
                    size: c.size,
                    block_size: c.block_size,
                    assoc: c.assoc,
                    repl: match c.repl {
                        ReplacementPolicy::Lru => Replacement::Lru,
                        ReplacementPolicy::Fifo => Replacement::Fifo,
                        ReplacementPolicy::Random => Replacement::Random,
                        ReplacementPolicy::TreePlru => Replacement::TreePlru,
                    },
                    write_back: c.write_back,
                    write_allocate: c.write_allocate,
                    ccc: false,
                })
            })
            .collect(),
    };
    let mut h =
        Hierarchy::new(&config, seed).map_err(|e| ConfigError::field("caches", e.to_string()))?;
    h.set_memory_write_log(true);
    Ok(h)
}

impl CacheLevels for Hierarchy {
    fn levels(&self) -> usize {
        Hierarchy::levels(self)
    }

    fn access(&mut self, kind: Kind, addr: u64, size: u32) -> usize {
        usize::from(Hierarchy::access(self, kind, addr, size))
    }

    fn flush_block(&mut self, addr: u64, invalidate: bool) {
        Hierarchy::flush_block(self, addr, invalidate);
    }

    fn drain_memory_writes(&mut self, out: &mut Vec<(u64, u32)>) {
        Hierarchy::drain_memory_writes(self, out);
    }
}

//! The machine's view of pmlab's OS model (`pmlab-os`): page tables whose frames the
//! OS's placement policies (Kessler & Hill's page coloring, bin hopping, ...) choose.

use pmlab_os::{CacheGeometry, Os, OsConfig, PolicyKind};
use pmlab_spine::Asid;

use crate::config::MachineConfig;
use crate::error::ConfigError;
use crate::paging::PageTables;

/// The OS model's page tables: a page is mapped on its first touch by the OS's
/// placement policy; the address-space id is the OS's process id.
///
/// The OS model has no backing store: when it reclaims a frame for another page, the
/// evicted page's bytes are gone (the frame's bytes now belong to the new page), and its
/// next touch maps it afresh. Machines that keep data should give the OS at least as
/// many frames as they touch pages. The OS's LRU list is updated on TLB misses only: the
/// hardware sets accessed bits, the OS does not see TLB hits.
pub struct OsPages {
    os: Os,
    seen_evictions: u64,
}

impl OsPages {
    /// Wraps an OS model.
    pub fn new(os: Os) -> Self {
        Self {
            seen_evictions: os.counters().evictions,
            os,
        }
    }

    /// The OS of a machine configuration with `translation.placement` set: all of
    /// physical memory as frames, bins of the last-level cache (the cache careful
    /// placement targets, as in Kessler & Hill).
    pub fn from_config(config: &MachineConfig) -> Result<Option<Self>, ConfigError> {
        let Some(p) = &config.translation.placement else {
            return Ok(None);
        };
        let bad = |field: &str, e: String| ConfigError::field(field, e);
        let policy: PolicyKind = p
            .policy
            .parse()
            .map_err(|e| bad("translation.placement.policy", e))?;
        let page = pmlab_os::PageSize::new(config.translation.page_size.bytes())
            .map_err(|e| bad("translation.page_size", e.to_string()))?;
        let os_config = OsConfig::from_bytes(config.memory_size, p.pool_size, page, p.seed)
            .map_err(|e| bad("translation.placement.pool_size", e.to_string()))?;
        let (size, assoc) = match config.caches.last() {
            Some(llc) => (llc.size, llc.assoc),
            None => (page.bytes(), 1),
        };
        let geometry = CacheGeometry::new(size, assoc as u32, page)
            .map_err(|e| bad("caches", format!("last level as placement target: {e}")))?;
        let os = Os::new(os_config, policy.build(geometry, p.seed))
            .map_err(|e| bad("translation.placement", e.to_string()))?;
        Ok(Some(Self::new(os)))
    }

    /// The OS model.
    pub fn os(&self) -> &Os {
        &self.os
    }
}

impl PageTables for OsPages {
    fn translate(&mut self, asid: Asid, vpn: u64) -> Option<u64> {
        Some(u64::from(self.os.touch(asid, vpn)))
    }

    /// An eviction unmapped some page whose translation a TLB may hold.
    fn stale_translations(&mut self) -> bool {
        let e = self.os.counters().evictions;
        let stale = e != self.seen_evictions;
        self.seen_evictions = e;
        stale
    }
}

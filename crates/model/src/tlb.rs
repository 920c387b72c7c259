//! A set-associative TLB with LRU replacement and optional address-space (ASID) tags.

use pmlab_spine::Asid;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// TLB geometry and cost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbConfig {
    /// Entries in total.
    pub entries: u64,
    /// Ways per set (`entries` for fully associative).
    pub assoc: u64,
    /// `true`: entries carry the address-space id, so switching spaces keeps them (as
    /// SpaceJMP's tagged TLBs do); `false`: a switch flushes the whole TLB.
    pub tagged: bool,
    /// Cycles of a page walk on a miss.
    pub walk_cycles: u64,
}

impl Default for TlbConfig {
    /// OSP's simulated machine has a 64-entry L1 DTLB (§3.1); it gives neither the
    /// associativity nor the walk cost, so we take 4 ways, as x86 L1 DTLBs have, and
    /// 30 cycles for a walk whose page-table entries hit in the caches.
    fn default() -> Self {
        Self {
            entries: 64,
            assoc: 4,
            tagged: true,
            walk_cycles: 30,
        }
    }
}

impl TlbConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.entries > MAX_TLB_ENTRIES {
            return Err(ConfigError::field(
                "translation.tlb.entries",
                format!("{} is more than the limit {MAX_TLB_ENTRIES}", self.entries),
            ));
        }
        if self.assoc == 0 || self.entries == 0 || !self.entries.is_multiple_of(self.assoc) {
            return Err(ConfigError::field(
                "translation.tlb.entries",
                format!(
                    "{} entries cannot be split into sets of {} ways",
                    self.entries, self.assoc
                ),
            ));
        }
        Ok(())
    }
}

/// The most TLB entries a configuration may ask for (real TLBs hold a few thousand).
pub const MAX_TLB_ENTRIES: u64 = 1 << 20;

/// TLB counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlbStats {
    /// Lookups that found their translation.
    pub hits: u64,
    /// Lookups that needed a page walk.
    pub misses: u64,
    /// Whole-TLB flushes (address-space switches of an untagged TLB).
    pub flushes: u64,
    /// Valid entries replaced to make room.
    pub evictions: u64,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    asid: Asid,
    vpn: u64,
    pfn: u64,
    last_use: u64,
}

/// The TLB.
#[derive(Clone, Debug)]
pub struct Tlb {
    config: TlbConfig,
    sets: Vec<Vec<Entry>>,
    clock: u64,
    stats: TlbStats,
}

impl Tlb {
    /// An empty TLB.
    pub fn new(config: TlbConfig) -> Self {
        let nsets = (config.entries / config.assoc) as usize;
        Self {
            sets: vec![Vec::with_capacity(config.assoc as usize); nsets],
            config,
            clock: 0,
            stats: TlbStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TlbConfig {
        &self.config
    }

    /// Counters so far.
    pub fn stats(&self) -> TlbStats {
        self.stats
    }

    fn set_of(&self, vpn: u64) -> usize {
        (vpn % self.sets.len() as u64) as usize
    }

    /// Looks `vpn` of address space `asid` up, counting a hit or a miss.
    pub fn lookup(&mut self, asid: Asid, vpn: u64) -> Option<u64> {
        self.clock += 1;
        let clock = self.clock;
        let tagged = self.config.tagged;
        let set = self.set_of(vpn);
        let hit = self.sets[set]
            .iter_mut()
            .find(|e| e.vpn == vpn && (!tagged || e.asid == asid));
        match hit {
            Some(e) => {
                e.last_use = clock;
                self.stats.hits += 1;
                Some(e.pfn)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Installs a translation after a walk, replacing the set's least recently used
    /// entry if the set is full.
    pub fn insert(&mut self, asid: Asid, vpn: u64, pfn: u64) {
        self.clock += 1;
        let entry = Entry {
            asid,
            vpn,
            pfn,
            last_use: self.clock,
        };
        let assoc = self.config.assoc as usize;
        let set = self.set_of(vpn);
        let ways = &mut self.sets[set];
        if ways.len() < assoc {
            ways.push(entry);
            return;
        }
        let victim = ways
            .iter_mut()
            .min_by_key(|e| e.last_use)
            .expect("a full set has ways");
        *victim = entry;
        self.stats.evictions += 1;
    }

    /// Removes the translation of `vpn` in `asid` (after the page tables changed it).
    pub fn invalidate(&mut self, asid: Asid, vpn: u64) {
        let tagged = self.config.tagged;
        let set = self.set_of(vpn);
        self.sets[set].retain(|e| !(e.vpn == vpn && (!tagged || e.asid == asid)));
    }

    /// The CPU switches to another address space: an untagged TLB must forget
    /// everything, a tagged one keeps its entries.
    pub fn switch_space(&mut self) {
        if !self.config.tagged {
            self.flush();
        }
    }

    /// Drops every entry.
    pub fn flush(&mut self) {
        for s in &mut self.sets {
            s.clear();
        }
        self.stats.flushes += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlb(entries: u64, assoc: u64, tagged: bool) -> Tlb {
        Tlb::new(TlbConfig {
            entries,
            assoc,
            tagged,
            walk_cycles: 10,
        })
    }

    #[test]
    fn lru_within_a_set() {
        let mut t = tlb(2, 2, true);
        for vpn in [1, 2] {
            assert_eq!(t.lookup(0, vpn), None);
            t.insert(0, vpn, vpn + 100);
        }
        assert_eq!(t.lookup(0, 1), Some(101)); // 2 is now LRU
        assert_eq!(t.lookup(0, 3), None);
        t.insert(0, 3, 103);
        assert_eq!(t.lookup(0, 2), None);
        assert_eq!(t.lookup(0, 1), Some(101));
        let s = t.stats();
        assert_eq!((s.hits, s.misses, s.evictions), (2, 4, 1));
    }

    #[test]
    fn tags_survive_switches_untagged_flushes() {
        for tagged in [true, false] {
            let mut t = tlb(8, 2, tagged);
            t.insert(1, 5, 50);
            t.switch_space();
            t.insert(2, 5, 70);
            t.switch_space();
            let got = t.lookup(1, 5);
            if tagged {
                assert_eq!(got, Some(50), "tagged TLB keeps space 1's entry");
            } else {
                assert_eq!(got, None, "untagged TLB was flushed");
                assert_eq!(t.stats().flushes, 2);
            }
        }
    }
}

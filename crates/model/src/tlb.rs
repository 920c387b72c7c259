//! A set-associative TLB with LRU replacement and optional address-space (ASID) tags.
//!
//! An entry may carry a [`LineMap`]: the page's lines are then served by two frames,
//! line by line (the mechanism OSP's extended TLB entries need, paper 000 §2.1; the
//! policy that sets the map lives with the protocol, in `pmlab-hwtx`). Entries that
//! leave the TLB — replaced, invalidated or flushed — are kept as [`Departed`] until
//! the machine collects them ([`Tlb::take_departed`]) and tells a software miss
//! handler, if one is installed.

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

/// Lines of one page served by a second frame: line `i` of the page (64-byte lines,
/// so pages of at most 64 lines, 4 KiB) is in frame `alt_pfn` when bit `i` of `select`
/// is set, and in the entry's own frame otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineMap {
    /// The second frame.
    pub alt_pfn: u64,
    /// Bit `i` set: line `i` is served by `alt_pfn`.
    pub select: u64,
}

/// A translation as a TLB entry holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// The page's frame.
    pub pfn: u64,
    /// Lines served by a second frame, if any.
    pub lines: Option<LineMap>,
}

impl Translation {
    /// A plain translation to `pfn`.
    pub fn frame(pfn: u64) -> Self {
        Self { pfn, lines: None }
    }

    /// The frame that serves line `line` (0-based, in 64-byte lines) of the page.
    pub fn frame_of_line(&self, line: u64) -> u64 {
        match self.lines {
            Some(m) if line < 64 && m.select >> line & 1 == 1 => m.alt_pfn,
            _ => self.pfn,
        }
    }
}

/// An entry that left the TLB (replaced, invalidated or flushed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departed {
    /// Its address space.
    pub asid: Asid,
    /// Its virtual page.
    pub vpn: u64,
    /// What it translated to when it left.
    pub translation: Translation,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    asid: Asid,
    vpn: u64,
    translation: Translation,
    last_use: u64,
}

impl Entry {
    fn departed(&self) -> Departed {
        Departed {
            asid: self.asid,
            vpn: self.vpn,
            translation: self.translation,
        }
    }
}

/// The TLB.
#[derive(Clone, Debug)]
pub struct Tlb {
    config: TlbConfig,
    sets: Vec<Vec<Entry>>,
    clock: u64,
    stats: TlbStats,
    departed: Vec<Departed>,
    /// (set, way) of the entry that served the last hit: a fully associative TLB is
    /// searched only when the page changes.
    mru: Option<(usize, usize)>,
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
            departed: Vec::new(),
            mru: None,
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

    fn matches(e: &Entry, tagged: bool, asid: Asid, vpn: u64) -> bool {
        e.vpn == vpn && (!tagged || e.asid == asid)
    }

    fn find(&self, asid: Asid, vpn: u64) -> Option<(usize, usize)> {
        let tagged = self.config.tagged;
        if let Some((s, w)) = self.mru
            && self.sets[s]
                .get(w)
                .is_some_and(|e| Self::matches(e, tagged, asid, vpn))
        {
            return Some((s, w));
        }
        let set = self.set_of(vpn);
        let way = self.sets[set]
            .iter()
            .position(|e| Self::matches(e, tagged, asid, vpn))?;
        Some((set, way))
    }

    /// Looks `vpn` of address space `asid` up, counting a hit or a miss; the frame.
    pub fn lookup(&mut self, asid: Asid, vpn: u64) -> Option<u64> {
        self.lookup_translation(asid, vpn).map(|t| t.pfn)
    }

    /// Looks `vpn` of address space `asid` up, counting a hit or a miss; the whole
    /// translation (frame and line map).
    pub fn lookup_translation(&mut self, asid: Asid, vpn: u64) -> Option<Translation> {
        self.clock += 1;
        match self.find(asid, vpn) {
            Some((s, w)) => {
                self.mru = Some((s, w));
                let e = &mut self.sets[s][w];
                e.last_use = self.clock;
                self.stats.hits += 1;
                Some(e.translation)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// The translation of `vpn` if the TLB holds it, without counting a lookup or
    /// touching the replacement state.
    pub fn peek(&self, asid: Asid, vpn: u64) -> Option<Translation> {
        self.find(asid, vpn)
            .map(|(s, w)| self.sets[s][w].translation)
    }

    /// Replaces the line map of a resident entry; `false` if `vpn` is not resident.
    pub fn set_lines(&mut self, asid: Asid, vpn: u64, lines: Option<LineMap>) -> bool {
        match self.find(asid, vpn) {
            Some((s, w)) => {
                self.sets[s][w].translation.lines = lines;
                true
            }
            None => false,
        }
    }

    /// Makes room for `vpn` in its set: if the set is full, its least recently used
    /// entry departs (see [`Tlb::take_departed`]).
    pub fn make_room(&mut self, vpn: u64) {
        let assoc = self.config.assoc as usize;
        let set = self.set_of(vpn);
        if self.sets[set].len() < assoc {
            return;
        }
        let (way, _) = self.sets[set]
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.last_use)
            .expect("a full set has ways");
        let gone = self.sets[set].swap_remove(way);
        self.departed.push(gone.departed());
        self.stats.evictions += 1;
        self.mru = None;
    }

    /// Installs a translation after a walk, replacing the set's least recently used
    /// entry if the set is full.
    pub fn insert(&mut self, asid: Asid, vpn: u64, pfn: u64) {
        self.insert_translation(asid, vpn, Translation::frame(pfn));
    }

    /// Installs a whole translation (frame and line map), replacing the set's least
    /// recently used entry if the set is full.
    pub fn insert_translation(&mut self, asid: Asid, vpn: u64, translation: Translation) {
        self.make_room(vpn);
        self.clock += 1;
        let set = self.set_of(vpn);
        self.sets[set].push(Entry {
            asid,
            vpn,
            translation,
            last_use: self.clock,
        });
    }

    /// Moves the entries that left since the last call into `out`, oldest first.
    pub fn take_departed(&mut self, out: &mut Vec<Departed>) {
        out.append(&mut self.departed);
    }

    /// Every resident entry.
    pub fn resident(&self) -> impl Iterator<Item = Departed> + '_ {
        self.sets.iter().flatten().map(Entry::departed)
    }

    /// Removes the translation of `vpn` in `asid` (after the page tables changed it).
    pub fn invalidate(&mut self, asid: Asid, vpn: u64) {
        if let Some((s, w)) = self.find(asid, vpn) {
            let gone = self.sets[s].swap_remove(w);
            self.departed.push(gone.departed());
            self.mru = None;
        }
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
            self.departed.extend(s.drain(..).map(|e| e.departed()));
        }
        self.mru = None;
        self.stats.flushes += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_maps_route_lines_and_departures_are_reported() {
        let mut t = tlb(2, 2, true);
        let map = LineMap {
            alt_pfn: 9,
            select: 0b101,
        };
        t.insert_translation(
            0,
            1,
            Translation {
                pfn: 4,
                lines: Some(map),
            },
        );
        let got = t.lookup_translation(0, 1).unwrap();
        assert_eq!(
            (0..4).map(|l| got.frame_of_line(l)).collect::<Vec<_>>(),
            vec![9, 4, 9, 4]
        );
        assert!(t.set_lines(0, 1, None));
        assert_eq!(t.peek(0, 1).unwrap().frame_of_line(0), 4);
        t.insert(0, 2, 5);
        t.insert(0, 3, 6); // page 1 is least recently used
        t.invalidate(0, 3);
        let mut gone = Vec::new();
        t.take_departed(&mut gone);
        assert_eq!(
            gone.iter()
                .map(|d| (d.vpn, d.translation.pfn))
                .collect::<Vec<_>>(),
            vec![(1, 4), (3, 6)]
        );
        t.flush();
        t.take_departed(&mut gone);
        assert_eq!(gone.len(), 3);
        assert_eq!(t.resident().count(), 0);
    }

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

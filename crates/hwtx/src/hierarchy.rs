//! The tagged cache hierarchy of the hardware transaction protocols of paper 001 (LOC).
//!
//! LOC extends every cache tag with the writer's transaction ID and the last level's with
//! a transaction-dirty flag (its Fig. 5), and keeps several versions of one block in the
//! last level (its multi-versioned cache, §III-B); Kiln's last level is non-volatile and
//! keeps a committed and an uncommitted version. The machine model's caches are tag-only
//! and exact to Dinero IV, without such tags, so these protocols model their own
//! hierarchy here: the levels of the machine's configuration (LOC's Table I: L1 32 KiB
//! 2-way, L2 256 KiB 8-way, LLC 1 MiB 16-way, 64-byte lines, LRU), **inclusive** (every
//! line of L1 is in L2, every line of L2 in the LLC; an LLC eviction invalidates the
//! line above), write-back and write-allocate.
//!
//! Only tags live here; data live in the machine's images (the newest version of every
//! line in the coherent image) and in the protocols' snapshots of older versions. The
//! upper levels hold only a line's newest version; the LLC may hold older ones beside it
//! (`Meta::old`), each in a way of its own, so versions compete for associativity
//! ("version overflow", §III-B). Replacement is LRU in every level (an upper-level hit
//! does not refresh the LLC's order, as in a real inclusive hierarchy), except that a
//! full LLC set holding older versions gives up the oldest of them first (the paper's
//! "evicts the oldest version"); a protocol may pin LLC ways (Kiln's uncommitted
//! versions), which are then never chosen as victims.

/// An empty way.
const EMPTY: u64 = u64::MAX;

/// What the LLC's tag holds beyond the address: the protocols' transactional state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// The hardware transaction whose version this entry holds (0: none).
    pub tx: u64,
    /// The version differs from the line's home location: a home write is owed.
    pub dirty: bool,
    /// The version is not yet persistent: not in the memory log (WAL protocols), or
    /// not committed (Kiln: an uncommitted version in the non-volatile LLC).
    pub txdirty: bool,
    /// An older version kept beside the line's newest.
    pub old: bool,
    /// Kiln: the transaction whose version the volatile levels (L1, L2) hold.
    pub vtx: u64,
    /// Kiln: the volatile levels hold a newer version than this entry.
    pub vdirty: bool,
}

/// A line left the LLC (and with it the whole hierarchy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    /// Line number (address / 64).
    pub line: u64,
    /// Its tag state when it left.
    pub meta: Meta,
    /// The LLC way it left (now empty or refilled).
    pub way: usize,
}

/// No LLC way of a set could be given up: every one is pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// The line that needed a way.
    pub line: u64,
}

/// One set-associative LRU level: tags and LRU stamps.
#[derive(Clone, Debug)]
struct Level {
    assoc: usize,
    set_mask: u64,
    tags: Vec<u64>,
    stamps: Vec<u64>,
    clock: u64,
}

impl Level {
    fn new(size: u64, assoc: u64) -> Level {
        let ways = (size / 64) as usize;
        let sets = ways / assoc as usize;
        Level {
            assoc: assoc as usize,
            set_mask: sets as u64 - 1,
            tags: vec![EMPTY; ways],
            stamps: vec![0; ways],
            clock: 0,
        }
    }

    fn set_range(&self, line: u64) -> std::ops::Range<usize> {
        let s = (line & self.set_mask) as usize * self.assoc;
        s..s + self.assoc
    }

    fn find(&self, line: u64) -> Option<usize> {
        self.set_range(line).find(|&w| self.tags[w] == line)
    }

    fn touch(&mut self, w: usize) {
        self.clock += 1;
        self.stamps[w] = self.clock;
    }

    /// An empty way of `line`'s set, else the least recently used one `allowed`.
    fn victim(&self, line: u64, allowed: impl Fn(usize) -> bool) -> Option<usize> {
        let r = self.set_range(line);
        if let Some(w) = r.clone().find(|&w| self.tags[w] == EMPTY) {
            return Some(w);
        }
        r.filter(|&w| allowed(w)).min_by_key(|&w| self.stamps[w])
    }

    fn invalidate(&mut self, line: u64) {
        if let Some(w) = self.find(line) {
            self.tags[w] = EMPTY;
        }
    }
}

/// Counters of the hierarchy.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HierarchyStats {
    /// `served[i]`: accesses served by level `i`; the last entry is memory.
    pub served: Vec<u64>,
    /// Lines the LLC gave up for others.
    pub llc_evictions: u64,
    /// Older versions the LLC kept beside newer ones.
    pub versions_kept: u64,
}

/// The inclusive hierarchy: upper (volatile) levels, then the LLC with transactional tags.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    upper: Vec<Level>,
    llc: Level,
    meta: Vec<Meta>,
    /// Never evict an LLC way holding an uncommitted version (`txdirty`) or a line
    /// whose volatile copy is newer (`vdirty`): Kiln's rule.
    pub pin_uncommitted: bool,
    evicted: Vec<Evicted>,
    demoted: Vec<u64>,
    stats: HierarchyStats,
}

impl Hierarchy {
    /// Levels of `(size, assoc)`, L1 first; the last is the LLC. Sizes are multiples of
    /// 64 x assoc with a power-of-two number of sets (the machine's configuration
    /// checks it).
    pub fn new(levels: &[(u64, u64)]) -> Hierarchy {
        assert!(!levels.is_empty(), "at least one cache level");
        let (last, upper) = levels.split_last().expect("non-empty");
        let llc = Level::new(last.0, last.1);
        let ways = llc.tags.len();
        Hierarchy {
            upper: upper.iter().map(|&(s, a)| Level::new(s, a)).collect(),
            llc,
            meta: vec![Meta::default(); ways],
            pin_uncommitted: false,
            evicted: Vec::new(),
            demoted: Vec::new(),
            stats: HierarchyStats {
                served: vec![0; levels.len() + 1],
                ..HierarchyStats::default()
            },
        }
    }

    /// Number of levels; [`Hierarchy::access`] returns it for memory.
    pub fn levels(&self) -> usize {
        self.upper.len() + 1
    }

    /// Counters so far.
    pub fn stats(&self) -> &HierarchyStats {
        &self.stats
    }

    /// Accesses `line` (its newest version) and returns the level that served it (0 is
    /// L1, [`Hierarchy::levels`] is memory), filling every level above. Lines the LLC
    /// gave up are queued for [`Hierarchy::take_evicted`]; lines whose newer volatile
    /// version left the upper levels, for [`Hierarchy::take_demoted`].
    pub fn access(&mut self, line: u64) -> Result<usize, Overflow> {
        let mut served = self.upper.len();
        for (i, l) in self.upper.iter_mut().enumerate() {
            if let Some(w) = l.find(line) {
                l.touch(w);
                served = i;
                break;
            }
        }
        if served == self.upper.len() {
            if let Some(w) = self.newest(line) {
                self.llc.touch(w);
            } else {
                let w = self.alloc(line, None)?;
                self.meta[w] = Meta::default();
                served += 1;
            }
        }
        for i in (0..served.min(self.upper.len())).rev() {
            self.fill_upper(i, line);
        }
        self.stats.served[served] += 1;
        Ok(served)
    }

    fn fill_upper(&mut self, i: usize, line: u64) {
        let l = &mut self.upper[i];
        let w = l
            .victim(line, |_| true)
            .expect("an upper level evicts freely");
        let out = l.tags[w];
        l.tags[w] = line;
        l.touch(w);
        if out != EMPTY {
            self.left_upper(i, out);
        }
    }

    /// `line` left upper level `i`: keep inclusion above it, and note a newer volatile
    /// version leaving the volatile levels altogether.
    fn left_upper(&mut self, i: usize, line: u64) {
        for l in &mut self.upper[..i] {
            l.invalidate(line);
        }
        if i + 1 == self.upper.len()
            && let Some(w) = self.newest(line)
            && self.meta[w].vdirty
        {
            self.demoted.push(line);
        }
    }

    /// The LLC way of `line`'s newest version.
    pub fn newest(&self, line: u64) -> Option<usize> {
        self.llc
            .set_range(line)
            .find(|&w| self.llc.tags[w] == line && !self.meta[w].old)
    }

    /// The LLC way of an older version of `line` written by `tx`.
    pub fn old_version(&self, line: u64, tx: u64) -> Option<usize> {
        self.llc
            .set_range(line)
            .find(|&w| self.llc.tags[w] == line && self.meta[w].old && self.meta[w].tx == tx)
    }

    /// The LLC ways of older versions of `line`.
    pub fn old_versions(&self, line: u64) -> Vec<usize> {
        self.llc
            .set_range(line)
            .filter(|&w| self.llc.tags[w] == line && self.meta[w].old)
            .collect()
    }

    /// Whether an upper (volatile) level holds `line`.
    pub fn in_upper(&self, line: u64) -> bool {
        self.upper.iter().any(|l| l.find(line).is_some())
    }

    /// The line an LLC way holds (`None` if empty).
    pub fn line_of(&self, way: usize) -> Option<u64> {
        let t = self.llc.tags[way];
        (t != EMPTY).then_some(t)
    }

    /// The tag state of LLC way `way`.
    pub fn meta(&self, way: usize) -> &Meta {
        &self.meta[way]
    }

    /// The tag state of LLC way `way`, to change.
    pub fn meta_mut(&mut self, way: usize) -> &mut Meta {
        &mut self.meta[way]
    }

    /// Number of LLC ways (way numbers are `0..llc_ways()`).
    pub fn llc_ways(&self) -> usize {
        self.llc.tags.len()
    }

    /// A new LLC way for a version of `line` (an older version kept beside the newest,
    /// or Kiln's second version), never way `protect`; the victim, if any, is queued.
    pub fn alloc_version(
        &mut self,
        line: u64,
        meta: Meta,
        protect: Option<usize>,
    ) -> Result<usize, Overflow> {
        let w = self.alloc(line, protect)?;
        self.meta[w] = meta;
        self.stats.versions_kept += u64::from(meta.old);
        Ok(w)
    }

    fn alloc(&mut self, line: u64, protect: Option<usize>) -> Result<usize, Overflow> {
        let pin = self.pin_uncommitted;
        let meta = &self.meta;
        let allowed =
            |w: usize| Some(w) != protect && !(pin && (meta[w].txdirty || meta[w].vdirty));
        // An older version goes first, the oldest of them (LOC §III-B: on version
        // overflow "our design evicts the oldest version"); otherwise LRU.
        let oldest_version = self
            .llc
            .set_range(line)
            .filter(|&w| self.llc.tags[w] != EMPTY && meta[w].old && allowed(w))
            .min_by_key(|&w| (meta[w].tx, self.llc.stamps[w]));
        let w = match oldest_version {
            Some(w) if self.llc.set_range(line).all(|v| self.llc.tags[v] != EMPTY) => w,
            _ => self.llc.victim(line, allowed).ok_or(Overflow { line })?,
        };
        if self.llc.tags[w] != EMPTY {
            self.evict_way(w);
        }
        self.llc.tags[w] = line;
        self.llc.touch(w);
        Ok(w)
    }

    /// Gives up LLC way `w`: its line leaves every level (if it was the newest version)
    /// and is queued as evicted.
    fn evict_way(&mut self, w: usize) {
        let line = self.llc.tags[w];
        let meta = self.meta[w];
        if !meta.old {
            for l in &mut self.upper {
                l.invalidate(line);
            }
        }
        self.stats.llc_evictions += 1;
        self.evicted.push(Evicted { line, meta, way: w });
        self.llc.tags[w] = EMPTY;
        self.meta[w] = Meta::default();
    }

    /// Empties LLC way `w` without queueing it (the protocol already dealt with its
    /// version); the newest version of a line leaves the upper levels too.
    pub fn drop_way(&mut self, w: usize) {
        let line = self.llc.tags[w];
        if line != EMPTY && !self.meta[w].old {
            for l in &mut self.upper {
                l.invalidate(line);
            }
        }
        self.llc.tags[w] = EMPTY;
        self.meta[w] = Meta::default();
    }

    /// Drops `line` from the upper (volatile) levels only.
    pub fn invalidate_upper(&mut self, line: u64) {
        for l in &mut self.upper {
            l.invalidate(line);
        }
    }

    /// Lines the LLC gave up since the last call.
    pub fn take_evicted(&mut self) -> Option<Evicted> {
        self.evicted.pop()
    }

    /// Lines whose newer volatile version left the upper levels since the last call.
    pub fn take_demoted(&mut self) -> Option<u64> {
        self.demoted.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Hierarchy {
        // L1: 2 lines direct-mapped (2 sets); L2: 4 lines, 2 sets x 2 ways; LLC: 8
        // lines, 2 sets x 4 ways.
        Hierarchy::new(&[(128, 1), (256, 2), (512, 4)])
    }

    #[test]
    fn levels_fill_and_serve_in_order() {
        let mut h = tiny();
        assert_eq!(h.access(0), Ok(3), "memory");
        assert_eq!(h.access(0), Ok(0), "L1");
        assert_eq!(h.access(2), Ok(3));
        // Line 2 took line 0's L1 set (direct-mapped, set 0); line 0 is still in L2.
        assert_eq!(h.access(0), Ok(1));
        assert_eq!(h.stats().served, vec![1, 1, 0, 2]);
    }

    #[test]
    fn inclusion_and_lru_eviction() {
        let mut h = tiny();
        for line in [0, 2, 4, 6] {
            h.access(line).unwrap();
        }
        assert!(
            h.take_evicted().is_none(),
            "four ways of LLC set 0 hold them"
        );
        h.access(8).unwrap();
        let e = h.take_evicted().unwrap();
        assert_eq!(e.line, 0, "least recently used");
        assert!(!h.in_upper(0), "inclusion: gone from every level");
        assert_eq!(h.access(0), Ok(3));
    }

    #[test]
    fn versions_share_a_set_and_pinned_ways_stay() {
        let mut h = tiny();
        h.access(0).unwrap();
        let newest = h.newest(0).unwrap();
        let old = Meta {
            tx: 7,
            dirty: true,
            old: true,
            ..Meta::default()
        };
        let w = h.alloc_version(0, old, Some(newest)).unwrap();
        assert_eq!(h.old_version(0, 7), Some(w));
        assert_eq!(h.newest(0), Some(newest));
        assert_eq!(h.old_versions(0), vec![w]);
        // Pin everything in set 0: the next line of the set overflows.
        h.pin_uncommitted = true;
        h.meta_mut(newest).txdirty = true;
        h.meta_mut(w).txdirty = true;
        h.access(2).unwrap();
        h.access(4).unwrap();
        let n2 = h.newest(2).unwrap();
        let n4 = h.newest(4).unwrap();
        h.meta_mut(n2).vdirty = true;
        h.meta_mut(n4).txdirty = true;
        assert_eq!(h.access(6), Err(Overflow { line: 6 }));
    }

    #[test]
    fn a_newer_volatile_version_leaving_l2_is_noted() {
        let mut h = tiny();
        h.access(0).unwrap();
        let w = h.newest(0).unwrap();
        h.meta_mut(w).vdirty = true;
        // L2 set 0 holds two lines: two more lines of set 0 push line 0 out of L2.
        h.access(2).unwrap();
        h.access(4).unwrap();
        assert_eq!(h.take_demoted(), Some(0));
        assert!(!h.in_upper(0));
        assert_eq!(h.newest(0), Some(w), "still in the LLC");
    }
}

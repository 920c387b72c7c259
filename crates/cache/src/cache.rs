//! One cache: its sets, replacement state and counters.
//!
//! A set's ways are kept in Dinero IV's stack order (index 0 is the top: most recently
//! used for LRU, most recently inserted for FIFO and random), with invalid ways at the
//! end; tree-PLRU keeps ways in place and a tree of bits per set instead. Each way is one
//! `u64`: the block address with bit 0 set when valid and bit 1 when dirty (blocks are
//! at least 4 bytes, so both bits are free).

use crate::config::{CacheConfig, Replacement};
use crate::shadow::Shadow;
use crate::stats::CacheStats;
use pmlab_trace::Kind;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub(crate) const VALID: u64 = 1;
pub(crate) const DIRTY: u64 = 2;
/// Debug builds check the invariants of sets of at most this many ways on every access.
#[cfg(debug_assertions)]
const ASSERTED_ASSOC: usize = 16;

/// What one single-block access did to a cache.
pub(crate) struct BlockOutcome {
    /// The block was not present.
    pub miss: bool,
    /// The write was absorbed (block marked dirty), so nothing is written through.
    pub absorbed: bool,
    /// A dirty block was replaced: its address.
    pub dirty_victim: Option<u64>,
}

pub(crate) struct Cache {
    pub cfg: CacheConfig,
    pub name: String,
    pub level: usize,
    /// Index of the cache below; `None` is memory.
    pub down: Option<usize>,
    pub stats: CacheStats,
    pub lg2_block: u32,
    pub block_mask: u64,
    pub set_mask: u64,
    pub assoc: usize,
    /// `sets * assoc` ways, set-major.
    pub ways: Vec<u64>,
    /// Tree-PLRU bits, one word per set.
    plru: Vec<u64>,
    pub shadow: Option<Shadow>,
    /// Draws for random replacement (this cache and its shadow).
    rng: Xoshiro256PlusPlus,
    /// Hits taken by the hierarchy's fast path, by `Kind as usize`; folded into
    /// `stats.fetches` when counters are read.
    pub fast_hits: [u64; 4],
    /// Whether a hit on the top way may take the fast path: no classification shadow
    /// to update and no tree-PLRU bits to flip.
    pub fast_ok: bool,
}

impl Cache {
    /// A cache at `level` (1 closest to the processor) on side `side` (0 unified,
    /// 1 instruction, 2 data); see [`crate::Hierarchy::new`] for the seeding.
    pub(crate) fn new(cfg: CacheConfig, name: String, level: usize, side: u64, seed: u64) -> Self {
        let sets = cfg.sets();
        let assoc = cfg.assoc as usize;
        Cache {
            cfg,
            name,
            level,
            down: None,
            stats: CacheStats::default(),
            lg2_block: cfg.block_size.trailing_zeros(),
            block_mask: cfg.block_size - 1,
            set_mask: sets - 1,
            assoc,
            ways: vec![0; sets as usize * assoc],
            plru: if cfg.repl == Replacement::TreePlru {
                vec![0; sets as usize]
            } else {
                Vec::new()
            },
            shadow: cfg
                .ccc
                .then(|| Shadow::new(cfg.repl, sets as usize * assoc)),
            fast_hits: [0; 4],
            fast_ok: !cfg.ccc && cfg.repl != Replacement::TreePlru,
            rng: Xoshiro256PlusPlus::seed_from_u64(
                seed.wrapping_add(4 * level as u64 + side)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
        }
    }

    #[inline(always)]
    pub(crate) fn set_of(&self, addr: u64) -> usize {
        ((addr >> self.lg2_block) & self.set_mask) as usize
    }

    /// Position of `blk` in set `set`, if present.
    #[inline(always)]
    pub(crate) fn find(&self, set: usize, blk: u64) -> Option<usize> {
        let base = set * self.assoc;
        let want = blk | VALID | DIRTY;
        self.ways[base..base + self.assoc]
            .iter()
            .position(|&w| (w | DIRTY) == want)
    }

    /// The counters, with the fast path's hits folded in.
    pub(crate) fn stats(&self) -> crate::stats::CacheStats {
        let mut s = self.stats;
        s.fetches.read += self.fast_hits[Kind::Read as usize];
        s.fetches.write += self.fast_hits[Kind::Write as usize];
        s.fetches.instr += self.fast_hits[Kind::Instr as usize];
        s.fetches.misc += self.fast_hits[Kind::Misc as usize];
        s
    }

    /// Tree-PLRU: points every node on the path to way `w` away from it.
    fn plru_touch(&mut self, set: usize, w: usize) {
        let mut bits = self.plru[set];
        let (mut node, mut lo, mut span) = (0usize, 0usize, self.assoc);
        while span > 1 {
            span /= 2;
            if w < lo + span {
                bits |= 1 << node; // victim search goes right next time
                node = 2 * node + 1;
            } else {
                bits &= !(1 << node);
                lo += span;
                node = 2 * node + 2;
            }
        }
        self.plru[set] = bits;
    }

    fn plru_victim(&self, set: usize) -> usize {
        let bits = self.plru[set];
        let (mut node, mut lo, mut span) = (0usize, 0usize, self.assoc);
        while span > 1 {
            span /= 2;
            if bits & (1 << node) == 0 {
                node = 2 * node + 1;
            } else {
                lo += span;
                node = 2 * node + 2;
            }
        }
        lo
    }

    /// One access to one block, following Dinero IV's `d4ref`: updates the replacement
    /// state (unless a write misses a no-write-allocate cache), the dirty bit and the
    /// miss classification. Counters of fetches and misses are updated too.
    pub(crate) fn access_block(&mut self, kind: Kind, blk: u64) -> BlockOutcome {
        let set = self.set_of(blk);
        let base = set * self.assoc;
        let found = self.find(set, blk);
        let is_write = kind == Kind::Write;
        let allocate = is_write && self.cfg.write_allocate;
        let mut absorbed = false;
        let mut dirty_victim = None;
        if !is_write || found.is_some() || allocate {
            let pos = match found {
                Some(p) => self.touch_hit(set, p),
                None => {
                    let (pos, victim) = self.fill(set, blk);
                    dirty_victim = victim;
                    pos
                }
            };
            if is_write && self.cfg.write_back {
                self.ways[base + pos] |= DIRTY;
                absorbed = true;
            }
        }
        let miss = found.is_none();
        self.count(kind, blk, miss, !is_write || allocate);
        #[cfg(debug_assertions)]
        self.assert_set(set);
        BlockOutcome {
            miss,
            absorbed,
            dirty_victim,
        }
    }

    /// A hit on way `p` of `set`: the replacement state learns of it. Returns the way
    /// that now holds the block.
    #[inline(always)]
    fn touch_hit(&mut self, set: usize, p: usize) -> usize {
        match self.cfg.repl {
            Replacement::Lru => {
                // A hit already on top (always, when direct-mapped) moves nothing.
                if p > 0 {
                    let base = set * self.assoc;
                    self.ways[base..=base + p].rotate_right(1);
                }
                0
            }
            Replacement::TreePlru => {
                self.plru_touch(set, p);
                p
            }
            Replacement::Fifo | Replacement::Random => p,
        }
    }

    /// A miss that allocates: `blk` replaces the policy's victim in `set`. Returns the
    /// way that now holds it and the dirty block it displaced, if any.
    #[inline(always)]
    fn fill(&mut self, set: usize, blk: u64) -> (usize, Option<u64>) {
        let base = set * self.assoc;
        let dirty =
            |old: u64| (old & (VALID | DIRTY) == VALID | DIRTY).then_some(old & !(VALID | DIRTY));
        if self.cfg.repl == Replacement::TreePlru {
            let set_ways = &self.ways[base..base + self.assoc];
            let w = match set_ways.iter().position(|&w| w & VALID == 0) {
                Some(w) => w,
                None => self.plru_victim(set),
            };
            let victim = dirty(self.ways[base + w]);
            self.ways[base + w] = blk | VALID;
            self.plru_touch(set, w);
            return (w, victim);
        }
        let set_ways = &mut self.ways[base..base + self.assoc];
        let full = set_ways[self.assoc - 1] & VALID != 0;
        // The victim is the bottom of the stack, or for random a uniformly chosen way
        // of a full set.
        let v = if full && self.cfg.repl == Replacement::Random {
            // The ways are a power of two: a mask, not a division.
            (self.rng.next_u64() & (self.assoc as u64 - 1)) as usize
        } else {
            self.assoc - 1
        };
        let victim = dirty(set_ways[v]);
        if v > 0 {
            set_ways[..=v].rotate_right(1);
        }
        set_ways[0] = blk | VALID;
        (0, victim)
    }

    /// Counts the access: fetches, misses and (with a shadow fully associative cache)
    /// each miss's class, compulsory, capacity or conflict, as Dinero IV does.
    #[inline(always)]
    fn count(&mut self, kind: Kind, blk: u64, miss: bool, fills: bool) {
        if let Some(shadow) = self.shadow.as_mut() {
            let full_miss = shadow.access(blk, fills, &mut self.rng);
            if miss {
                if !full_miss {
                    self.stats.conflict.bump(kind);
                } else if shadow.first_touch(blk) {
                    self.stats.compulsory.bump(kind);
                } else {
                    self.stats.capacity.bump(kind);
                }
            }
        }
        self.stats.fetches.bump(kind);
        if miss {
            self.stats.misses.bump(kind);
        }
    }

    /// Debug builds: the invariants every lookup relies on hold in set `set`. Each valid
    /// way holds a block of this set, aligned, at most once; a dirty bit is only on a valid
    /// way of a write-back cache; stack-ordered policies keep invalid ways at the bottom.
    /// Sets of more than [`ASSERTED_ASSOC`] ways are left to the tests (the check is
    /// quadratic in the ways).
    #[cfg(debug_assertions)]
    fn assert_set(&self, set: usize) {
        if self.assoc > ASSERTED_ASSOC {
            return;
        }
        let ways = &self.ways[set * self.assoc..(set + 1) * self.assoc];
        let stacked = self.cfg.repl != Replacement::TreePlru;
        let mut seen_invalid = false;
        for (i, &w) in ways.iter().enumerate() {
            let blk = w & !(VALID | DIRTY);
            if w & VALID == 0 {
                assert!(
                    w & DIRTY == 0,
                    "{}: set {set} way {i}: dirty but invalid",
                    self.name
                );
                seen_invalid = true;
                continue;
            }
            assert!(
                !(stacked && seen_invalid),
                "{}: set {set}: a valid way below an invalid one",
                self.name
            );
            assert_eq!(
                blk & self.block_mask,
                0,
                "{}: set {set} way {i}: unaligned block {blk:#x}",
                self.name
            );
            assert_eq!(
                self.set_of(blk),
                set,
                "{}: block {blk:#x} in set {set}",
                self.name
            );
            assert!(
                w & DIRTY == 0 || self.cfg.write_back,
                "{}: a dirty block in a write-through cache",
                self.name
            );
            assert!(
                !ways[..i]
                    .iter()
                    .any(|&o| o & VALID != 0 && o & !(VALID | DIRTY) == blk),
                "{}: block {blk:#x} twice in set {set}",
                self.name
            );
        }
    }

    /// Clears the dirty bit of `blk` if it is present and dirty; true if it was.
    pub(crate) fn clean(&mut self, blk: u64) -> bool {
        let set = self.set_of(blk);
        if let Some(p) = self.find(set, blk) {
            let w = &mut self.ways[set * self.assoc + p];
            if *w & DIRTY != 0 {
                *w &= !DIRTY;
                return true;
            }
        }
        false
    }

    /// Invalidates `blk` (moving its way to the bottom of the stack, as Dinero IV does);
    /// true if it was present.
    pub(crate) fn invalidate(&mut self, blk: u64) -> bool {
        if let Some(s) = self.shadow.as_mut() {
            s.invalidate(blk);
        }
        let set = self.set_of(blk);
        let base = set * self.assoc;
        match self.find(set, blk) {
            Some(p) => {
                if self.cfg.repl == Replacement::TreePlru {
                    self.ways[base + p] = 0;
                } else {
                    self.ways[base + p] = 0;
                    self.ways[base + p..base + self.assoc].rotate_left(1);
                }
                #[cfg(debug_assertions)]
                self.assert_set(set);
                true
            }
            None => false,
        }
    }

    /// Invalidates every block, and empties the classification's reference caches (as
    /// Dinero IV's whole-cache invalidation does).
    pub(crate) fn invalidate_all(&mut self) {
        self.ways.fill(0);
        if self.shadow.is_some() {
            self.shadow = Some(Shadow::new(self.cfg.repl, self.ways.len()));
        }
    }

    /// Dirty blocks in Dinero IV's copy-back order (sets in order, each from the top of
    /// its stack down), clearing their dirty bits.
    pub(crate) fn take_dirty(&mut self) -> Vec<u64> {
        let mut out = Vec::new();
        for w in self.ways.iter_mut() {
            if *w & (VALID | DIRTY) == VALID | DIRTY {
                out.push(*w & !(VALID | DIRTY));
                *w &= !DIRTY;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invalidation moves the freed way to the bottom of the stack, so the next miss in
    /// the set fills it and evicts nothing (Dinero IV's order; debug builds also assert
    /// the stack invariant after every change).
    #[test]
    fn an_invalidated_way_is_refilled_before_anything_is_evicted() {
        let cfg = CacheConfig {
            assoc: 4,
            ..CacheConfig::new(4 * 64, 64)
        };
        let mut c = Cache::new(cfg, "t".into(), 1, 0, 1);
        for b in 0..4u64 {
            assert!(c.access_block(Kind::Read, b * 64).miss);
        }
        assert!(c.invalidate(64));
        assert!(c.access_block(Kind::Read, 4 * 64).miss);
        for b in [0u64, 2, 3, 4] {
            assert!(
                !c.access_block(Kind::Read, b * 64).miss,
                "block {b} was evicted"
            );
        }
    }
}

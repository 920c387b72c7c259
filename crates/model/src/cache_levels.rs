//! What the machine needs from a cache hierarchy, and a plain LRU hierarchy that
//! provides it.
//!
//! Caches are tag-only: the data lives in the persistence domain's images. The machine
//! asks a hierarchy which level served each reference (for timing) and which writes
//! reached memory (for durability and endurance).

use pmlab_trace::Kind;

use crate::config::CacheLevelConfig;

/// A tag-only cache hierarchy.
pub trait CacheLevels {
    /// Number of cache levels; [`CacheLevels::access`] returns this for memory.
    fn levels(&self) -> usize;

    /// Performs one reference of `size` bytes at `addr` (inside one block) and returns
    /// the deepest level that served it: 0 is an L1 hit, [`CacheLevels::levels`] is
    /// memory.
    fn access(&mut self, kind: Kind, addr: u64, size: u32) -> usize;

    /// Writes the block holding `addr` back to memory if any level holds it dirty, and
    /// drops it from every level if `invalidate`.
    fn flush_block(&mut self, addr: u64, invalidate: bool);

    /// Appends every write that reached memory since the last call (dirty write-backs
    /// of the last level, write-through writes, flush write-backs) as `(addr, len)`.
    fn drain_memory_writes(&mut self, out: &mut Vec<(u64, u32)>);
}

#[derive(Clone, Copy, Debug)]
struct Way {
    block: u64,
    dirty: bool,
    last_use: u64,
}

#[derive(Clone, Debug)]
struct Level {
    block_shift: u32,
    assoc: usize,
    sets: Vec<Vec<Way>>,
}

impl Level {
    fn new(c: &CacheLevelConfig) -> Self {
        let nsets = (c.size / c.block_size / c.assoc) as usize;
        Self {
            block_shift: c.block_size.trailing_zeros(),
            assoc: c.assoc as usize,
            sets: vec![Vec::with_capacity(c.assoc as usize); nsets],
        }
    }

    fn locate(&self, addr: u64) -> (usize, u64) {
        let block = addr >> self.block_shift;
        ((block % self.sets.len() as u64) as usize, block)
    }
}

/// Write-back, write-allocate, LRU caches, non-inclusive: a level's dirty victim is
/// written into the level below (allocating there), the last level's into memory.
///
/// This is the hierarchy of LOC's Table I; `pmlab-cache` provides the Dinero IV-exact
/// one with every policy, behind the same [`CacheLevels`] trait.
#[derive(Clone, Debug)]
pub struct LruHierarchy {
    levels: Vec<Level>,
    clock: u64,
    memory_writes: Vec<(u64, u32)>,
}

impl LruHierarchy {
    /// A cold hierarchy; the configurations must have been validated.
    pub fn new(configs: &[CacheLevelConfig]) -> Self {
        Self {
            levels: configs.iter().map(Level::new).collect(),
            clock: 0,
            memory_writes: Vec::new(),
        }
    }

    /// Whether level `level` holds the block of `addr` dirty (for tests).
    pub fn is_dirty(&self, level: usize, addr: u64) -> bool {
        let l = &self.levels[level];
        let (set, block) = l.locate(addr);
        l.sets[set].iter().any(|w| w.block == block && w.dirty)
    }

    /// Brings the block of `addr` into level `i` (reading it from below on a miss)
    /// and returns the deepest level that had to be consulted.
    fn touch(&mut self, i: usize, addr: u64, write: bool) -> usize {
        if i == self.levels.len() {
            return i;
        }
        self.clock += 1;
        let clock = self.clock;
        let (set, block) = self.levels[i].locate(addr);
        if let Some(w) = self.levels[i].sets[set]
            .iter_mut()
            .find(|w| w.block == block)
        {
            w.last_use = clock;
            w.dirty |= write;
            return i;
        }
        let served = self.touch(i + 1, addr, false);
        let new = Way {
            block,
            dirty: write,
            last_use: clock,
        };
        let level = &mut self.levels[i];
        let ways = &mut level.sets[set];
        if ways.len() < level.assoc {
            ways.push(new);
            return served;
        }
        let victim_idx = (0..ways.len())
            .min_by_key(|&k| ways[k].last_use)
            .expect("a full set has ways");
        let victim = std::mem::replace(&mut ways[victim_idx], new);
        if victim.dirty {
            let shift = level.block_shift;
            self.write_below(i + 1, victim.block << shift, 1 << shift);
        }
        served
    }

    /// A dirty block of `len` bytes leaves level `i - 1` for level `i` (or memory).
    fn write_below(&mut self, i: usize, addr: u64, len: u64) {
        if i == self.levels.len() {
            self.memory_writes.push((addr, len as u32));
            return;
        }
        // A victim block may span several blocks of a level with smaller blocks.
        let step = 1u64 << self.levels[i].block_shift;
        let mut a = addr;
        while a < addr + len {
            self.touch(i, a, true);
            a += step;
        }
    }
}

impl CacheLevels for LruHierarchy {
    fn levels(&self) -> usize {
        self.levels.len()
    }

    fn access(&mut self, kind: Kind, addr: u64, _size: u32) -> usize {
        if self.levels.is_empty() {
            if kind == Kind::Write {
                self.memory_writes.push((addr, _size));
            }
            return 0;
        }
        self.touch(0, addr, kind == Kind::Write)
    }

    fn flush_block(&mut self, addr: u64, invalidate: bool) {
        // Every level's copy collapses into one write of the largest dirty block.
        let mut dirty_span: Option<(u64, u64)> = None;
        for level in &mut self.levels {
            let (set, block) = level.locate(addr);
            let ways = &mut level.sets[set];
            if let Some(k) = ways.iter().position(|w| w.block == block) {
                if ways[k].dirty {
                    let len = 1u64 << level.block_shift;
                    if dirty_span.is_none_or(|(_, l)| l < len) {
                        dirty_span = Some((block << level.block_shift, len));
                    }
                }
                if invalidate {
                    ways.swap_remove(k);
                } else {
                    ways[k].dirty = false;
                }
            }
        }
        if let Some((a, len)) = dirty_span {
            self.memory_writes.push((a, len as u32));
        }
    }

    fn drain_memory_writes(&mut self, out: &mut Vec<(u64, u32)>) {
        out.append(&mut self.memory_writes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(size: u64, assoc: u64) -> CacheLevelConfig {
        CacheLevelConfig {
            size,
            block_size: 64,
            assoc,
            latency_cycles: 1,
            repl: crate::ReplacementPolicy::Lru,
            write_back: true,
            write_allocate: true,
        }
    }

    #[test]
    fn dirty_victims_travel_down_and_out() {
        // L1: one line; L2: two lines, fully associative.
        let mut h = LruHierarchy::new(&[cfg(64, 1), cfg(128, 2)]);
        let mut out = Vec::new();
        assert_eq!(h.access(Kind::Write, 0, 8), 2);
        assert_eq!(h.access(Kind::Write, 64, 8), 2); // evicts 0 dirty into L2
        assert!(h.is_dirty(1, 0));
        assert_eq!(h.access(Kind::Read, 0, 8), 1); // L2 hit; evicts 64 dirty into L2
        assert_eq!(h.access(Kind::Read, 128, 8), 2); // L2 full: LRU victim is block 0
        h.drain_memory_writes(&mut out);
        assert_eq!(out, vec![(0, 64)]);
        out.clear();
        h.flush_block(64, true);
        h.drain_memory_writes(&mut out);
        assert_eq!(out, vec![(64, 64)]);
        assert!(!h.is_dirty(1, 64));
    }
}

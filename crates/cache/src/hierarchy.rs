//! A hierarchy of caches in front of memory, simulated exactly as Dinero IV does.

use crate::cache::{Cache, DIRTY, VALID};
use crate::config::{ConfigError, HierarchyConfig, Level};
use crate::l1hits::{HitView, leading_hits};
use crate::stats::NamedStats;
use pmlab_trace::Kind;

/// What is recorded of the traffic that reaches memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemoryLog {
    Off,
    Writes,
    All,
}

/// A cache hierarchy: up to five levels, each unified or split into instruction and
/// data caches, over memory.
///
/// Semantics are Dinero IV's (version 7/8 `d4ref`): a reference spanning several blocks
/// is split into one access per block; a miss fetches the whole block from below (a
/// write miss with write-allocate only when it does not cover the whole block); writes
/// not absorbed by a write-back cache are written through; dirty victims are written
/// back to the level below as writes. Traffic a cache sends below is handled in Dinero
/// IV's order: the block fetch, then the write-through, then the victim's write-back.
pub struct Hierarchy {
    pub(crate) caches: Vec<Cache>,
    pub(crate) l1i: usize,
    pub(crate) l1d: usize,
    pub(crate) levels: usize,
    /// Levels above this hierarchy (non-zero for the lower parts of [`crate::MultiL2`]).
    pub(crate) first_level: usize,
    pub(crate) log: MemoryLog,
    pub(crate) memory_ops: Vec<(Kind, u64, u32)>,
    /// Deepest level reached by the demand traffic of the current reference.
    deepest: u8,
}

impl Hierarchy {
    /// Builds the hierarchy. Random replacement draws from xoshiro256++: the cache at
    /// level `L` on side `T` (0 unified, 1 instruction, 2 data) has its own generator,
    /// `Xoshiro256PlusPlus::seed_from_u64((seed + 4L + T) * 0x9E3779B97F4A7C15)` (wrapping), so that a
    /// cache's draws do not depend on the caches around it.
    pub fn new(config: &HierarchyConfig, seed: u64) -> Result<Hierarchy, ConfigError> {
        config.validate()?;
        Ok(Self::build(config, seed, 0))
    }

    /// Builds the levels of `config` as levels `first_level + 1, ...` of a larger
    /// hierarchy (names, seeds and reported levels follow).
    pub(crate) fn build(config: &HierarchyConfig, seed: u64, first_level: usize) -> Hierarchy {
        let mut caches = Vec::new();
        // (instruction side, data side) of the level above.
        let mut above: Option<(usize, usize)> = None;
        let mut l1 = (0, 0);
        for (i, level) in config.levels.iter().enumerate() {
            let n = first_level + i + 1;
            let this = match level {
                Level::Unified(c) => {
                    caches.push(Cache::new(*c, format!("l{n}-ucache"), n, 0, seed));
                    let u = caches.len() - 1;
                    (u, u)
                }
                Level::Split { instr, data } => {
                    caches.push(Cache::new(*instr, format!("l{n}-icache"), n, 1, seed));
                    caches.push(Cache::new(*data, format!("l{n}-dcache"), n, 2, seed));
                    (caches.len() - 2, caches.len() - 1)
                }
            };
            match above {
                Some((ai, ad)) => {
                    caches[ai].down = Some(this.0);
                    caches[ad].down = Some(this.1);
                }
                None => l1 = this,
            }
            above = Some(this);
        }
        Hierarchy {
            first_level,
            caches,
            l1i: l1.0,
            l1d: l1.1,
            levels: config.levels.len(),
            log: MemoryLog::Off,
            memory_ops: Vec::new(),
            deepest: 0,
        }
    }

    /// Number of levels.
    pub fn levels(&self) -> usize {
        self.levels
    }

    /// Simulates one reference. Instruction fetches go to the level-1 instruction cache,
    /// everything else to the level-1 data cache (the same cache when unified).
    ///
    /// Returns the deepest level that served the reference's demand traffic (block
    /// fetches and write-throughs, not write-backs of victims): 0 when every block hit in
    /// level 1, `k` when level `k + 1` was the deepest reached, [`Self::levels`] when the
    /// reference went to memory.
    #[inline]
    pub fn access(&mut self, kind: Kind, addr: u64, size: u32) -> u8 {
        let top = if kind == Kind::Instr {
            self.l1i
        } else {
            self.l1d
        };
        if self.fast_hit(top, kind, addr, size) {
            return 0;
        }
        self.deepest = 0;
        self.reference(top, kind, addr, size, true);
        self.deepest
    }

    /// Simulates a batch of references (the fast way to drive the simulator).
    pub fn run(&mut self, refs: &[pmlab_trace::Ref]) {
        let mut rest = refs;
        while let Some(r) = rest.first() {
            let hits = self.count_leading_hits(rest);
            if hits > 0 {
                rest = &rest[hits..];
                continue;
            }
            let top = if r.kind == Kind::Instr {
                self.l1i
            } else {
                self.l1d
            };
            self.deepest = 0;
            self.reference(top, r.kind, r.addr, r.size, true);
            rest = &rest[1..];
        }
    }

    /// Takes the level-1 hits at the start of `refs` (see [`leading_hits`]), counting
    /// them as fetches; returns how many there were.
    #[inline]
    fn count_leading_hits(&mut self, refs: &[pmlab_trace::Ref]) -> usize {
        let (Some(i), Some(d)) = (
            HitView::of(&self.caches[self.l1i]),
            HitView::of(&self.caches[self.l1d]),
        ) else {
            return 0;
        };
        let hits = leading_hits(refs, &[d, i]);
        if hits.refs > 0 {
            let instr = &mut self.caches[self.l1i];
            instr.fast_hits[Kind::Instr as usize] += hits.fetches.get(Kind::Instr);
            instr.stats.multi_block_refs += hits.multi_block.get(Kind::Instr);
            let data = &mut self.caches[self.l1d];
            for kind in [Kind::Read, Kind::Write, Kind::Misc] {
                data.fast_hits[kind as usize] += hits.fetches.get(kind);
                data.stats.multi_block_refs += hits.multi_block.get(kind);
            }
        }
        hits.refs
    }

    /// The common case, done without the general machinery: a single-block reference
    /// that hits the top way of its set (the only way of a direct-mapped cache, the most
    /// recently used one under LRU), so no replacement state changes, and that is not a
    /// write to a write-through cache. Returns false, having changed nothing, otherwise.
    #[inline(always)]
    fn fast_hit(&mut self, top: usize, kind: Kind, addr: u64, size: u32) -> bool {
        let c = &mut self.caches[top];
        let off = addr & c.block_mask;
        if off + u64::from(size.max(1)) > c.block_mask + 1 || !c.fast_ok {
            return false;
        }
        let blk = addr & !c.block_mask;
        let i = c.set_of(addr) * c.assoc;
        let w = c.ways[i];
        if (w | DIRTY) != (blk | VALID | DIRTY) {
            return false;
        }
        if kind == Kind::Write {
            if !c.cfg.write_back {
                return false;
            }
            c.ways[i] = w | DIRTY;
        }
        c.fast_hits[kind as usize] += 1;
        true
    }

    /// Dinero IV's `d4ref` on cache `ci`: splits at block boundaries and accesses each
    /// block in turn, each followed by the traffic it sends below.
    pub(crate) fn reference(&mut self, ci: usize, kind: Kind, addr: u64, size: u32, demand: bool) {
        // A zero-sized reference would underflow Dinero IV's split arithmetic; treat it
        // as touching its one byte.
        let mut size = u64::from(size.max(1));
        let mut addr = addr;
        loop {
            let c = &mut self.caches[ci];
            let bs = c.block_mask + 1;
            let off = addr & c.block_mask;
            let piece = size.min(bs - off);
            if piece < size {
                c.stats.multi_block_refs += 1;
            }
            self.access_piece(ci, kind, addr, piece as u32, demand);
            if piece == size {
                return;
            }
            addr = (addr & !(bs - 1)).wrapping_add(bs);
            size -= piece;
        }
    }

    fn access_piece(&mut self, ci: usize, kind: Kind, addr: u64, size: u32, demand: bool) {
        let c = &mut self.caches[ci];
        let blk = addr & !c.block_mask;
        let bs = c.block_mask + 1;
        let out = c.access_block(kind, blk);
        let is_write = kind == Kind::Write;
        let fetch = out.miss && (!is_write || (c.cfg.write_allocate && u64::from(size) != bs));
        if fetch {
            let k = if is_write { Kind::Read } else { kind };
            self.send(ci, k, blk, bs as u32, demand);
        }
        if is_write && !out.absorbed {
            self.send(ci, Kind::Write, addr, size, demand);
        }
        if let Some(v) = out.dirty_victim {
            self.caches[ci].stats.writebacks += 1;
            self.send(ci, Kind::Write, v, bs as u32, false);
        }
    }

    /// Sends traffic from cache `from` to the level below it.
    pub(crate) fn send(&mut self, from: usize, kind: Kind, addr: u64, size: u32, demand: bool) {
        let c = &mut self.caches[from];
        if kind == Kind::Write {
            c.stats.bytes_to_below += u64::from(size);
        } else {
            c.stats.bytes_from_below += u64::from(size);
        }
        match c.down {
            Some(d) => {
                if demand {
                    self.deepest = self
                        .deepest
                        .max((self.caches[d].level - 1 - self.first_level) as u8);
                }
                self.reference(d, kind, addr, size, demand)
            }
            None => {
                if demand {
                    self.deepest = self.levels as u8;
                }
                match self.log {
                    MemoryLog::Off => {}
                    MemoryLog::Writes => {
                        if kind == Kind::Write {
                            self.memory_ops.push((kind, addr, size));
                        }
                    }
                    MemoryLog::All => self.memory_ops.push((kind, addr, size)),
                }
            }
        }
    }

    /// Turns the log of writes reaching memory on or off (off by default).
    pub fn set_memory_write_log(&mut self, on: bool) {
        self.log = if on {
            MemoryLog::Writes
        } else {
            MemoryLog::Off
        };
        if !on {
            self.memory_ops.clear();
        }
    }

    /// Moves the logged memory writes into `out` (appending), in the order they reached
    /// memory: `(address, size)`, where a write-back is the block address and the block
    /// size of the last level, and a write passing the last level (write-through or
    /// no-write-allocate) is the write's own address and size.
    pub fn drain_memory_writes(&mut self, out: &mut Vec<(u64, u32)>) {
        out.extend(
            self.memory_ops
                .drain(..)
                .filter(|op| op.0 == Kind::Write)
                .map(|(_, a, s)| (a, s)),
        );
    }

    /// Writes the block holding `addr` back from every level, top down (a dirty copy goes
    /// to the level below as a write, and finally to memory), and invalidates it
    /// everywhere if `invalidate` (clflush / clflushopt) or keeps it clean (clwb).
    /// Counted in `flush_writebacks` / `flush_invalidations`, not as demand traffic;
    /// the write-backs do arrive at lower levels as writes, as in Dinero IV's copy-back.
    pub fn flush_block(&mut self, addr: u64, invalidate: bool) {
        for level in self.first_level + 1..=self.first_level + self.levels {
            for ci in 0..self.caches.len() {
                if self.caches[ci].level != level {
                    continue;
                }
                let blk = addr & !self.caches[ci].block_mask;
                if self.caches[ci].clean(blk) {
                    self.caches[ci].stats.flush_writebacks += 1;
                    let bs = (self.caches[ci].block_mask + 1) as u32;
                    self.send(ci, Kind::Write, blk, bs, false);
                }
                if invalidate && self.caches[ci].invalidate(blk) {
                    self.caches[ci].stats.flush_invalidations += 1;
                }
            }
        }
    }

    /// Dinero IV's end of simulation: copies every dirty block of the data-side chain
    /// back (level 1 first, each level's write-backs arriving below before that level
    /// is copied back in turn), leaving the blocks valid and clean. Call once after the
    /// last reference to get Dinero IV's final counters.
    pub fn finish(&mut self) {
        let mut ci = Some(self.l1d);
        while let Some(c) = ci {
            let dirty = self.caches[c].take_dirty();
            let bs = (self.caches[c].block_mask + 1) as u32;
            // Dinero IV stacks the write-backs and then pops them: last found, first sent.
            for &blk in dirty.iter().rev() {
                self.caches[c].stats.flush_writebacks += 1;
                self.send(c, Kind::Write, blk, bs, false);
            }
            ci = self.caches[c].down;
        }
    }

    /// Dinero IV's `-flushcount` action: copies every dirty block back (as
    /// [`Self::finish`]) and then invalidates every cache, emptying the classification's
    /// reference caches too.
    pub fn flush_all(&mut self) {
        self.finish();
        for c in &mut self.caches {
            c.invalidate_all();
        }
    }

    /// Counters of every cache in Dinero IV's report order (level by level; unified,
    /// then instruction, then data).
    pub fn stats(&self) -> Vec<NamedStats> {
        self.caches
            .iter()
            .map(|c| NamedStats {
                name: c.name.clone(),
                level: c.level,
                ccc: c.cfg.ccc,
                stats: c.stats(),
            })
            .collect()
    }
}

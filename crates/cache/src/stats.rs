//! Per-cache counters, as Dinero IV keeps them.

use pmlab_trace::Kind;

/// A counter for each kind of reference.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KindCounts {
    /// Data reads.
    pub read: u64,
    /// Data writes (including write-backs and write-throughs arriving from above).
    pub write: u64,
    /// Instruction fetches.
    pub instr: u64,
    /// Miscellaneous references.
    pub misc: u64,
}

impl KindCounts {
    /// All kinds together (Dinero IV's "Total" column).
    pub fn total(&self) -> u64 {
        self.instr + self.data()
    }

    /// Reads, writes and misc together (Dinero IV's "Data" column).
    pub fn data(&self) -> u64 {
        self.read + self.write + self.misc
    }

    /// The counter for one kind.
    pub fn get(&self, kind: Kind) -> u64 {
        match kind {
            Kind::Read => self.read,
            Kind::Write => self.write,
            Kind::Instr => self.instr,
            Kind::Misc => self.misc,
        }
    }

    /// Adds one to the counter for `kind`.
    #[inline(always)]
    pub fn bump(&mut self, kind: Kind) {
        match kind {
            Kind::Read => self.read += 1,
            Kind::Write => self.write += 1,
            Kind::Instr => self.instr += 1,
            Kind::Misc => self.misc += 1,
        }
    }
}

/// The counters of one cache. Field names follow Dinero IV's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CacheStats {
    /// Demand fetches: every single-block access that reached this cache.
    pub fetches: KindCounts,
    /// Demand misses.
    pub misses: KindCounts,
    /// Misses that also miss an infinite cache (first touch); only with `ccc`.
    pub compulsory: KindCounts,
    /// Misses that hit an infinite cache but miss a fully associative cache of the same
    /// size; only with `ccc`.
    pub capacity: KindCounts,
    /// Misses that hit a fully associative cache of the same size; only with `ccc`.
    pub conflict: KindCounts,
    /// References that spanned a block boundary, counted once per extra block.
    pub multi_block_refs: u64,
    /// Bytes this cache fetched from the level below ("Bytes From Memory").
    pub bytes_from_below: u64,
    /// Bytes this cache wrote to the level below ("Bytes To Memory").
    pub bytes_to_below: u64,
    /// Dirty blocks written back on replacement.
    pub writebacks: u64,
    /// Dirty blocks written back by [`crate::Hierarchy::flush_block`] or by the final
    /// copy-back of [`crate::Hierarchy::finish`] (not demand traffic).
    pub flush_writebacks: u64,
    /// Blocks invalidated by [`crate::Hierarchy::flush_block`].
    pub flush_invalidations: u64,
}

/// The counters of one cache with its place in the hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedStats {
    /// Dinero IV's name: `l1-icache`, `l1-dcache`, `l2-ucache`, ...
    pub name: String,
    /// Level, 1 closest to the processor.
    pub level: usize,
    /// Whether miss classification was on (Dinero IV prints the extra rows then).
    pub ccc: bool,
    /// The counters.
    pub stats: CacheStats,
}

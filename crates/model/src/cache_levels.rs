//! What the machine needs from a cache hierarchy.
//!
//! `pmlab-cache`'s Dinero IV-exact hierarchy provides it (see [`crate::adapters`]);
//! [`Uncached`] is the machine without caches.
//!
//! Caches are tag-only: the data lives in the persistence domain's images. The machine
//! asks a hierarchy which level served each reference (for timing) and which writes
//! reached memory (for durability and endurance).

use pmlab_trace::Kind;

/// A tag-only cache hierarchy.
pub trait CacheLevels: Send {
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

/// No caches at all: every reference goes to memory and every store is a memory write.
#[derive(Clone, Debug, Default)]
pub struct Uncached {
    writes: Vec<(u64, u32)>,
}

impl CacheLevels for Uncached {
    fn levels(&self) -> usize {
        0
    }

    fn access(&mut self, kind: Kind, addr: u64, size: u32) -> usize {
        if kind == Kind::Write {
            self.writes.push((addr, size));
        }
        0
    }

    fn flush_block(&mut self, _addr: u64, _invalidate: bool) {}

    fn drain_memory_writes(&mut self, out: &mut Vec<(u64, u32)>) {
        out.append(&mut self.writes);
    }
}

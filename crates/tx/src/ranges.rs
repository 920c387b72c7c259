//! Sets of byte ranges for the transactions: a batch's staged stores (the bytes a
//! structure wrote, merged into disjoint extents, which reach the protocol one store
//! per extent) and the undo log's snapshot set (which bytes already have their old
//! contents logged). The redo protocol's write set, kept as log records, is
//! [`crate::logset`].
//!
//! Both keep their ranges sorted and disjoint in a vector: a transaction touches few
//! ranges (two for a swap, a handful of nodes for a tree insert), where a vector search
//! beats a tree, and merging keeps the log free of duplicate records when a structure
//! writes the same node several times.

use pmlab_spine::{Addr, FlushKind, LINE, Memory, SpineError};

/// One extent of a [`WriteSet`]: `len` bytes for `addr`, stored at `off` in the arena.
#[derive(Clone, Copy, Debug)]
struct Extent {
    addr: Addr,
    len: u64,
    off: usize,
}

impl Extent {
    fn end(&self) -> Addr {
        self.addr + self.len
    }
}

/// The bytes a batch staged: disjoint extents in address order, overlapping or
/// adjacent writes merged (the later bytes win).
///
/// A transaction reads far more often than it writes, and mostly bytes it did not
/// write (a hash table's probe, say), so a read first asks a one-word filter of the
/// lines written: a bit per line hashed to 64, set by every insert. A read whose lines
/// have no bit set skips the search of the extents; a set bit (the line, or another
/// hashed to the same bit) searches them as before, so the filter changes no result.
#[derive(Clone, Debug, Default)]
pub(crate) struct WriteSet {
    extents: Vec<Extent>,
    arena: Vec<u8>,
    lines: u64,
}

/// The filter bits of the lines `[addr, end)` touches; all bits when they are many.
#[inline]
fn line_bits(addr: Addr, end: Addr) -> u64 {
    let (first, last) = (addr / LINE, (end - 1) / LINE);
    if last - first >= 8 {
        return u64::MAX;
    }
    (first..=last).fold(0, |m, l| {
        m | 1 << (l.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
    })
}

impl WriteSet {
    /// Forgets everything (keeping the allocations for the next transaction).
    pub(crate) fn clear(&mut self) {
        self.extents.clear();
        self.arena.clear();
        self.lines = 0;
    }

    /// Whether nothing was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    /// The extents as `(addr, bytes)`, in address order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Addr, &[u8])> + '_ {
        self.extents
            .iter()
            .map(|e| (e.addr, &self.arena[e.off..e.off + e.len as usize]))
    }

    /// Index range of the extents that overlap or touch `[addr, end)`.
    fn touching(&self, addr: Addr, end: Addr) -> (usize, usize) {
        let first = self.extents.partition_point(|e| e.end() < addr);
        let last = first + self.extents[first..].partition_point(|e| e.addr <= end);
        (first, last)
    }

    /// Records `data` at `addr` (not empty).
    pub(crate) fn insert(&mut self, addr: Addr, data: &[u8]) {
        let end = addr + data.len() as u64;
        let (first, last) = self.touching(addr, end);
        self.insert_touching(addr, data, (first, last));
    }

    fn insert_touching(&mut self, addr: Addr, data: &[u8], (first, last): (usize, usize)) {
        let end = addr + data.len() as u64;
        self.lines |= line_bits(addr, end);
        if last == first + 1 {
            let e = self.extents[first];
            if e.addr <= addr && end <= e.end() {
                let at = e.off + (addr - e.addr) as usize;
                self.arena[at..at + data.len()].copy_from_slice(data);
                return;
            }
        }
        let lo = self.extents[first..last]
            .first()
            .map_or(addr, |e| e.addr.min(addr));
        let hi = self.extents[first..last]
            .last()
            .map_or(end, |e| e.end().max(end));
        let off = self.arena.len();
        self.arena.resize(off + (hi - lo) as usize, 0);
        for i in first..last {
            let e = self.extents[i];
            let to = off + (e.addr - lo) as usize;
            self.arena.copy_within(e.off..e.off + e.len as usize, to);
        }
        let to = off + (addr - lo) as usize;
        self.arena[to..to + data.len()].copy_from_slice(data);
        let merged = Extent {
            addr: lo,
            len: hi - lo,
            off,
        };
        // `splice` would do, but costs a redo transaction's commit path more than
        // the two cases that almost every write is: a new extent, or one absorbing
        // its neighbours.
        if first == last {
            self.extents.insert(first, merged);
        } else {
            self.extents[first] = merged;
            self.extents.drain(first + 1..last);
        }
        self.debug_check_around(first);
    }

    /// Debug builds: the extent at `i` and its neighbours are in address order, apart
    /// (merging leaves no overlapping or adjacent pair) and inside the arena, the
    /// invariant `touching` and `overlay` rely on. Checking only where the set changed
    /// keeps an insert O(log n) when every insert before held the invariant.
    fn debug_check_around(&self, i: usize) {
        if cfg!(debug_assertions) {
            let lo = i.saturating_sub(1);
            let hi = (i + 2).min(self.extents.len());
            for w in self.extents[lo..hi].windows(2) {
                debug_assert!(
                    w[0].end() < w[1].addr,
                    "write set extents {w:?} overlap or touch"
                );
            }
            for e in &self.extents[lo..hi] {
                debug_assert!(
                    e.len > 0 && e.off + e.len as usize <= self.arena.len(),
                    "extent {e:?} outside the arena"
                );
            }
        }
    }

    /// Lays the recorded bytes that overlap `[addr, addr + buf.len())` over `buf`.
    #[inline]
    pub(crate) fn overlay(&self, addr: Addr, buf: &mut [u8]) {
        let end = addr + buf.len() as u64;
        if buf.is_empty() || self.lines & line_bits(addr, end) == 0 {
            return;
        }
        self.overlay_extents(addr, buf);
    }

    /// [`WriteSet::overlay`] past the filter: the search of the extents.
    fn overlay_extents(&self, addr: Addr, buf: &mut [u8]) {
        let end = addr + buf.len() as u64;
        let first = self.extents.partition_point(|e| e.end() <= addr);
        for e in &self.extents[first..] {
            if e.addr >= end {
                break;
            }
            let (s, t) = (e.addr.max(addr), e.end().min(end));
            let src = e.off + (s - e.addr) as usize;
            buf[(s - addr) as usize..(t - addr) as usize]
                .copy_from_slice(&self.arena[src..src + (t - s) as usize]);
        }
    }
}

/// Flushes the lines of `ranges` (sorted by address, disjoint) as merged runs.
pub(crate) fn flush_line_runs<M: Memory + ?Sized>(
    mem: &mut M,
    ranges: impl Iterator<Item = (Addr, u64)>,
) -> Result<(), SpineError> {
    let size = mem.size();
    let mut run: Option<(u64, u64)> = None;
    let flush = |mem: &mut M, (first, last): (u64, u64)| {
        let start = first * LINE;
        let end = ((last + 1) * LINE).min(size);
        mem.flush(start, end - start, FlushKind::Clwb)
    };
    for (addr, len) in ranges.filter(|&(_, l)| l > 0) {
        let (first, last) = (addr / LINE, (addr + len - 1) / LINE);
        run = match run {
            Some((f, l)) if first <= l + 1 => Some((f, l.max(last))),
            Some(done) => {
                flush(mem, done)?;
                Some((first, last))
            }
            None => Some((first, last)),
        };
    }
    if let Some(done) = run {
        flush(mem, done)?;
    }
    Ok(())
}

/// A set of byte ranges: sorted, disjoint, adjacent ones merged.
#[derive(Clone, Debug, Default)]
pub(crate) struct RangeSet {
    ranges: Vec<(Addr, Addr)>,
}

impl RangeSet {
    /// Empties the set (keeping the allocation).
    pub(crate) fn clear(&mut self) {
        self.ranges.clear();
    }

    /// The ranges as `(addr, len)`, in address order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Addr, u64)> + '_ {
        self.ranges.iter().map(|&(s, e)| (s, e - s))
    }

    /// The parts of `[addr, addr + len)` not in the set, in order, into `out`.
    pub(crate) fn missing(&self, addr: Addr, len: u64, out: &mut Vec<(Addr, u64)>) {
        let end = addr + len;
        let mut at = addr;
        let first = self.ranges.partition_point(|&(_, e)| e <= addr);
        for &(s, e) in &self.ranges[first..] {
            if s >= end {
                break;
            }
            if s > at {
                out.push((at, s - at));
            }
            at = at.max(e);
        }
        if at < end {
            out.push((at, end - at));
        }
    }

    /// Adds `[addr, addr + len)`.
    pub(crate) fn insert(&mut self, addr: Addr, len: u64) {
        if len == 0 {
            return;
        }
        let end = addr + len;
        let first = self.ranges.partition_point(|&(_, e)| e < addr);
        let last = first + self.ranges[first..].partition_point(|&(s, _)| s <= end);
        let lo = self.ranges[first..last]
            .first()
            .map_or(addr, |r| r.0.min(addr));
        let hi = self.ranges[first..last]
            .last()
            .map_or(end, |r| r.1.max(end));
        self.ranges.splice(first..last, [(lo, hi)]);
        if cfg!(debug_assertions) {
            // Sorted, non-empty and apart around the change: what `missing` relies on.
            let lo = first.saturating_sub(1);
            let hi = (first + 2).min(self.ranges.len());
            for w in self.ranges[lo..hi].windows(2) {
                debug_assert!(w[0].1 < w[1].0, "ranges {w:?} overlap or touch");
            }
            debug_assert!(
                self.ranges[lo..hi].iter().all(|r| r.0 < r.1),
                "an empty range"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// The write set against a byte-array model: every read overlays exactly the last
    /// bytes written, and the extents stay sorted, disjoint and non-adjacent.
    #[test]
    fn write_set_matches_a_byte_model() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..200 {
            let mut ws = WriteSet::default();
            let mut model: Vec<Option<u8>> = vec![None; 512];
            for _ in 0..rng.gen_range(1..20) {
                let len = rng.gen_range(1..40usize);
                let addr = rng.gen_range(0..512 - len);
                let data: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
                ws.insert(addr as u64, &data);
                for (i, b) in data.iter().enumerate() {
                    model[addr + i] = Some(*b);
                }
                // Small reads anywhere (most of them pass the line filter alone) see
                // exactly the model's bytes.
                for _ in 0..8 {
                    let len = rng.gen_range(1..24usize);
                    let at = rng.gen_range(0..512 - len);
                    let mut buf = vec![0x55u8; len];
                    ws.overlay(at as u64, &mut buf);
                    for (i, b) in buf.iter().enumerate() {
                        assert_eq!(*b, model[at + i].unwrap_or(0x55), "byte {}", at + i);
                    }
                }
            }
            let mut buf = vec![0xAAu8; 512];
            ws.overlay(0, &mut buf);
            for (i, m) in model.iter().enumerate() {
                assert_eq!(buf[i], m.unwrap_or(0xAA), "byte {i}");
            }
            let ext: Vec<(u64, u64)> = ws.iter().map(|(a, d)| (a, d.len() as u64)).collect();
            for w in ext.windows(2) {
                assert!(w[0].0 + w[0].1 < w[1].0, "{ext:?}");
            }
            let covered: usize = ext.iter().map(|e| e.1 as usize).sum();
            assert_eq!(covered, model.iter().filter(|m| m.is_some()).count());
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "overlap or touch")]
    fn the_invariant_check_catches_touching_extents() {
        // Two adjacent extents are what a broken merge would leave behind.
        let w = WriteSet {
            extents: vec![
                Extent {
                    addr: 0,
                    len: 4,
                    off: 0,
                },
                Extent {
                    addr: 4,
                    len: 4,
                    off: 4,
                },
            ],
            arena: vec![0; 8],
            lines: u64::MAX,
        };
        w.debug_check_around(0);
    }

    #[test]
    fn range_set_reports_what_is_missing() {
        let mut s = RangeSet::default();
        s.insert(10, 10); // [10, 20)
        s.insert(30, 5); // [30, 35)
        let mut out = Vec::new();
        s.missing(0, 40, &mut out);
        assert_eq!(out, vec![(0, 10), (20, 10), (35, 5)]);
        out.clear();
        s.missing(12, 5, &mut out);
        assert!(out.is_empty());
        s.insert(20, 10); // joins both
        out.clear();
        s.missing(10, 25, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(s.ranges, vec![(10, 35)]);
    }

    #[test]
    fn line_runs_merge_adjacent_lines() {
        let mut m = pmlab_spine::VecMemory::new(4096);
        flush_line_runs(
            &mut m,
            [(0u64, 8u64), (60, 8), (200, 1), (1000, 0)].into_iter(),
        )
        .unwrap();
        // Lines 0..=1 as one run, line 3 alone.
        assert_eq!(m.persist_counters().flushes, 3);
    }
}

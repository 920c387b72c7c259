//! The pool of available page frames, indexed by cache bin.

use crate::Pfn;
use crate::bin_tree::BinTree;
use crate::lru::NIL;

/// The frames available for mapping: the bottom `K` frames of the global LRU list
/// (the paper's Figure 9). Some may still hold a page; taking such a frame unmaps it.
///
/// The pool is indexed by the bins of the placement policy's target cache:
/// * per bin, a list of its pool frames in LRU order, so the least recently used frame
///   of a bin is found in O(1);
/// * the free bin tree of the Hierarchical Heuristic (system-wide, section 3.2.4), whose
///   leaves are the paper's `free` counts per bin;
/// * a bitset of bins with a free frame, for bin hopping's search of the next bin;
/// * a dense member array, for a uniform random pick in O(1).
#[derive(Debug, Clone)]
pub struct Pool {
    bins: u32,
    in_pool: Vec<bool>,
    bin_prev: Vec<Pfn>,
    bin_next: Vec<Pfn>,
    /// Per bin: most recently used pool frame of the bin.
    bin_head: Vec<Pfn>,
    /// Per bin: least recently used pool frame of the bin.
    bin_tail: Vec<Pfn>,
    free: BinTree,
    nonempty: Vec<u64>,
    members: Vec<Pfn>,
    position: Vec<u32>,
    oldest: Pfn,
}

impl Pool {
    pub(crate) fn new(frames: usize, bins: u32) -> Self {
        Pool {
            bins,
            in_pool: vec![false; frames],
            bin_prev: vec![NIL; frames],
            bin_next: vec![NIL; frames],
            bin_head: vec![NIL; bins as usize],
            bin_tail: vec![NIL; bins as usize],
            free: BinTree::new(bins),
            nonempty: vec![0; (bins as usize).div_ceil(64)],
            members: Vec::new(),
            position: vec![u32::MAX; frames],
            oldest: NIL,
        }
    }

    /// The number of available frames (`K`, once memory holds at least `K` frames).
    #[inline]
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether no frame is available.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether `pfn` is in the pool.
    #[inline]
    pub fn contains(&self, pfn: Pfn) -> bool {
        self.in_pool[pfn as usize]
    }

    /// The number of bins the pool is indexed by.
    pub fn bins(&self) -> u32 {
        self.bins
    }

    /// The bin of `pfn` in the pool's indexing.
    #[inline]
    pub fn bin_of(&self, pfn: Pfn) -> u32 {
        pfn & (self.bins - 1)
    }

    /// The `i`-th member in an arbitrary order (`i < len()`), for uniform random picks.
    #[inline]
    pub fn nth(&self, i: usize) -> Pfn {
        self.members[i]
    }

    /// The least recently used frame of all: the bottom of the LRU list, the frame a
    /// mapper without preferences takes ("likely the first available", section 3.2.1).
    #[inline]
    pub fn oldest(&self) -> Pfn {
        self.oldest
    }

    /// The number of available frames in `bin` (the paper's `free`).
    #[inline]
    pub fn free_in_bin(&self, bin: u32) -> u32 {
        self.free.leaf(bin)
    }

    /// The least recently used available frame in `bin`, if any.
    #[inline]
    pub fn lru_in_bin(&self, bin: u32) -> Option<Pfn> {
        let f = self.bin_tail[bin as usize];
        (f != NIL).then_some(f)
    }

    /// The system-wide free bin tree.
    pub fn free_tree(&self) -> &BinTree {
        &self.free
    }

    /// The first bin at or after `from` (cyclically) with an available frame.
    pub fn next_bin_with_free(&self, from: u32) -> Option<u32> {
        let words = self.nonempty.len();
        let from = from & (self.bins - 1);
        let (w0, b0) = ((from / 64) as usize, from % 64);
        let first = self.nonempty[w0] & (u64::MAX << b0);
        if first != 0 {
            return Some(w0 as u32 * 64 + first.trailing_zeros());
        }
        for k in 1..=words {
            let w = (w0 + k) % words;
            let mut bits = self.nonempty[w];
            if w == w0 {
                bits &= !(u64::MAX << b0);
            }
            if bits != 0 {
                return Some(w as u32 * 64 + bits.trailing_zeros());
            }
        }
        None
    }

    pub(crate) fn set_oldest(&mut self, pfn: Pfn) {
        self.oldest = pfn;
    }

    fn note_added(&mut self, pfn: Pfn) {
        let bin = self.bin_of(pfn);
        self.in_pool[pfn as usize] = true;
        self.free.add(bin);
        self.nonempty[(bin / 64) as usize] |= 1 << (bin % 64);
        self.position[pfn as usize] = self.members.len() as u32;
        self.members.push(pfn);
    }

    /// Adds `pfn` as the most recently used pool frame (it joined at the pool's top).
    pub(crate) fn insert_top(&mut self, pfn: Pfn) {
        debug_assert!(!self.contains(pfn));
        let bin = self.bin_of(pfn) as usize;
        let head = self.bin_head[bin];
        self.bin_prev[pfn as usize] = NIL;
        self.bin_next[pfn as usize] = head;
        if head == NIL {
            self.bin_tail[bin] = pfn;
        } else {
            self.bin_prev[head as usize] = pfn;
        }
        self.bin_head[bin] = pfn;
        self.note_added(pfn);
    }

    /// Adds `pfn` as the least recently used pool frame (released to the bottom).
    pub(crate) fn insert_bottom(&mut self, pfn: Pfn) {
        debug_assert!(!self.contains(pfn));
        let bin = self.bin_of(pfn) as usize;
        let tail = self.bin_tail[bin];
        self.bin_next[pfn as usize] = NIL;
        self.bin_prev[pfn as usize] = tail;
        if tail == NIL {
            self.bin_head[bin] = pfn;
        } else {
            self.bin_next[tail as usize] = pfn;
        }
        self.bin_tail[bin] = pfn;
        self.note_added(pfn);
    }

    /// Removes `pfn` from the pool.
    pub(crate) fn remove(&mut self, pfn: Pfn) {
        debug_assert!(self.contains(pfn));
        let bin = self.bin_of(pfn);
        let (p, n) = (self.bin_prev[pfn as usize], self.bin_next[pfn as usize]);
        if p == NIL {
            self.bin_head[bin as usize] = n;
        } else {
            self.bin_next[p as usize] = n;
        }
        if n == NIL {
            self.bin_tail[bin as usize] = p;
        } else {
            self.bin_prev[n as usize] = p;
        }
        self.in_pool[pfn as usize] = false;
        self.free.remove(bin);
        if self.free.leaf(bin) == 0 {
            self.nonempty[(bin / 64) as usize] &= !(1 << (bin % 64));
        }
        let at = self.position[pfn as usize] as usize;
        let last = self.members.pop().expect("pool is empty");
        if last != pfn {
            self.members[at] = last;
            self.position[last as usize] = at as u32;
        }
        self.position[pfn as usize] = u32::MAX;
    }

    /// The pool frames of `bin` from least to most recently used (O(len), for checks).
    pub(crate) fn bin_frames_lru_first(&self, bin: u32) -> Vec<Pfn> {
        let mut v = Vec::new();
        let mut f = self.bin_tail[bin as usize];
        while f != NIL {
            v.push(f);
            f = self.bin_prev[f as usize];
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_keep_lru_order_and_counts() {
        let mut p = Pool::new(16, 4);
        p.insert_top(1);
        p.insert_top(5);
        p.insert_bottom(9);
        p.insert_top(2);
        assert_eq!(p.len(), 4);
        assert_eq!(p.free_in_bin(1), 3);
        assert_eq!(p.lru_in_bin(1), Some(9));
        assert_eq!(p.bin_frames_lru_first(1), vec![9, 1, 5]);
        p.remove(9);
        assert_eq!(p.lru_in_bin(1), Some(1));
        assert_eq!(p.next_bin_with_free(3), Some(1));
        assert_eq!(p.next_bin_with_free(2), Some(2));
        p.remove(2);
        assert_eq!(p.next_bin_with_free(2), Some(1));
        assert_eq!(p.lru_in_bin(0), None);
        assert_eq!(p.free_tree().total(), 2);
        assert!((0..p.len()).all(|i| p.contains(p.nth(i))));
    }

    #[test]
    fn next_bin_wraps_over_many_words() {
        let mut p = Pool::new(1024, 256);
        p.insert_top(3);
        p.insert_top(200);
        assert_eq!(p.next_bin_with_free(201), Some(3));
        assert_eq!(p.next_bin_with_free(4), Some(200));
        assert_eq!(p.next_bin_with_free(3), Some(3));
    }
}

//! libFS's pool of data pages reserved to it, per domain, as merged runs.
//!
//! KVFS reserves objects' extents many at once and uses one whole extent per put; PXFS
//! takes single pages. As runs, an extent is checked and taken in a step or two instead
//! of a set operation per page, and single pages cost what they did in a sorted set.

use rangemap::RangeSet;

/// Reserved, not yet used pages of one domain.
#[derive(Debug, Default)]
pub struct PagePool {
    runs: RangeSet<u64>,
    /// Pages in `runs` (a `RangeSet` does not count them).
    len: u64,
}

impl PagePool {
    /// Adds the pages granted by a reservation (in the order the service lists them;
    /// runs of consecutive pages are added in one step and merge with their neighbours).
    pub fn extend(&mut self, pages: impl IntoIterator<Item = u64>) {
        for (start, end) in runs_of(pages) {
            debug_assert!(!self.runs.overlaps(&(start..end)), "page reserved twice");
            self.runs.insert(start..end);
            self.len += end - start;
        }
    }

    /// Removes pages used by a batch (those not in the pool are ignored).
    pub fn remove(&mut self, pages: impl IntoIterator<Item = u64>) {
        for (start, end) in runs_of(pages) {
            let held: u64 = self
                .runs
                .overlapping(&(start..end))
                .map(|r| r.end.min(end) - r.start.max(start))
                .sum();
            self.runs.remove(start..end);
            self.len -= held;
        }
    }

    /// Takes the pool's pages among `start..end` out: their runs, lowest first.
    pub fn take_range(&mut self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let held: Vec<(u64, u64)> = self
            .runs
            .overlapping(&(start..end))
            .map(|r| (r.start.max(start), r.end.min(end)))
            .collect();
        self.runs.remove(start..end);
        self.len -= held.iter().map(|(a, b)| b - a).sum::<u64>();
        held
    }

    /// Whether page `p` is in the pool.
    pub fn contains(&self, p: u64) -> bool {
        self.runs.contains(&p)
    }

    /// The first of pages `first .. first + count` not in the pool, if any.
    pub fn first_missing(&self, first: u64, count: u64) -> Option<u64> {
        let end = first.saturating_add(count);
        self.runs.gaps(&(first..end)).next().map(|g| g.start)
    }

    /// The lowest page in the pool.
    pub fn first(&self) -> Option<u64> {
        self.runs.iter().next().map(|r| r.start)
    }

    /// The pool's runs of consecutive pages, as `(first, end)`, lowest first.
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.runs.iter().map(|r| (r.start, r.end))
    }

    /// Takes up to `max` pages from the lowest run: one run of consecutive pages,
    /// `(first, count)`, or `None` if the pool is empty.
    pub fn take_run(&mut self, max: u64) -> Option<(u64, u64)> {
        let r = self.runs.iter().next()?.clone();
        let n = (r.end - r.start).min(max.max(1));
        self.runs.remove(r.start..r.start + n);
        self.len -= n;
        Some((r.start, n))
    }

    /// Pages in the pool.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Ascending page numbers as runs `(start, end)` of consecutive pages.
fn runs_of(pages: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for p in pages {
        match out.last_mut() {
            Some((_, end)) if *end == p => *end += 1,
            _ => out.push((p, p + 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_and_count() {
        let mut pool = PagePool::default();
        pool.extend([3, 4, 5, 9]);
        pool.extend(10..42);
        assert_eq!(pool.len(), 36);
        assert_eq!(pool.first(), Some(3));
        assert!(pool.contains(4) && pool.contains(41) && !pool.contains(6));
        assert_eq!(pool.first_missing(9, 33), None);
        assert_eq!(pool.first_missing(3, 4), Some(6));
        assert_eq!(pool.first_missing(40, 4), Some(42));
        // An extent taken whole; pages outside the pool count for nothing.
        pool.remove(9..41);
        pool.remove([100, 101]);
        assert_eq!(pool.len(), 4);
        assert!(pool.contains(41) && !pool.contains(9));
        pool.remove([3, 4, 5, 41]);
        assert!(pool.is_empty() && pool.first().is_none());
        pool.extend([7, 8, 9, 20]);
        assert_eq!(pool.take_run(2), Some((7, 2)));
        assert_eq!(pool.take_run(5), Some((9, 1)));
        assert_eq!(pool.runs().collect::<Vec<_>>(), vec![(20, 21)]);
        assert_eq!(pool.take_run(5), Some((20, 1)));
        assert_eq!((pool.take_run(1), pool.len()), (None, 0));
        pool.extend([1, 2, 3, 7, 8, 12]);
        assert_eq!(pool.take_range(2, 8), vec![(2, 4), (7, 8)]);
        assert_eq!(pool.len(), 3);
        assert_eq!(
            pool.runs().collect::<Vec<_>>(),
            vec![(1, 2), (8, 9), (12, 13)]
        );
        assert_eq!(pool.take_range(20, 30), vec![]);
    }
}

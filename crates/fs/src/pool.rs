//! libFS's pool of data pages reserved to it, per domain, as merged runs.
//!
//! KVFS reserves objects' extents many at once and uses one whole extent per put; PXFS
//! takes single pages. As runs, an extent is checked and taken in a step or two instead
//! of a set operation per page, and single pages cost what they did in a sorted set.
//!
//! The runs are a sorted vector, searched by bisection: a pool holds few runs (a
//! reservation is granted as runs of consecutive pages, and pages leave from the low
//! end), so taking the lowest page is a change to the first run in place. A range map
//! (the `rangemap` crate, used here before) spent a tenth of an append's instructions
//! in its tree searches and node allocations.

/// Reserved, not yet used pages of one domain.
#[derive(Debug, Default)]
pub struct PagePool {
    /// Disjoint, non-adjacent runs `(start, end)`, ascending.
    runs: Vec<(u64, u64)>,
    /// Pages in `runs`.
    len: u64,
}

impl PagePool {
    /// Adds the pages granted by a reservation (in the order the service lists them;
    /// runs of consecutive pages are added in one step and merge with their neighbours).
    pub fn extend(&mut self, pages: impl IntoIterator<Item = u64>) {
        for_each_run(pages, |start, end| self.add_range(start, end));
    }

    /// Adds pages `start..end`, none of them in the pool yet.
    pub fn add_range(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        debug_assert!(
            self.overlapping(start, end).is_empty(),
            "page reserved twice"
        );
        self.insert_run(start, end);
        self.len += end - start;
    }

    /// Removes pages used by a batch (those not in the pool are ignored).
    pub fn remove(&mut self, pages: impl IntoIterator<Item = u64>) {
        for_each_run(pages, |start, end| self.cut(start, end, |_, _| {}));
    }

    /// Removes the pool's pages among `start..end` (those not in it are ignored).
    pub fn remove_range(&mut self, start: u64, end: u64) {
        self.cut(start, end, |_, _| {});
    }

    /// Takes the pool's pages among `start..end` out: their runs, lowest first.
    pub fn take_range(&mut self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut held = Vec::new();
        self.cut(start, end, |a, b| held.push((a, b)));
        held
    }

    /// Moves the pool's pages among `start..end` to `to`.
    pub fn move_range(&mut self, start: u64, end: u64, to: &mut PagePool) {
        self.cut(start, end, |a, b| to.add_range(a, b));
    }

    /// Takes the pool's pages among `start..end` out, handing each run taken to
    /// `held`, lowest first. Allocates nothing: every recorded write takes its pages
    /// out of two pools, and a vector per step was a tenth of an append's allocations.
    fn cut(&mut self, start: u64, end: u64, mut held: impl FnMut(u64, u64)) {
        let span = self.overlapping(start, end);
        if span.is_empty() {
            return;
        }
        for &(a, b) in &self.runs[span.clone()] {
            let (a, b) = (a.max(start), b.min(end));
            self.len -= b - a;
            held(a, b);
        }
        // What is left of the first and last runs outside `start..end`.
        let (first, last) = (self.runs[span.start], self.runs[span.end - 1]);
        let keep = [(first.0, start), (end, last.1)];
        self.runs
            .splice(span, keep.into_iter().filter(|&(a, b)| a < b));
    }

    /// Whether page `p` is in the pool.
    pub fn contains(&self, p: u64) -> bool {
        let i = self.runs.partition_point(|&(_, end)| end <= p);
        self.runs.get(i).is_some_and(|&(start, _)| start <= p)
    }

    /// The first of pages `first .. first + count` not in the pool, if any.
    pub fn first_missing(&self, first: u64, count: u64) -> Option<u64> {
        let end = first.saturating_add(count);
        if first >= end {
            return None;
        }
        let i = self.runs.partition_point(|&(_, e)| e <= first);
        match self.runs.get(i) {
            Some(&(s, e)) if s <= first => (e < end).then_some(e),
            _ => Some(first),
        }
    }

    /// The lowest page in the pool.
    pub fn first(&self) -> Option<u64> {
        self.runs.first().map(|r| r.0)
    }

    /// The pool's runs of consecutive pages, as `(first, end)`, lowest first.
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.runs.iter().copied()
    }

    /// Takes up to `max` pages from the lowest run: one run of consecutive pages,
    /// `(first, count)`, or `None` if the pool is empty.
    pub fn take_run(&mut self, max: u64) -> Option<(u64, u64)> {
        let (start, end) = *self.runs.first()?;
        let n = (end - start).min(max.max(1));
        self.remove_range(start, start + n);
        Some((start, n))
    }

    /// Pages in the pool.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The indices of the runs that overlap `start..end`.
    fn overlapping(&self, start: u64, end: u64) -> std::ops::Range<usize> {
        if start >= end {
            return 0..0;
        }
        let from = self.runs.partition_point(|&(_, e)| e <= start);
        let to = from + self.runs[from..].partition_point(|&(s, _)| s < end);
        from..to
    }

    /// Adds run `start..end` (overlapping none), merging it with runs it touches.
    fn insert_run(&mut self, start: u64, end: u64) {
        let i = self.runs.partition_point(|&(_, e)| e < start);
        let joins_before = self.runs.get(i).is_some_and(|&(_, e)| e == start);
        let after = if joins_before { i + 1 } else { i };
        let joins_after = self.runs.get(after).is_some_and(|&(s, _)| s == end);
        match (joins_before, joins_after) {
            (true, true) => {
                self.runs[i].1 = self.runs[after].1;
                self.runs.remove(after);
            }
            (true, false) => self.runs[i].1 = end,
            (false, true) => self.runs[after].0 = start,
            (false, false) => self.runs.insert(i, (start, end)),
        }
    }
}

/// Hands ascending page numbers to `run` as runs `(start, end)` of consecutive pages.
fn for_each_run(pages: impl IntoIterator<Item = u64>, mut run: impl FnMut(u64, u64)) {
    let mut cur: Option<(u64, u64)> = None;
    for p in pages {
        cur = match cur {
            Some((start, end)) if end == p => Some((start, end + 1)),
            Some((start, end)) => {
                run(start, end);
                Some((p, p + 1))
            }
            None => Some((p, p + 1)),
        };
    }
    if let Some((start, end)) = cur {
        run(start, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// One step on a pool and on its model, a plain set of pages.
    #[derive(Debug, Clone)]
    enum Step {
        Extend(u64, u64),
        Remove(Vec<u64>),
        TakeRange(u64, u64),
        TakeRun(u64),
        /// Moves pages to a second pool and back again, by `move_range`.
        MoveAndBack(u64, u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u64..200, 1u64..20).prop_map(|(a, n)| Step::Extend(a, a + n)),
            proptest::collection::vec(0u64..220, 0..6).prop_map(|mut v| {
                v.sort_unstable();
                v.dedup();
                Step::Remove(v)
            }),
            (0u64..220, 0u64..40).prop_map(|(a, n)| Step::TakeRange(a, a + n)),
            (0u64..10).prop_map(Step::TakeRun),
            (0u64..220, 0u64..40).prop_map(|(a, n)| Step::MoveAndBack(a, a + n)),
        ]
    }

    proptest! {
        /// Every operation agrees with a set of pages: what it holds, what it gives
        /// out, its count, its lowest page, its gaps, and its runs stay merged.
        #[test]
        fn runs_agree_with_a_set_of_pages(steps in proptest::collection::vec(step(), 1..60)) {
            let mut pool = PagePool::default();
            let mut set = BTreeSet::new();
            for st in steps {
                match st {
                    Step::Extend(a, b) => {
                        // Reservations never grant a page twice.
                        let fresh: Vec<u64> = (a..b).filter(|p| !set.contains(p)).collect();
                        pool.extend(fresh.iter().copied());
                        set.extend(fresh);
                    }
                    Step::Remove(v) => {
                        pool.remove(v.iter().copied());
                        for p in v { set.remove(&p); }
                    }
                    Step::TakeRange(a, b) => {
                        let got: Vec<u64> = pool.take_range(a, b).into_iter().flat_map(|(x, y)| x..y).collect();
                        let want: Vec<u64> = set.range(a..b.max(a)).copied().collect();
                        for p in &want { set.remove(p); }
                        prop_assert_eq!(got, want);
                    }
                    Step::TakeRun(max) => {
                        let got = pool.take_run(max);
                        let want = set.first().map(|&f| {
                            let n = (f..).take_while(|p| set.contains(p)).count() as u64;
                            (f, n.min(max.max(1)))
                        });
                        if let Some((f, n)) = want { for p in f..f + n { set.remove(&p); } }
                        prop_assert_eq!(got, want);
                    }
                    Step::MoveAndBack(a, b) => {
                        let mut other = PagePool::default();
                        pool.move_range(a, b, &mut other);
                        let moved: Vec<u64> = other.runs().flat_map(|(x, y)| x..y).collect();
                        let want: Vec<u64> = set.range(a..b.max(a)).copied().collect();
                        prop_assert_eq!(&moved, &want);
                        prop_assert_eq!(other.len(), want.len() as u64);
                        prop_assert_eq!(pool.len() + other.len(), set.len() as u64);
                        other.move_range(0, u64::MAX, &mut pool);
                        prop_assert!(other.is_empty());
                    }
                }
                prop_assert_eq!(pool.len(), set.len() as u64);
                prop_assert_eq!(pool.first(), set.first().copied());
                let runs: Vec<(u64, u64)> = pool.runs().collect();
                prop_assert!(runs.windows(2).all(|w| w[0].1 < w[1].0), "runs not merged: {:?}", runs);
                let listed: Vec<u64> = runs.iter().flat_map(|&(a, b)| a..b).collect();
                prop_assert_eq!(&listed, &set.iter().copied().collect::<Vec<_>>());
                for p in 0..230 {
                    prop_assert_eq!(pool.contains(p), set.contains(&p));
                }
                for first in (0..230).step_by(7) {
                    let want = (first..first + 9).find(|p| !set.contains(p));
                    prop_assert_eq!(pool.first_missing(first, 9), want);
                }
            }
        }
    }

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

//! The bin ranking function shared by the Sequential and Hierarchical heuristics.

use std::cmp::Ordering;

/// The paper's `<used, free>` pair of a bin (or of a bin-tree node): `used` pages of the
/// mapping address space, and `free` available frames system-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinState {
    /// Pages of this address space mapped to the bin.
    pub used: u32,
    /// Frames of the bin in the pool.
    pub free: u32,
}

/// Ranks two bins; `Greater` means `a` is preferred, `Equal` that the rules cannot tell.
///
/// Section 3.2.3: "The specific rules used for the ranking, in priority order are:
/// (1) the bin must have at least one free page frame, (2) the bin should have the
/// fewest pages used by this address space, and (3) the bin should have the most page
/// frames available. [...] If these rules fail to produce a preferable bin, an arbitrary
/// choice can be made, such as a random choice." Callers break `Equal` at random.
#[inline]
pub fn rank(a: BinState, b: BinState) -> Ordering {
    // Rule (1): having a free frame beats having none.
    (a.free > 0)
        .cmp(&(b.free > 0))
        // Rule (2): fewer pages of this address space is better.
        .then(b.used.cmp(&a.used))
        // Rule (3): more available frames is better.
        .then(a.free.cmp(&b.free))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(used: u32, free: u32) -> BinState {
        BinState { used, free }
    }

    #[test]
    fn rules_in_priority_order() {
        // Rule 1 dominates: a bin without free frames loses even with no pages used.
        assert_eq!(rank(s(5, 1), s(0, 0)), Ordering::Greater);
        // Rule 2 before rule 3.
        assert_eq!(rank(s(1, 1), s(2, 9)), Ordering::Greater);
        // Rule 3 breaks equal use.
        assert_eq!(rank(s(3, 6), s(3, 3)), Ordering::Greater);
        assert_eq!(rank(s(3, 3), s(3, 3)), Ordering::Equal);
        // Figure 6: <1,3> is the best bin.
        let bins = [s(2, 1), s(1, 3), s(3, 4), s(0, 0), s(1, 1)];
        let best = bins.iter().max_by(|a, b| rank(**a, **b)).unwrap();
        assert_eq!(*best, s(1, 3));
    }
}

//! The Hierarchical Heuristic (section 3.2.4).

use std::cmp::Ordering;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::used::UsedBins;
use super::{BinState, PlacementPolicy, rank};
use crate::{Asid, BinTree, CacheGeometry, Pfn, Pool, Vpn};

/// Chooses a bin by walking the `used` and `free` bin trees from the root to a leaf.
///
/// "The decision at each node is made based on the <used, free> pairs corresponding to
/// the two children of the node. The traversal direction is determined by precisely the
/// bin ranking heuristic function used by the Sequential Heuristic." Exact ties go to a
/// child drawn from `rng`. With bit-reversed labels (see [`BinTree`]) the decision at
/// depth `d` fixes bit `d` of the frame number: the first decision is the one a 2-bin
/// cache needs, the next one a 4-bin cache, and so on; hence cache-size independence.
/// `log2 B` decisions: O(log B).
pub fn traverse(used: &BinTree, free: &BinTree, rng: &mut impl Rng) -> u32 {
    debug_assert_eq!(used.depth(), free.depth());
    let mut label = 0u32;
    for d in 0..free.depth() {
        let left = label;
        let right = label | (1 << d);
        let l = BinState {
            used: used.node(d + 1, left),
            free: free.node(d + 1, left),
        };
        let r = BinState {
            used: used.node(d + 1, right),
            free: free.node(d + 1, right),
        };
        label = match rank(l, r) {
            Ordering::Greater => left,
            Ordering::Less => right,
            Ordering::Equal => {
                if rng.gen_bool(0.5) {
                    left
                } else {
                    right
                }
            }
        };
    }
    label
}

/// The Hierarchical Heuristic: a system-wide free bin tree (kept by the [`Pool`]) and a
/// used bin tree per address space, walked by [`traverse`]. The frame taken is the
/// chosen bin's least recently used pool frame. The chosen bin always has a free frame:
/// the walk starts at a root with free frames and rule (1) never descends into a subtree
/// without any.
#[derive(Debug, Clone)]
pub struct Hierarchical {
    bins: u32,
    rng: Xoshiro256PlusPlus,
    used: UsedBins,
}

impl Hierarchical {
    /// The Hierarchical Heuristic for the bins of `geometry`, ties broken from `seed`.
    pub fn new(geometry: CacheGeometry, seed: u64) -> Self {
        Hierarchical {
            bins: geometry.bins(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            used: UsedBins::new(geometry.bins()),
        }
    }
}

impl PlacementPolicy for Hierarchical {
    fn name(&self) -> &'static str {
        "hierarchical"
    }

    fn bins(&self) -> u32 {
        self.bins
    }

    fn choose(&mut self, asid: Asid, _vpn: Vpn, pool: &Pool) -> Pfn {
        let bin = traverse(self.used.of(asid), pool.free_tree(), &mut self.rng);
        pool.lru_in_bin(bin)
            .expect("the walk ends in a bin with a free frame")
    }

    fn mapped(&mut self, asid: Asid, _vpn: Vpn, pfn: Pfn) {
        self.used.mapped(asid, pfn);
    }

    fn unmapped(&mut self, asid: Asid, _vpn: Vpn, pfn: Pfn) {
        self.used.unmapped(asid, pfn);
    }

    fn exited(&mut self, asid: Asid) {
        self.used.exited(asid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figure 7: a 4-bin tree. Leaves left to right are labelled 00, 10, 01, 11 (bit
    /// reversal of 00, 01, 10, 11), i.e. bins 0, 2, 1, 3. The left subtree has
    /// <used, free> = <3, 6> with leaves <2, 5> (bin 0) and <1, 1> (bin 2); the right
    /// subtree has <3, 3> (the figure does not give its leaves; any split works).
    fn figure_7() -> (BinTree, BinTree) {
        let mut used = BinTree::new(4);
        let mut free = BinTree::new(4);
        for (bin, u, f) in [(0, 2, 5), (2, 1, 1), (1, 1, 2), (3, 2, 1)] {
            used.set_leaf(bin, u);
            free.set_leaf(bin, f);
        }
        (used, free)
    }

    #[test]
    fn figure_7_traversal_and_update() {
        let (mut used, mut free) = figure_7();
        assert_eq!((used.total(), free.total()), (6, 9));
        assert_eq!((used.node(1, 0), free.node(1, 0)), (3, 6));
        assert_eq!((used.node(1, 1), free.node(1, 1)), (3, 3));
        // Root: <3,6> vs <3,3>, equal use, the left has more free frames: go left.
        // Then <2,5> vs <1,1>: the right has fewer pages mapped: go right, to bin 2.
        // No decision is a tie, so the generator is never consulted.
        for seed in 0..16 {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            assert_eq!(traverse(&used, &free, &mut rng), 0b10);
        }
        used.add(0b10);
        free.remove(0b10);
        // "the values of the traversed nodes would be modified to <7, 8>, <4, 5>, and
        // <2, 0>, respectively, from top to bottom."
        assert_eq!((used.total(), free.total()), (7, 8));
        assert_eq!((used.node(1, 0), free.node(1, 0)), (4, 5));
        assert_eq!((used.leaf(0b10), free.leaf(0b10)), (2, 0));
        // Nodes off the path are unchanged.
        assert_eq!((used.node(1, 1), free.node(1, 1)), (3, 3));
        assert_eq!((used.leaf(0), free.leaf(0)), (2, 5));
    }

    #[test]
    fn rule_one_steers_away_from_empty_subtrees() {
        let (used, mut free) = figure_7();
        free.set_leaf(2, 0); // bin 2 has nothing left: bin 0 is the only choice on the left
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        assert_eq!(traverse(&used, &free, &mut rng), 0);
    }
}

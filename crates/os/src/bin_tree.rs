//! Bin trees (section 3.2.4): counts of page frames per bin, summed up a binary tree
//! whose nodes are labelled bit-reversed (Figure 8).

/// A bin tree over `B = 2^depth` bins.
///
/// With the paper's bit-reversed labelling a node at depth `d` carries a `d`-bit label
/// `L`, and its value is the number of counted frames whose bottom `d` bits equal `L`;
/// its left child is `L` with bit `d` clear and its right child `L` with bit `d` set
/// (Figure 8: the left half of the tree has low-order bit 0). Because a node's value is
/// defined by frame-number bits alone, the tree of a cache with `B` bins contains, at
/// depth `log2 B'`, the leaves of every smaller cache with `B'` bins: that is the
/// Hierarchical Heuristic's cache-size independence.
///
/// Values are stored level by level: depth `d` occupies indices `2^d - 1 .. 2^(d+1) - 1`.
/// Adding or removing a frame updates one node per level, O(log B).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinTree {
    depth: u32,
    nodes: Vec<u32>,
}

impl BinTree {
    /// An all-zero tree over `bins` bins (a power of two).
    pub fn new(bins: u32) -> Self {
        assert!(bins.is_power_of_two(), "bin count must be a power of two");
        let depth = bins.trailing_zeros();
        BinTree {
            depth,
            nodes: vec![0; (2usize << depth) - 1],
        }
    }

    /// The number of bins (leaves).
    pub fn bins(&self) -> u32 {
        1 << self.depth
    }

    /// `log2` of the number of bins.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    #[inline]
    fn index(depth: u32, label: u32) -> usize {
        ((1usize << depth) - 1) + label as usize
    }

    /// Counts one more frame whose bottom bits are those of `frame_bits` (a frame
    /// number, or a bin).
    #[inline]
    pub fn add(&mut self, frame_bits: u32) {
        for d in 0..=self.depth {
            let label = frame_bits & ((1u32 << d) - 1);
            self.nodes[Self::index(d, label)] += 1;
        }
    }

    /// Counts one frame fewer; the frame must have been counted.
    #[inline]
    pub fn remove(&mut self, frame_bits: u32) {
        for d in 0..=self.depth {
            let label = frame_bits & ((1u32 << d) - 1);
            let node = &mut self.nodes[Self::index(d, label)];
            debug_assert!(*node > 0, "bin tree underflow");
            *node -= 1;
        }
    }

    /// The value of the node at `depth` with `label` (`label < 2^depth`).
    #[inline]
    pub fn node(&self, depth: u32, label: u32) -> u32 {
        debug_assert!(depth <= self.depth && label < (1 << depth));
        self.nodes[Self::index(depth, label)]
    }

    /// The value of leaf `bin`: frames counted in that bin.
    #[inline]
    pub fn leaf(&self, bin: u32) -> u32 {
        self.node(self.depth, bin)
    }

    /// The root value: all counted frames.
    pub fn total(&self) -> u32 {
        self.nodes[0]
    }

    /// Sets leaf `bin` to `value`, updating its ancestors (for building examples).
    pub fn set_leaf(&mut self, bin: u32, value: u32) {
        let old = self.leaf(bin);
        for d in 0..=self.depth {
            let i = Self::index(d, bin & ((1u32 << d) - 1));
            self.nodes[i] = self.nodes[i] - old + value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_count_frames_by_bottom_bits() {
        let mut t = BinTree::new(8);
        for pfn in [0u32, 8, 5, 13, 3, 6] {
            t.add(pfn);
        }
        assert_eq!(t.total(), 6);
        assert_eq!(t.node(1, 0), 3); // 0, 8, 6
        assert_eq!(t.node(1, 1), 3); // 5, 13, 3
        assert_eq!(t.node(2, 0b01), 2); // 5, 13
        assert_eq!(t.leaf(0), 2);
        t.remove(8);
        assert_eq!(t.leaf(0), 1);
        assert_eq!(t.node(1, 0), 2);
        t.set_leaf(7, 4);
        assert_eq!(t.node(1, 1), 7);
    }
}

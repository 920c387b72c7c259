//! Paper 000's workloads and the numbers it reports (Ni et al., "Reducing NVM Writes
//! with Optimized Shadow Paging", HotStorage 2018).

use pmlab_workloads::{Dist, Kind};

/// One of the paper's seven workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PaperWorkload {
    /// Its name in Figure 4.
    pub name: &'static str,
    /// The structure.
    pub kind: Kind,
    /// How operations pick keys.
    pub dist: Dist,
}

const fn w(name: &'static str, kind: Kind, dist: Dist) -> PaperWorkload {
    PaperWorkload { name, kind, dist }
}

/// The workloads of Figure 4, in its order (§3.1: "SPS workloads randomly swap
/// elements in a large array. HT-uni, RBT-uni, and BT-uni insert/delete nodes in a
/// hash table, red-black tree, and B-tree (respectively) in a uniformly random
/// fashion. HT-zipf, RBT-zipf, and BT-zipf [...] following a Zipf distribution").
pub const WORKLOADS: [PaperWorkload; 7] = [
    w("SPS", Kind::Sps, Dist::Uniform),
    w("HT-uni", Kind::HashTable, Dist::Uniform),
    w("RBT-uni", Kind::RbTree, Dist::Uniform),
    w("BT-uni", Kind::BTree, Dist::Uniform),
    w("HT-zipf", Kind::HashTable, Dist::Zipf),
    w("RBT-zipf", Kind::RbTree, Dist::Zipf),
    w("BT-zipf", Kind::BTree, Dist::Zipf),
];

/// Not the paper's: its three Zipf workloads again with YCSB's unscrambled generator
/// (element r has rank r, so the hot keys are the ones inserted first and their nodes
/// lie together). The paper names only "a Zipf distribution \[YCSB\]"; the reproduction
/// uses YCSB's default (scrambled) and runs these beside it to show how much of Table
/// 1's Zipf column and Figure 4b's consolidation share depends on where the hot
/// elements lie.
pub const ZIPF_ORDERED: [PaperWorkload; 3] = [
    w("HT-zipf-ordered", Kind::HashTable, Dist::ZipfOrdered),
    w("RBT-zipf-ordered", Kind::RbTree, Dist::ZipfOrdered),
    w("BT-zipf-ordered", Kind::BTree, Dist::ZipfOrdered),
];

/// Table 1: TLB miss ratio (%), uniform and Zipf, for SPS, HT, RBT, BT.
pub const TABLE1: [(&str, f64, f64); 4] = [
    ("SPS", 3.6, 3.6),
    ("HT", 5.66, 0.09),
    ("RBT", 12.93, 0.75),
    ("BT", 1.44, 0.15),
];

/// What the text says of Figure 4a (the bars themselves are not in the text): OSP
/// needs 1.6x fewer CPU flushes than the undo log on average (§3.2), "still saves
/// 17%" on SPS and HT-uni, and up to 1.96x (abstract, §5).
pub const FIG4A_AVERAGE: f64 = 1.6;
/// Reduction on SPS and HT-uni: a 17% saving.
pub const FIG4A_LEAST: f64 = 1.0 / (1.0 - 0.17);
/// The largest reduction.
pub const FIG4A_MOST: f64 = 1.96;
/// Figure 4b: in BT-zipf, "98% of CPU flushes come from persisting new updates".
pub const FIG4B_BT_ZIPF_DATA: f64 = 0.98;
/// The paper's footprints: "range from 1 GB to 6 GB".
pub const FOOTPRINTS: &str = "1-6 GB";

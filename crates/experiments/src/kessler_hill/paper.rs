//! The figures Kessler & Hill report for their Mult2.2 trace (UW CS TR 940, 1990), against
//! which pmlab's reproduction is printed. All values are level-two misses per 1000
//! instructions (MPI x 1000).

/// The nine level-two configurations of Tables 1 and 4: (size in MiB, associativity).
pub const L2_CONFIGS: [(u64, u32); 9] = [
    (1, 1),
    (1, 2),
    (1, 4),
    (4, 1),
    (4, 2),
    (4, 4),
    (16, 1),
    (16, 2),
    (16, 4),
];

/// One row of Table 1: random and hierarchical mean, 90% half-width and median.
#[derive(Clone, Copy, Debug)]
pub struct Table1Row {
    /// Level-two size in MiB.
    pub size_mib: u64,
    /// Level-two associativity.
    pub assoc: u32,
    /// Random mapping: mean, half-width, median.
    pub random: (f64, f64, f64),
    /// Hierarchical heuristic: mean, half-width, median.
    pub hierarchical: (f64, f64, f64),
    /// "Hierarchical Reduction" in percent.
    pub reduction_pct: f64,
}

/// Table 1 (Mult2.2), in the order of [`L2_CONFIGS`].
pub const TABLE1: [Table1Row; 9] = [
    Table1Row {
        size_mib: 1,
        assoc: 1,
        random: (1.4953, 0.1264, 1.4873),
        hierarchical: (1.1858, 0.0205, 1.1884),
        reduction_pct: 20.7,
    },
    Table1Row {
        size_mib: 1,
        assoc: 2,
        random: (1.0480, 0.0186, 1.0409),
        hierarchical: (0.9805, 0.0049, 0.9824),
        reduction_pct: 6.4,
    },
    Table1Row {
        size_mib: 1,
        assoc: 4,
        random: (0.9593, 0.0038, 0.9589),
        hierarchical: (0.9289, 0.0014, 0.9291),
        reduction_pct: 3.2,
    },
    Table1Row {
        size_mib: 4,
        assoc: 1,
        random: (0.7121, 0.0428, 0.7104),
        hierarchical: (0.5982, 0.0062, 0.5976),
        reduction_pct: 16.0,
    },
    Table1Row {
        size_mib: 4,
        assoc: 2,
        random: (0.5375, 0.0091, 0.5355),
        hierarchical: (0.5101, 0.0027, 0.5106),
        reduction_pct: 5.1,
    },
    Table1Row {
        size_mib: 4,
        assoc: 4,
        random: (0.5079, 0.0033, 0.5088),
        hierarchical: (0.4938, 0.0009, 0.4940),
        reduction_pct: 2.8,
    },
    Table1Row {
        size_mib: 16,
        assoc: 1,
        random: (0.3339, 0.0235, 0.3254),
        hierarchical: (0.2820, 0.0069, 0.2824),
        reduction_pct: 15.6,
    },
    Table1Row {
        size_mib: 16,
        assoc: 2,
        random: (0.2539, 0.0034, 0.2542),
        hierarchical: (0.2326, 0.0021, 0.2333),
        reduction_pct: 8.4,
    },
    Table1Row {
        size_mib: 16,
        assoc: 4,
        random: (0.2371, 0.0041, 0.2369),
        hierarchical: (0.2226, 0.0006, 0.2225),
        reduction_pct: 6.1,
    },
];

/// Table 2: hierarchical reduction (percent) for direct-mapped 1, 4, 16 MiB caches, per
/// trace of the paper.
pub const TABLE2: [(&str, [f64; 3]); 8] = [
    ("Mult1", [13.0, 10.0, 10.0]),
    ("Mult1.2", [7.0, 3.0, 30.0]),
    ("Mult2", [19.0, 14.0, 13.0]),
    ("Mult2.2", [21.0, 16.0, 16.0]),
    ("Tv", [3.0, 2.0, 3.0]),
    ("Sor", [1.0, 12.0, 34.0]),
    ("Tree", [37.0, 25.0, 30.0]),
    ("Lin", [-1.0, 33.0, 55.0]),
];

/// The heuristics in the order the paper's Tables 3 and 4 list them.
pub const HEURISTICS: [&str; 6] = [
    "random",
    "coloring-equal",
    "coloring-hash",
    "bin-hopping",
    "sequential",
    "hierarchical",
];

/// Table 3: MPI x 1000 on the 4 MiB direct-mapped L2 with a 4 MiB (large) and a 256 KiB
/// (small) pool, per heuristic in [`HEURISTICS`] order.
///
/// The text copy of the paper garbles this table (eleven of twelve cells survive, some
/// merged across rows). This reading places each value so that its printed percentage
/// over the hierarchical heuristic (0.60 large, 0.66 small) holds: Random 0.71 (19%) and
/// 0.71 (8%); Page Coloring (equal) large is lost and taken from Table 4's 4M direct-mapped
/// row (0.69), whose pool is the same 4 MiB; Page Coloring (hash) large likewise (0.64).
pub const TABLE3: [(f64, f64); 6] = [
    (0.71, 0.71),
    (0.69, 0.85),
    (0.64, 0.83),
    (0.60, 0.67),
    (0.60, 0.61),
    (0.60, 0.66),
];

/// Table 4: MPI x 1000 with a 4 MiB pool, rows in [`L2_CONFIGS`] order, columns
/// page coloring (equal), page coloring (PID hash), bin hopping, sequential, hierarchical.
/// The non-hierarchical heuristics were optimized for the 4 MiB direct-mapped cache.
pub const TABLE4: [[f64; 5]; 9] = [
    [1.37, 1.32, 1.33, 1.38, 1.19],
    [1.03, 1.02, 1.00, 1.03, 0.98],
    [0.94, 0.94, 0.94, 0.95, 0.93],
    [0.69, 0.64, 0.60, 0.60, 0.60],
    [0.53, 0.53, 0.52, 0.52, 0.51],
    [0.50, 0.50, 0.50, 0.50, 0.49],
    [0.31, 0.31, 0.30, 0.29, 0.28],
    [0.25, 0.25, 0.24, 0.24, 0.23],
    [0.24, 0.23, 0.23, 0.22, 0.22],
];

/// Appendix A's single-program traces: (name, rows in [`L2_CONFIGS`] order, each random mean,
/// half-width, median, hierarchical mean, half-width, median, reduction percent).
#[allow(clippy::approx_constant)] // Sor's 0.3183 is a half-width, not 1/pi.
pub const APPENDIX_A: [(&str, [[f64; 7]; 9]); 4] = [
    (
        "Sor",
        [
            [14.9794, 0.0211, 14.9757, 14.8567, 0.0284, 14.8627, 0.8],
            [14.7033, 0.0299, 14.6937, 14.6402, 0.0053, 14.6401, 0.4],
            [14.5816, 0.0152, 14.5774, 14.5507, 0.0040, 14.5496, 0.2],
            [9.4718, 0.0983, 9.4729, 8.3389, 0.1115, 8.3545, 12.0],
            [8.6826, 0.0581, 8.6821, 8.0557, 0.1145, 8.0312, 7.2],
            [8.3524, 0.0291, 8.3509, 8.0611, 0.0323, 8.0529, 3.5],
            [4.2208, 0.3183, 4.1976, 2.7843, 0.1638, 2.7574, 34.0],
            [2.8435, 0.1069, 2.8471, 2.1481, 0.0824, 2.1383, 24.5],
            [2.4179, 0.1447, 2.3788, 2.0743, 0.0197, 2.0754, 14.2],
        ],
    ),
    (
        "Tv",
        [
            [3.3632, 0.1861, 3.3093, 3.2713, 0.1084, 3.2610, 2.7],
            [2.4658, 0.0214, 2.4633, 2.4919, 0.0536, 2.4900, -1.1],
            [2.3055, 0.0094, 2.3017, 2.2997, 0.0052, 2.3006, 0.2],
            [2.1151, 0.0549, 2.1263, 2.0682, 0.0268, 2.0684, 2.2],
            [1.8294, 0.0079, 1.8271, 1.8108, 0.0067, 1.8103, 1.0],
            [1.7800, 0.0037, 1.7802, 1.7772, 0.0045, 1.7764, 0.2],
            [1.1899, 0.0062, 1.1888, 1.1589, 0.0293, 1.1513, 2.6],
            [1.0337, 0.0043, 1.0337, 1.0171, 0.0051, 1.0170, 1.6],
            [0.9910, 0.0027, 0.9910, 0.9779, 0.0031, 0.9768, 1.3],
        ],
    ),
    (
        "Tree",
        [
            [3.9061, 2.0853, 3.3053, 2.4720, 0.0573, 2.4855, 36.7],
            [2.0930, 0.0580, 2.1085, 1.9738, 0.0516, 1.9561, 5.7],
            [1.8580, 0.0494, 1.8476, 1.8573, 0.0584, 1.8392, 0.0],
            [1.2112, 0.2466, 1.1478, 0.9124, 0.0286, 0.9174, 24.7],
            [0.7179, 0.0292, 0.7124, 0.5934, 0.0284, 0.5848, 17.3],
            [0.5292, 0.0218, 0.5260, 0.4932, 0.0119, 0.4897, 6.8],
            [0.5416, 0.2284, 0.4682, 0.3771, 0.0292, 0.3805, 30.4],
            [0.2914, 0.0194, 0.2859, 0.2706, 0.0047, 0.2707, 7.1],
            [0.2579, 0.0008, 0.2578, 0.2545, 0.0002, 0.2544, 1.3],
        ],
    ),
    (
        "Lin",
        [
            [1.1481, 0.0107, 1.1511, 1.1609, 0.0021, 1.1616, -1.1],
            [1.0806, 0.0037, 1.0800, 1.0938, 0.0010, 1.0935, -1.2],
            [1.0611, 0.0030, 1.0613, 1.0766, 0.0005, 1.0766, -1.5],
            [0.5277, 0.0263, 0.5264, 0.3564, 0.0283, 0.3488, 32.5],
            [0.3103, 0.0392, 0.3054, 0.1307, 0.0234, 0.1230, 57.9],
            [0.1557, 0.0275, 0.1567, 0.0494, 0.0108, 0.0452, 68.2],
            [0.1532, 0.0230, 0.1529, 0.0689, 0.0063, 0.0692, 55.0],
            [0.0416, 0.0101, 0.0438, 0.0217, 0.0038, 0.0204, 47.8],
            [0.0179, 0.0006, 0.0178, 0.0167, 0.0000, 0.0167, 6.7],
        ],
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The transcription is checked against the paper's own arithmetic: each row's
    /// printed reduction equals (random - hierarchical) / random of its printed means.
    #[test]
    fn table1_reductions_match_their_means() {
        for r in TABLE1 {
            let red = 100.0 * (r.random.0 - r.hierarchical.0) / r.random.0;
            assert!((red - r.reduction_pct).abs() < 0.06, "{r:?}: {red}");
        }
    }

    /// Appendix A's rows check the same way (the paper truncates some: Lin 4M 4-way's
    /// 68.27% is printed 68.2%).
    #[test]
    fn appendix_reductions_match_their_means() {
        for (name, rows) in APPENDIX_A {
            for r in rows {
                let red = 100.0 * (r[0] - r[3]) / r[0];
                assert!((red - r[6]).abs() < 0.1, "{name} {r:?}: {red}");
            }
        }
    }

    #[test]
    fn table1_config_order() {
        for (r, (s, a)) in TABLE1.iter().zip(L2_CONFIGS) {
            assert_eq!((r.size_mib, r.assoc), (s, a));
        }
        assert_eq!(TABLE2[3].1[0], TABLE1[0].reduction_pct.round());
    }
}

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

    #[test]
    fn table1_config_order() {
        for (r, (s, a)) in TABLE1.iter().zip(L2_CONFIGS) {
            assert_eq!((r.size_mib, r.assoc), (s, a));
        }
        assert_eq!(TABLE2[3].1[0], TABLE1[0].reduction_pct.round());
    }
}

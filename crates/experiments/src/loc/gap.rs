//! Where LOC-WAL's distance from the paper lies: its SD 16 average over the paper's
//! (0.651) is, exactly, the SD 1 average over the paper's (0.353: no speculation, the
//! base cost of persisting) times the gain of speculation (SD 1 to SD 16) over the
//! paper's gain (0.651 / 0.353). A distance already present at SD 1 is not Speculative
//! Persistence's; one in the gain is.

use pmlab_report::Table;
use pmlab_workloads::Kind;
use serde::Serialize;

use super::paper;

/// One group of workloads' split.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GapSplit {
    /// LOC-WAL's average at SD 1 (no speculation: EC-WAL).
    pub sd1: f64,
    /// At SD 16 (Figure 6's LOC-WAL).
    pub sd16: f64,
    /// At SD 32.
    pub sd32: f64,
    /// `sd1` over the paper's SD 1 average.
    pub base_ratio: f64,
    /// Our gain `sd16 / sd1` over the paper's `0.651 / 0.353`.
    pub gain_ratio: f64,
    /// `sd16` over the paper's 0.651: `base_ratio * gain_ratio`.
    pub total_ratio: f64,
}

impl GapSplit {
    /// The split of averages `sd1`, `sd16`, `sd32` against the paper's.
    pub fn new(sd1: f64, sd16: f64, sd32: f64) -> GapSplit {
        let p1 = paper::sd_average(1).expect("stated");
        let p16 = paper::sd_average(16).expect("stated");
        GapSplit {
            sd1,
            sd16,
            sd32,
            base_ratio: sd1 / p1,
            gain_ratio: (sd16 / sd1) / (p16 / p1),
            total_ratio: sd16 / p16,
        }
    }
}

/// A group of workloads: its label and which workloads it holds.
pub type Group = (&'static str, fn(Kind) -> bool);

/// The workload groups the split is shown for: all six, the four whose transactions
/// are one small operation, and the two that read whole 4 KiB nodes.
pub fn groups() -> [Group; 3] {
    [
        ("all six", |_| true),
        ("Hash, RBTree, SPS, SDG", |w| !node_reading(w)),
        ("B+Tree, SQLite", node_reading),
    ]
}

/// The workloads whose transactions are dominated by reads of whole 4 KiB nodes.
pub fn node_reading(w: Kind) -> bool {
    matches!(w, Kind::BpTree | Kind::Db)
}

/// The table of `rows` (a label and its split).
pub fn table(title: &str, rows: &[(String, GapSplit)]) -> Table {
    let mut t = Table::new(
        title,
        &[
            "workloads",
            "SD=1",
            "SD=16",
            "SD=32",
            "SD=1 / paper",
            "gain 1->16",
            "gain / paper's",
            "SD=16 / paper",
        ],
    );
    let f = |x: f64| format!("{x:.3}");
    for (label, s) in rows {
        t.row(vec![
            label.clone(),
            f(s.sd1),
            f(s.sd16),
            f(s.sd32),
            f(s.base_ratio),
            f(s.sd16 / s.sd1),
            f(s.gain_ratio),
            f(s.total_ratio),
        ]);
    }
    t.row(
        [
            "paper (average)",
            "0.353",
            "0.651",
            "0.689",
            "1",
            "1.844",
            "1",
            "1",
        ]
        .map(String::from)
        .to_vec(),
    );
    t.note("SD=16 / paper = SD=1 / paper x gain / paper's: the part at SD 1 is the base cost of persisting (EC-WAL), the rest Speculative Persistence's gain");
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_multiplies_back_to_the_whole() {
        // Hand-computed: 0.4236 / 0.353 = 1.2, (0.847 / 0.4236) / (0.651 / 0.353)
        // = 1.99953 / 1.84419 = 1.08423, and 0.847 / 0.651 = 1.30108.
        let s = GapSplit::new(0.4236, 0.847, 0.9);
        assert!((s.base_ratio - 1.2).abs() < 1e-9);
        assert!((s.gain_ratio - 1.084_23).abs() < 1e-5);
        assert!((s.total_ratio - 1.301_08).abs() < 1e-5);
        assert!((s.base_ratio * s.gain_ratio - s.total_ratio).abs() < 1e-12);
        // The paper's own figures split into ones.
        let p = GapSplit::new(0.353, 0.651, 0.689);
        assert!((p.base_ratio - 1.0).abs() < 1e-12 && (p.gain_ratio - 1.0).abs() < 1e-12);
    }

    #[test]
    fn groups_partition_the_workloads() {
        let [all, small, nodes] = groups();
        for &(w, _) in paper::WORKLOADS.iter() {
            assert!(all.1(w));
            assert_ne!(small.1(w), nodes.1(w), "{w:?} in exactly one group");
        }
        let n = paper::WORKLOADS.iter().filter(|w| nodes.1(w.0)).count();
        assert_eq!(n, 2);
    }
}

//! What paper 001 (Lu, Shu, Sun, Mutlu, "Loose-Ordering Consistency for Persistent
//! Memory", ICCD 2014) reports, as its text states it. The figures themselves are bar
//! charts whose per-workload values the text does not give; only these are stated.

use pmlab_hwtx::HwKind;
use pmlab_workloads::Kind;

/// The six workloads of Table II, in the paper's order, with the paper's names.
pub const WORKLOADS: [(Kind, &str); 6] = [
    (Kind::BpTree, "B+Tree"),
    (Kind::HashTable, "Hash"),
    (Kind::RbTree, "RBTree"),
    (Kind::Sps, "SPS"),
    (Kind::Sdg, "SDG"),
    (Kind::Db, "SQLite"),
];

/// The paper's name of a workload.
pub fn workload_name(kind: Kind) -> &'static str {
    WORKLOADS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("?", |(_, n)| n)
}

/// Average normalized transaction throughput over the workloads (§V-B, §V-D): S-WAL
/// 0.316, H-WAL 0.331, LOC-WAL 0.651, LOC-Kiln 0.811. EC-WAL and Kiln are not stated
/// as numbers (EC-WAL: below).
pub fn average(kind: HwKind) -> Option<f64> {
    match kind {
        HwKind::SWal => Some(0.316),
        HwKind::HWal => Some(0.331),
        HwKind::LocWal => Some(0.651),
        HwKind::LocKiln => Some(0.811),
        _ => None,
    }
}

/// EC-WAL's average throughput over H-WAL's (§V-C: "EC-WAL outperforms H-WAL by 6.4%
/// on average").
pub const EC_OVER_H: f64 = 1.064;

/// LOC-WAL's average normalized throughput by speculation degree (§V-D: "increases from
/// 0.353 to 0.689 ... going from SD=1 to SD=32"; SD 16 is Figure 6's 0.651).
pub fn sd_average(sd: u32) -> Option<f64> {
    match sd {
        1 => Some(0.353),
        16 => Some(0.651),
        32 => Some(0.689),
        _ => None,
    }
}

/// The memory latencies of Figure 9 (ns; 168 is every other figure's).
pub const LATENCIES: [u64; 4] = [35, 95, 168, 1000];

/// The speculation degrees of Figure 8.
pub const SDS: [u32; 6] = [1, 2, 4, 8, 16, 32];

/// Figure 9's stated trends (§V-E): H-WAL's normalized throughput falls as memory
/// latency rises, and LOC's improvement over H-WAL grows.
pub const FIG9_CLAIMS: [&str; 2] = [
    "H-WAL's normalized throughput falls as memory latency rises",
    "LOC-WAL's improvement over H-WAL grows with memory latency",
];

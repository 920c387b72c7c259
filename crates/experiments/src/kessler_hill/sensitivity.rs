//! What drives the reduction: the sensitivity runs (switch interval, concurrent streams)
//! and the differences from the paper, stated from measured runs.

use super::analysis::{mean, reduction};
use super::paper::TABLE1;
use super::tables::{Report, pct};
use pmlab_os::PolicyKind;
use pmlab_report::Table;

const DIRECT: [u64; 3] = [1, 4, 16];

/// Reductions (all misses, and without cold-start misses) at 1/4/16 MiB direct-mapped on
/// schedule `s`.
pub(crate) fn reductions(report: &Report, s: usize) -> ([f64; 3], [f64; 3]) {
    let red = |size, warm| {
        reduction(
            mean(
                &report.passes,
                s,
                PolicyKind::Random,
                report.large_pool,
                (size, 1),
                warm,
            ),
            mean(
                &report.passes,
                s,
                PolicyKind::Hierarchical,
                report.large_pool,
                (size, 1),
                warm,
            ),
        )
    };
    (DIRECT.map(|z| red(z, false)), DIRECT.map(|z| red(z, true)))
}

/// The sensitivity table: one row per schedule.
pub(crate) fn table(report: &Report) -> Table {
    let mut t = Table::new(
        "Sensitivity: hierarchical reduction (direct-mapped level twos) against switch interval and concurrent streams",
        &[
            "run",
            "mean quantum",
            "streams",
            "measured switch interval",
            "processes",
            "random MPI 1M",
            "reduction 1M / 4M / 16M",
            "cold misses excluded",
            "samples",
        ],
    );
    for (s, sched) in report.schedules.iter().enumerate() {
        let (all, warm) = reductions(report, s);
        let n = super::analysis::select(&report.passes, s, PolicyKind::Random, report.large_pool)
            .count();
        t.row(vec![
            if s == 0 {
                "main".into()
            } else {
                format!("#{s}")
            },
            sched.spec.mean_quantum.to_string(),
            sched.streams.to_string(),
            format!("{:.0}", sched.mean_switch_interval()),
            sched.processes.to_string(),
            format!(
                "{:.4}",
                mean(
                    &report.passes,
                    s,
                    PolicyKind::Random,
                    report.large_pool,
                    (1, 1),
                    false
                )
            ),
            all.map(pct).join(" / "),
            warm.map(pct).join(" / "),
            n.to_string(),
        ]);
    }
    t.note("Each run changes one thing from the main run: the mean quantum (all streams) or the number of");
    t.note("concurrent streams (the main run's quantum; streams beyond the workload's are copies of its series).");
    t
}

/// How far our figures are from the paper's, with what the sensitivity runs measured.
pub(crate) fn differences(report: &Report) -> Table {
    let mut t = Table::new(
        "Differences from the paper (direct-mapped level twos)",
        &[
            "L2",
            "our MPI / paper MPI (random)",
            "our reduction",
            "paper reduction",
            "difference",
            "ours, cold misses excluded",
        ],
    );
    let (all, warm) = reductions(report, 0);
    for (k, &size) in DIRECT.iter().enumerate() {
        let row = TABLE1
            .iter()
            .find(|r| r.size_mib == size && r.assoc == 1)
            .expect("in Table 1");
        let r = report.mean(PolicyKind::Random, report.large_pool, (size, 1), false);
        t.row(vec![
            format!("{size}M 1-way"),
            format!("{:.1}x", r / row.random.0),
            pct(all[k]),
            pct(row.reduction_pct),
            format!("{:+.1} points", all[k] - row.reduction_pct),
            pct(warm[k]),
        ]);
    }
    let cold = report
        .passes
        .iter()
        .filter(|(s, p)| {
            *s == 0 && p.spec.policy == PolicyKind::Random && p.spec.pool == report.large_pool
        })
        .map(|(_, p)| 1000.0 * p.cold_blocks as f64 / p.instructions.max(1) as f64)
        .sum::<f64>()
        / report.samples().max(1) as f64;
    t.note(format!(
        "Cold-start misses (distinct physical 128-byte blocks touched) are {cold:.4} per 1000 instructions of the main run."
    ));
    t.note("Measured in the sensitivity runs (reduction 1M / 4M / 16M, all misses; cold misses excluded):");
    for (s, sched) in report.schedules.iter().enumerate() {
        let (a, w) = reductions(report, s);
        t.note(format!(
            "- mean quantum {:>9}, {} streams: {}; {}",
            sched.spec.mean_quantum,
            sched.streams,
            a.map(pct).join(" / "),
            w.map(pct).join(" / ")
        ));
    }
    t
}

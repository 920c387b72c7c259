//! The text of the reproduction: its scale, its tables beside the paper's numbers,
//! the targets and the run's own consistency checks.

use pmlab_report::Table;

use super::exec::Results;
use super::paper::{self, WORKLOADS};
use super::report::{Report, f2, pct};
use super::{Config, variants};

/// The scale of the run, in words.
pub(super) fn scale(config: &Config, results: &Results) -> Vec<String> {
    let mut v = vec![format!(
        "SPS: {} elements; HT, RBT, BT: {} keys at the start (a key space of twice that); {} transactions per protocol after {} of warm-up",
        config.sps_elements, config.map_elements, config.txs, config.warmup
    )];
    let fp: Vec<String> = results
        .runs
        .iter()
        .map(|w| format!("{} {} MiB", w.workload.name, w.footprint >> 20))
        .collect();
    v.push(format!(
        "footprints: {} (paper: {}); the TLB's reach is 64 x 4 KiB = 256 KiB",
        fp.join(", "),
        paper::FOOTPRINTS
    ));
    v.push("machine: 64-entry fully associative LRU TLB (McSimA+'s L1 DTLB, the last level), 4 KiB pages; caches 32 KiB / 256 KiB / 1 MiB; CPU flushes = clwb + write-combining buffer drains".into());
    v.push(format!(
        "protocols: {}",
        variants()
            .iter()
            .map(|v| v.name())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    v
}

/// Every protocol flushed the same data lines (they ran the same operations).
pub(super) fn checks(results: &Results) -> Vec<String> {
    let mut out = Vec::new();
    let mut equal = true;
    for w in &results.runs {
        let d0 = w.runs[0].flushes.data;
        for m in &w.runs[1..] {
            if m.flushes.data != d0 {
                equal = false;
                out.push(format!(
                    "{}: {} flushed {} data lines, the undo log {d0}",
                    w.workload.name, m.protocol, m.flushes.data
                ));
            }
        }
    }
    if equal {
        out.push("every protocol flushed exactly the same data lines on every workload (same operations, same lines)".into());
    }
    out
}

fn wl<'a>(r: &'a Report, name: &str) -> &'a super::report::WorkloadResult {
    &r.workloads[name]
}

/// Table 1's rows: structure, measured and paper's uniform and Zipf miss ratios (%).
pub(super) fn table1_values(r: &Report) -> Vec<(&'static str, f64, f64, f64, f64)> {
    paper::TABLE1
        .iter()
        .map(|&(s, pu, pz)| {
            let (u, z) = if s == "SPS" {
                let x = 100.0 * wl(r, "SPS").tlb_miss_ratio;
                (x, x)
            } else {
                (
                    100.0 * wl(r, &format!("{s}-uni")).tlb_miss_ratio,
                    100.0 * wl(r, &format!("{s}-zipf")).tlb_miss_ratio,
                )
            };
            (s, u, pu, z, pz)
        })
        .collect()
}

fn target(t: &str, measured: String, met: bool) -> super::report::TargetCheck {
    super::report::TargetCheck {
        target: t.into(),
        measured,
        met,
    }
}

/// The targets, each with what was measured.
pub(super) fn targets(r: &Report, results: &Results) -> Vec<super::report::TargetCheck> {
    let red = |n: &str| wl(r, n).flush_reduction;
    let all: Vec<f64> = WORKLOADS.iter().map(|w| red(w.name)).collect();
    let max = all.iter().cloned().fold(0.0, f64::max);
    let cons = |n: &str| wl(r, n).osp_flushes_by_source.consolidation;
    let mut t = vec![
        target(
            "OSP needs fewer CPU flushes than the undo log on every workload",
            all.iter()
                .map(|x| format!("{x:.2}x"))
                .collect::<Vec<_>>()
                .join(" "),
            all.iter().all(|&x| x > 1.0),
        ),
        target(
            "at least 1.17x on SPS and HT-uni (\"still saves 17%\")",
            format!("SPS {:.2}x, HT-uni {:.2}x", red("SPS"), red("HT-uni")),
            red("SPS") >= 1.17 && red("HT-uni") >= 1.17,
        ),
        target(
            "1.6x on average",
            format!("{:.2}x", r.avg_flush_reduction),
            r.avg_flush_reduction >= paper::FIG4A_AVERAGE,
        ),
        target(
            "up to about 1.96x",
            format!("{max:.2}x"),
            (max - paper::FIG4A_MOST).abs() <= 0.1 * paper::FIG4A_MOST,
        ),
    ];
    for s in ["HT", "RBT", "BT"] {
        let (u, z) = (
            wl(r, &format!("{s}-uni")).tlb_miss_ratio,
            wl(r, &format!("{s}-zipf")).tlb_miss_ratio,
        );
        t.push(target(
            &format!(
                "{s}: Zipf's TLB miss ratio far lower than uniform's (paper: at least 9.6x lower)"
            ),
            format!("uniform {}, Zipf {} ({:.2}x lower)", pct(u), pct(z), u / z),
            u >= 5.0 * z,
        ));
        let (cu, cz) = (cons(&format!("{s}-uni")), cons(&format!("{s}-zipf")));
        t.push(target(
            &format!("{s}: fewer consolidation flushes under Zipf"),
            format!("uniform {cu:.2}, Zipf {cz:.2} per transaction"),
            cz < cu,
        ));
    }
    let b = &wl(r, "BT-zipf").osp_flushes_by_source;
    let share = b.data / (b.data + b.journal + b.consolidation);
    t.push(target(
        "BT-zipf: about 98% of OSP's flushes are data flushes",
        pct(share),
        share >= 0.9,
    ));
    let failing: u64 = results.crash.iter().map(|c| c.failing).sum();
    t.push(target(
        "every crash point of every workload recovers under both protocols",
        format!(
            "{} explorations, {failing} failing images",
            results.crash.len()
        ),
        !results.crash.is_empty() && failing == 0,
    ));
    let caught = results.broken.iter().filter(|b| b.failing > 0).count();
    t.push(target(
        "every broken variant is caught",
        format!("{caught} of {}", results.broken.len()),
        !results.broken.is_empty() && caught == results.broken.len(),
    ));
    t
}

/// The file (without `.csv`) each of [`tables`]'s tables is written to, in order.
pub(super) const TABLE_FILES: [&str; 10] = [
    "figure4a",
    "figure4b",
    "table1",
    "superpage",
    "future",
    "large-transactions",
    "zipf-ordered",
    "crash",
    "broken",
    "targets",
];

/// The printed tables, in [`TABLE_FILES`] order.
pub(super) fn tables(r: &Report, results: &Results) -> Vec<Table> {
    let t = vec![
        figure4a(r),
        figure4b(r),
        table1(r),
        superpage(r),
        future(r),
        large(r),
        zipf_ordered(r),
        crash_table(results),
        broken_table(results),
        targets_table(r),
    ];
    debug_assert_eq!(t.len(), TABLE_FILES.len());
    t
}

fn paper_4a(name: &str) -> String {
    match name {
        "SPS" | "HT-uni" => "0.83 (saves 17%)".into(),
        _ => "-".into(),
    }
}

fn figure4a(r: &Report) -> Table {
    let mut t = Table::new(
        "Figure 4a: CPU flushes per transaction, OSP normalized to the hardware undo log",
        &[
            "workload",
            "undo",
            "OSP",
            "OSP/undo",
            "reduction",
            "paper OSP/undo",
        ],
    );
    for w in WORKLOADS {
        let x = wl(r, w.name);
        t.row(vec![
            w.name.into(),
            f2(x.undo_flushes),
            f2(x.osp_flushes),
            f2(1.0 / x.flush_reduction),
            format!("{:.2}x", x.flush_reduction),
            paper_4a(w.name),
        ]);
    }
    t.row(vec![
        "average".into(),
        "".into(),
        "".into(),
        f2(r.avg_normalized_flushes),
        format!("{:.2}x", r.avg_flush_reduction),
        format!("{:.3} (1.6x; up to 1.96x)", 1.0 / paper::FIG4A_AVERAGE),
    ]);
    t.note("undo: one drain per logged line + one clwb per line + one drained commit mark (2k + 1); OSP: one clwb per line + the journal + consolidation");
    t.note("the paper's text gives only SPS/HT-uni (17% saved), the average (1.6x) and the best case (1.96x); its bars are not in the text");
    t.note(two_flush_commit(r));
    t
}

/// What the reductions would be against an undo log whose commit takes two flushes
/// (a commit record, then the log's truncation) instead of one drained mark.
fn two_flush_commit(r: &Report) -> String {
    let red: Vec<f64> = WORKLOADS
        .iter()
        .map(|w| {
            let x = wl(r, w.name);
            (x.undo_flushes + 1.0) / x.osp_flushes
        })
        .collect();
    let avg = red.len() as f64 / red.iter().map(|x| 1.0 / x).sum::<f64>();
    let each: Vec<String> = WORKLOADS
        .iter()
        .zip(&red)
        .map(|(w, x)| format!("{} {x:.2}x", w.name))
        .collect();
    format!(
        "against an undo log committing with two flushes (commit record, then truncation): {}; average {avg:.2}x",
        each.join(", ")
    )
}

fn figure4b(r: &Report) -> Table {
    let mut t = Table::new(
        "Figure 4b: OSP's CPU flushes per transaction by source",
        &[
            "workload",
            "data",
            "journal",
            "consolidation",
            "data share",
            "paper",
        ],
    );
    for w in WORKLOADS {
        let s = &wl(r, w.name).osp_flushes_by_source;
        let total = s.data + s.journal + s.consolidation;
        let note = match w.name {
            "BT-zipf" => "data 98%",
            "BT-uni" => "journal minor",
            _ => "-",
        };
        t.row(vec![
            w.name.into(),
            f2(s.data),
            f2(s.journal),
            f2(s.consolidation),
            pct(s.data / total),
            note.into(),
        ]);
    }
    t
}

fn table1(r: &Report) -> Table {
    let mut t = Table::new(
        "Table 1: TLB miss ratio (%) under OSP",
        &["", "uniform", "paper uniform", "Zipf", "paper Zipf"],
    );
    for (s, u, pu, z, pz) in table1_values(r) {
        t.row(vec![s.into(), f2(u), f2(pu), f2(z), f2(pz)]);
    }
    t.note("misses per lookup of the persistent structure's accesses (the paper's simulator saw every access of the program); SPS has one distribution, shown in both columns as in the paper");
    t
}

fn superpage(r: &Report) -> Table {
    let mut t = Table::new(
        "Multi-page atomicity: the lightweight journal and the super page (CPU flushes per transaction)",
        &[
            "workload",
            "pages/tx",
            "journal: journal",
            "journal: total",
            "super page: table",
            "super page: total",
        ],
    );
    for w in WORKLOADS {
        let x = wl(r, w.name);
        let (j, s) = (&x.variants["osp"], &x.variants["osp-super-page"]);
        let src =
            |v: &super::report::VariantResult| v.by_source.as_ref().map_or(0.0, |b| b.journal);
        t.row(vec![
            w.name.into(),
            f2(j.pages_per_tx),
            f2(src(j)),
            f2(j.flushes),
            f2(src(s)),
            f2(s.flushes),
        ]);
    }
    t
}

fn future(r: &Report) -> Table {
    let mut t = Table::new(
        "Future work: asynchronous consolidation off the miss path (queue of 64 and of 1024 pages) against consolidation on eviction; CPU flushes per transaction",
        &[
            "workload",
            "on eviction",
            "async 64",
            "async 1024",
            "cons. on eviction",
            "cons. async 64",
            "cons. async 1024",
            "on the miss path",
            "queue hits/tx 64",
            "queue hits/tx 1024",
        ],
    );
    let q =
        |x: &super::report::WorkloadResult, n: usize| x.variants[&format!("osp-async-{n}")].clone();
    let c =
        |v: &super::report::VariantResult| v.by_source.as_ref().map_or(0.0, |b| b.consolidation);
    for w in WORKLOADS {
        let x = wl(r, w.name);
        let (e, a, b) = (&x.variants["osp"], q(x, 64), q(x, 1024));
        t.row(vec![
            w.name.into(),
            f2(e.flushes),
            f2(a.flushes),
            f2(b.flushes),
            f2(c(e)),
            f2(c(&a)),
            f2(c(&b)),
            f2(a.miss_path_consolidation + b.miss_path_consolidation),
            f2(a.queue_hits),
            f2(b.queue_hits),
        ]);
    }
    let avg = |n: &str| {
        r.avg_flush_reduction_by_variant
            .get(n)
            .copied()
            .unwrap_or(f64::NAN)
    };
    t.note(format!(
        "average reduction against the undo log: on eviction {:.2}x, async 64 {:.2}x, async 1024 {:.2}x; consolidation flushes on the miss path (async, both queues) in the 8th column",
        r.avg_flush_reduction,
        avg("osp-async-64"),
        avg("osp-async-1024")
    ));
    t
}

fn large(r: &Report) -> Table {
    let mut t = Table::new(
        "Future work: transactions that update more pages than the TLB holds (HT-uni, several operations per transaction)",
        &[
            "protocol",
            "ops/tx",
            "pages/tx",
            "evicted in tx/tx",
            "CPU flushes/tx",
            "data",
            "journal",
            "consolidation",
            "reduction",
        ],
    );
    for x in &r.large_transactions {
        let s = x.by_source.as_ref();
        t.row(vec![
            x.protocol.clone(),
            x.ops_per_tx.to_string(),
            f2(x.pages_per_tx),
            f2(x.evicted_in_tx),
            f2(x.flushes),
            s.map_or("-".into(), |s| f2(s.data)),
            s.map_or("-".into(), |s| f2(s.journal)),
            s.map_or("-".into(), |s| f2(s.consolidation)),
            format!("{:.2}x", x.flush_reduction),
        ]);
    }
    t
}

fn crash_table(results: &Results) -> Table {
    let mut t = Table::new(
        "Crash exploration: every crash point, every pending subset up to 8, recovery crashed too",
        &[
            "workload",
            "protocol",
            "txs",
            "points",
            "images",
            "recoveries",
            "recovery images",
            "failing",
        ],
    );
    for c in &results.crash {
        t.row(vec![
            c.workload.into(),
            c.subject.clone(),
            c.txs.to_string(),
            c.points.to_string(),
            c.images.to_string(),
            c.recoveries.to_string(),
            c.recovery_images.to_string(),
            c.failing.to_string(),
        ]);
    }
    t
}

fn broken_table(results: &Results) -> Table {
    let mut t = Table::new(
        "Broken variants",
        &["variant", "caught on", "failing images", "first failure"],
    );
    for b in &results.broken {
        let first = b
            .first_failure
            .clone()
            .unwrap_or_else(|| "NOT CAUGHT".into());
        let first: String = first.chars().take(140).collect();
        t.row(vec![
            b.subject.clone(),
            b.workload.into(),
            b.failing.to_string(),
            first,
        ]);
    }
    t
}

fn targets_table(r: &Report) -> Table {
    let mut t = Table::new("Targets (from the paper)", &["target", "measured", "met"]);
    for x in &r.targets {
        t.row(vec![
            x.target.clone(),
            x.measured.clone(),
            if x.met { "yes" } else { "no" }.into(),
        ]);
    }
    t
}

/// The Zipf workloads with the scrambled generator (the reproduction's) beside the
/// unscrambled one, and the paper's Zipf miss ratio: what depends on where the hot
/// elements lie.
fn zipf_ordered(r: &Report) -> Table {
    let mut t = Table::new(
        "Sensitivity (not the paper's): Zipf scrambled (YCSB's default, used above) vs unscrambled (the hot keys inserted first)",
        &[
            "workload",
            "TLB miss % scr.",
            "TLB miss % unscr.",
            "paper",
            "cons./tx scr.",
            "cons./tx unscr.",
            "data share scr.",
            "data share unscr.",
            "reduction scr.",
            "reduction unscr.",
        ],
    );
    let share = |w: &super::report::WorkloadResult| {
        let s = &w.osp_flushes_by_source;
        s.data / (s.data + s.journal + s.consolidation)
    };
    for &(s, _, pz) in paper::TABLE1.iter().skip(1) {
        let name = format!("{s}-zipf");
        let Some(o) = r.zipf_ordered.get(&format!("{name}-ordered")) else {
            continue;
        };
        let z = wl(r, &name);
        t.row(vec![
            name,
            f2(100.0 * z.tlb_miss_ratio),
            f2(100.0 * o.tlb_miss_ratio),
            f2(pz),
            f2(z.osp_flushes_by_source.consolidation),
            f2(o.osp_flushes_by_source.consolidation),
            pct(share(z)),
            pct(share(o)),
            format!("{:.2}x", z.flush_reduction),
            format!("{:.2}x", o.flush_reduction),
        ]);
    }
    t.note("the paper names only \"a Zipf distribution [YCSB]\"; keys are mixed (splitmix64) before they reach a structure in both runs, so only allocation order ties the unscrambled hot keys together");
    t
}

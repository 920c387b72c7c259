//! The reproduction's figures: 3 and 4 (the analytic model), 10 (MPI along the trace), 11
//! (MPI against associativity and against size, with the equivalence lines), 12
//! (per-process mapping conflicts), 13 (per-process MPI against conflicts with the
//! least-squares line), and the sensitivity plots; and the tables that state their
//! numbers.

use super::analysis::{equivalent, least_squares, mean, select};
use super::paper::{L2_CONFIGS, TABLE1};
use super::sensitivity::reductions;
use super::tables::Report;
use pmlab_os::PolicyKind;
use pmlab_os::figures::{FigureConfig, FigurePoint, model_figures};
use pmlab_report::{LinePlot, ReportError, ScatterPlot, Series, Table};
use std::path::Path;

const PAIR: [PolicyKind; 2] = [PolicyKind::Random, PolicyKind::Hierarchical];

fn model(dir: &Path) -> Result<Vec<FigurePoint>, ReportError> {
    model_figures(&FigureConfig::paper()).map_err(|e| ReportError {
        path: dir.join("fig3.svg"),
        message: e.to_string(),
    })
}

fn by_assoc(model: &[FigurePoint], assoc: u32, y: &dyn Fn(&FigurePoint) -> f64) -> Vec<(f64, f64)> {
    model
        .iter()
        .filter(|p| p.assoc == assoc)
        .map(|p| (p.pages as f64, y(p)))
        .collect()
}

pub(crate) fn write_all(dir: &Path, report: &Report) -> Result<(), ReportError> {
    let m = model(dir)?;
    LinePlot {
        title: "Figure 3: page conflicts in a 1 MiB direct-mapped cache (model)".into(),
        x_label: "application size U (16 KiB pages)".into(),
        y_label: "conflicts".into(),
        series: vec![
            Series::new("C_max", by_assoc(&m, 1, &|p| p.c_max as f64)),
            Series::new("C_avg (random)", by_assoc(&m, 1, &|p| p.c_avg)),
            Series::new("C_min", by_assoc(&m, 1, &|p| p.c_min as f64)),
        ],
    }
    .write_svg(&dir.join("fig3.svg"))?;
    LinePlot {
        title: "Figure 4: mapping conflicts C_avg - C_min, 1 MiB cache (model)".into(),
        x_label: "application size U (16 KiB pages)".into(),
        y_label: "C_avg - C_min".into(),
        series: [1, 2, 4, 8]
            .iter()
            .map(|&a| {
                Series::new(
                    format!("{a}-way"),
                    by_assoc(&m, a, &|p| p.mapping_conflicts),
                )
            })
            .collect(),
    }
    .write_svg(&dir.join("fig4.svg"))?;
    figure10(dir, report)?;
    figure11(dir, report)?;
    figure12(dir, report, &m)?;
    figure13(dir, report)?;
    sensitivity(dir, report)
}

/// Figure 10: MPI per window along the trace, four random and four hierarchical mappings.
fn figure10(dir: &Path, report: &Report) -> Result<(), ReportError> {
    for (i, size) in [1u64, 4, 16].into_iter().enumerate() {
        let mut series = Vec::new();
        for policy in PAIR {
            for p in select(&report.passes, 0, policy, report.large_pool).take(4) {
                let Some(k) = p
                    .l2_misses
                    .iter()
                    .position(|&(s, a, _)| (s, a) == (size, 1))
                else {
                    continue;
                };
                let mut prev = (0u64, 0u64);
                let pts = p
                    .windows
                    .iter()
                    .map(|(instr, misses)| {
                        let mpi =
                            1000.0 * (misses[k] - prev.1) as f64 / (instr - prev.0).max(1) as f64;
                        prev = (*instr, misses[k]);
                        (*instr as f64 / 1e6, mpi)
                    })
                    .collect();
                series.push(Series::new(
                    format!("{} seed {}", policy.name(), p.spec.seed),
                    pts,
                ));
            }
        }
        LinePlot {
            title: format!("Figure 10: MPI x 1000 per window, {size} MiB direct-mapped level two"),
            x_label: "instructions (millions)".into(),
            y_label: "misses per 1000 instructions".into(),
            series,
        }
        .write_svg(&dir.join(format!("fig10-{}.svg", ["a", "b", "c"][i])))?;
    }
    Ok(())
}

fn figure11(dir: &Path, report: &Report) -> Result<(), ReportError> {
    let mpi = |policy, l2| mean(&report.passes, 0, policy, report.large_pool, l2, false);
    let mut by_assoc = Vec::new();
    let mut by_size = Vec::new();
    for policy in PAIR {
        for size in [1u64, 4, 16] {
            let pts = L2_CONFIGS
                .iter()
                .filter(|&&(s, _)| s == size)
                .map(|&(s, a)| (f64::from(a), mpi(policy, (s, a))))
                .collect();
            by_assoc.push(Series::new(format!("{} {size}M", policy.name()), pts));
        }
        for assoc in [1u32, 2, 4] {
            let pts = L2_CONFIGS
                .iter()
                .filter(|&&(_, a)| a == assoc)
                .map(|&(s, a)| (s as f64, mpi(policy, (s, a))))
                .collect();
            by_size.push(Series::new(format!("{} {assoc}-way", policy.name()), pts));
        }
    }
    let (ways, mb) = equivalences(report);
    let h1 = mpi(PolicyKind::Hierarchical, (1, 1));
    by_assoc.push(Series::new(
        format!("hierarchical 1M 1-way = random {ways:.2}-way"),
        vec![(1.0, h1), (ways, h1)],
    ));
    by_size.push(Series::new(
        format!("hierarchical 1M 1-way = random {mb:.2} MiB"),
        vec![(1.0, h1), (mb, h1)],
    ));
    LinePlot {
        title: "Figure 11 (left): level-two MPI x 1000 against associativity".into(),
        x_label: "associativity".into(),
        y_label: "misses per 1000 instructions".into(),
        series: by_assoc,
    }
    .write_svg(&dir.join("fig11.svg"))?;
    LinePlot {
        title: "Figure 11 (right): level-two MPI x 1000 against cache size".into(),
        x_label: "level-two size (MiB)".into(),
        y_label: "misses per 1000 instructions".into(),
        series: by_size,
    }
    .write_svg(&dir.join("fig11b.svg"))
}

/// The associativity and size random mapping needs to match hierarchical mapping on the
/// 1 MiB direct-mapped level two.
fn equivalences(report: &Report) -> (f64, f64) {
    let mpi = |policy, l2| mean(&report.passes, 0, policy, report.large_pool, l2, false);
    let (r1, r2, r4) = (
        mpi(PolicyKind::Random, (1, 1)),
        mpi(PolicyKind::Random, (1, 2)),
        mpi(PolicyKind::Random, (4, 1)),
    );
    let h1 = mpi(PolicyKind::Hierarchical, (1, 1));
    (
        equivalent(r1, r2, h1, 1.0, 2.0),
        equivalent(r1, r4, h1, 1.0, 4.0),
    )
}

pub(crate) fn figure11_table(report: &Report) -> Table {
    let (ways, mb) = equivalences(report);
    let p = |i: usize| TABLE1[i].random.0;
    let (pw, pm) = (
        equivalent(p(0), p(1), TABLE1[0].hierarchical.0, 1.0, 2.0),
        equivalent(p(0), p(3), TABLE1[0].hierarchical.0, 1.0, 4.0),
    );
    let mut t = Table::new(
        "Figure 11's dashed lines: what random mapping needs to match hierarchical on 1 MiB direct-mapped",
        &[
            "equivalent",
            "ours",
            "paper (read from Table 1)",
            "paper (text)",
        ],
    );
    t.row(vec![
        "associativity".into(),
        format!("{ways:.2}"),
        format!("{pw:.2}"),
        "1.6".into(),
    ]);
    t.row(vec![
        "size (MiB)".into(),
        format!("{mb:.2}"),
        format!("{pm:.2}"),
        "1.7".into(),
    ]);
    t.note("Linear in MPI along log2 of associativity (1 to 2 ways) or of size (1 to 4 MiB); plotted in fig11.svg and fig11b.svg.");
    t
}

fn conflicts(report: &Report, policy: PolicyKind) -> Vec<(f64, f64)> {
    select(&report.passes, 0, policy, report.large_pool)
        .flat_map(|p| &p.spaces)
        .map(|s| (s.pages as f64, (s.conflicts - s.min_conflicts) as f64))
        .collect()
}

fn figure12(dir: &Path, report: &Report, m: &[FigurePoint]) -> Result<(), ReportError> {
    ScatterPlot {
        title: "Figure 12: mapping conflicts per process, 1 MiB direct-mapped".into(),
        x_label: "address space size (16 KiB pages)".into(),
        y_label: "C - C_min".into(),
        points: PAIR
            .iter()
            .map(|&p| Series::new(p.name(), conflicts(report, p)))
            .collect(),
        lines: vec![Series::new(
            "model C_avg - C_min",
            by_assoc(m, 1, &|p| p.mapping_conflicts),
        )],
    }
    .write_svg(&dir.join("fig12.svg"))
}

pub(crate) fn figure12_table(report: &Report) -> Table {
    let mut t = Table::new(
        "Figure 12: avoidable conflicts (C - C_min) per process, 1 MiB direct-mapped, every process of every sample",
        &[
            "mapping",
            "process samples",
            "with C > C_min",
            "mean C - C_min",
            "max C - C_min",
        ],
    );
    for policy in PAIR {
        let v = conflicts(report, policy);
        let max = v.iter().map(|p| p.1).fold(0.0, f64::max);
        t.row(vec![
            policy.name().into(),
            v.len().to_string(),
            v.iter().filter(|p| p.1 > 0.0).count().to_string(),
            format!(
                "{:.2}",
                v.iter().map(|p| p.1).sum::<f64>() / v.len().max(1) as f64
            ),
            format!("{max:.0}"),
        ]);
    }
    t.note("Paper: the Hierarchical Heuristic left no avoidable conflict in any address space of Mult2.2.");
    t
}

/// Figure 13's size band in MB: the paper's 0.5 to 1.0 MB when it holds at least ten
/// process samples, otherwise the octave (0.5 to 1.0 MB times a power of two) holding the
/// most, since x86-64 processes under valgrind touch more pages than the paper's.
fn figure13_band(report: &Report) -> (f64, f64) {
    let sizes: Vec<f64> = select(&report.passes, 0, PolicyKind::Random, report.large_pool)
        .flat_map(|p| &p.spaces)
        .filter(|s| s.instructions > 0)
        .map(|s| (s.pages * (16 << 10)) as f64 / f64::from(1 << 20))
        .collect();
    let count = |k: i32| {
        let (lo, hi) = (0.5 * 2f64.powi(k), 2f64.powi(k));
        sizes.iter().filter(|&&m| m >= lo && m <= hi).count()
    };
    let k = if count(0) >= 10 {
        0
    } else {
        (0..6).max_by_key(|&k| (count(k), -k)).unwrap_or(0)
    };
    (0.5 * 2f64.powi(k), 2f64.powi(k))
}

/// Figure 13's samples: processes in the band under random mapping, (C, MPI x 1000).
fn figure13_points(report: &Report) -> Vec<(f64, f64)> {
    let (lo, hi) = figure13_band(report);
    select(&report.passes, 0, PolicyKind::Random, report.large_pool)
        .flat_map(|p| &p.spaces)
        .filter(|s| {
            let mb = (s.pages * (16 << 10)) as f64 / f64::from(1 << 20);
            mb >= lo && mb <= hi && s.instructions > 0
        })
        .map(|s| {
            (
                s.conflicts as f64,
                1000.0 * s.misses_1m as f64 / s.instructions as f64,
            )
        })
        .collect()
}

fn figure13(dir: &Path, report: &Report) -> Result<(), ReportError> {
    let pts = figure13_points(report);
    let (lo, hi) = figure13_band(report);
    let mut lines = Vec::new();
    if let Some((slope, icpt, _)) = least_squares(&pts) {
        let xmax = pts.iter().map(|p| p.0).fold(0.0, f64::max);
        lines.push(Series::new(
            "least squares",
            vec![(0.0, icpt), (xmax, icpt + slope * xmax)],
        ));
    }
    ScatterPlot {
        title: format!(
            "Figure 13: MPI x 1000 against conflicts, processes of {lo}-{hi} MB, random mapping, 1 MiB direct-mapped"
        ),
        x_label: "conflicts C".into(),
        y_label: "misses per 1000 instructions".into(),
        points: vec![Series::new("process", pts)],
        lines,
    }
    .write_svg(&dir.join("fig13.svg"))
}

pub(crate) fn figure13_table(report: &Report) -> Table {
    let pts = figure13_points(report);
    let (lo, hi) = figure13_band(report);
    let mut t = Table::new(
        "Figure 13: least-squares fit of MPI x 1000 against conflicts (random mapping, 1 MiB direct-mapped)",
        &[
            "process size (MB)",
            "process samples",
            "slope (MPI per conflict)",
            "intercept",
            "correlation r",
        ],
    );
    let band = format!("{lo} - {hi}");
    match least_squares(&pts) {
        Some((m, b, r)) => t.row(vec![
            band,
            pts.len().to_string(),
            format!("{m:+.4}"),
            format!("{b:.4}"),
            format!("{r:+.3}"),
        ]),
        None => t.row(vec![
            band,
            pts.len().to_string(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]),
    }
    t.note("Paper: 58 processes of 0.5-1.0 MB in Mult2.2; a positive slope through widely scattered samples.");
    t.note("The band is the paper's when it holds ten samples, else the octave holding the most (see fig13.svg).");
    t
}

fn sensitivity(dir: &Path, report: &Report) -> Result<(), ReportError> {
    let main = &report.schedules[0];
    let sizes = ["1M", "4M", "16M"];
    let mut by_interval = vec![Vec::new(); 6];
    let mut by_streams = vec![Vec::new(); 6];
    for (s, sched) in report.schedules.iter().enumerate() {
        let (all, warm) = reductions(report, s);
        let same_streams = sched.streams == main.streams;
        let same_quantum = sched.spec.mean_quantum == main.spec.mean_quantum;
        for k in 0..3 {
            if same_streams {
                by_interval[k].push((sched.mean_switch_interval(), all[k]));
                by_interval[k + 3].push((sched.mean_switch_interval(), warm[k]));
            }
            if same_quantum {
                by_streams[k].push((sched.streams as f64, all[k]));
                by_streams[k + 3].push((sched.streams as f64, warm[k]));
            }
        }
    }
    let named = |v: Vec<Vec<(f64, f64)>>| {
        v.into_iter()
            .enumerate()
            .map(|(k, mut pts)| {
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let label = format!(
                    "{}{}",
                    sizes[k % 3],
                    if k < 3 { "" } else { " (cold excluded)" }
                );
                Series::new(
                    label,
                    pts.into_iter().map(|(x, y)| (x.log10(), y)).collect(),
                )
            })
            .collect::<Vec<_>>()
    };
    LinePlot {
        title: "Sensitivity: hierarchical reduction against mean switch interval".into(),
        x_label: "log10 instructions between switches".into(),
        y_label: "reduction of misses (%)".into(),
        series: named(by_interval),
    }
    .write_svg(&dir.join("sensitivity-interval.svg"))?;
    let mut series = named(by_streams);
    for s in &mut series {
        for p in &mut s.points {
            p.0 = 10f64.powf(p.0);
        }
    }
    LinePlot {
        title: "Sensitivity: hierarchical reduction against concurrent streams".into(),
        x_label: "concurrent streams".into(),
        y_label: "reduction of misses (%)".into(),
        series,
    }
    .write_svg(&dir.join("sensitivity-streams.svg"))
}

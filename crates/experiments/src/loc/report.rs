//! The reproduction's results: tables beside the paper's figures, `loc.json`, CSV and
//! SVG under the output directory.

use pmlab_hwtx::{ComputeModel, HwKind, Reading};
use pmlab_report::{BarPlot, Table, write_json};
use serde_json::{Value, json};

use super::crash::CrashSummary;
use super::gap::{self, GapSplit};
use super::plan::{Key, Measured};
use super::run::Built;
use super::{Config, LocError, paper};

/// Figure 6's protocols, in the paper's order (plus EC-WAL, which Figure 7 compares).
const FIG6: [HwKind; 6] = [
    HwKind::SWal,
    HwKind::HWal,
    HwKind::EcWal,
    HwKind::LocWal,
    HwKind::Kiln,
    HwKind::LocKiln,
];

/// The reproduction's results.
#[derive(Debug)]
pub struct Report {
    /// Human tables, in order.
    pub tables: Vec<(String, Table)>,
    /// `loc.json`.
    pub json: Value,
    plots: Vec<(String, BarPlot)>,
}

fn f3(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "-".into()
    }
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// The 1-minute load average (`/proc/loadavg`), if readable.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The key of `kind` at the paper's defaults (SD 16 for the speculative ones, line
/// blocks, 168 ns) for `workload`.
fn default_key(workload: pmlab_workloads::Kind, kind: HwKind) -> Key {
    let sd = match kind {
        HwKind::LocWal | HwKind::LocKiln => 16,
        _ => 1,
    };
    Key {
        workload,
        kind,
        sd,
        reading: Reading::Line,
        latency_ns: 168,
        strict: true,
    }
}

struct Ctx<'a> {
    m: &'a Measured,
}

impl Ctx<'_> {
    fn norm(&self, key: Key) -> f64 {
        self.m.normalized(&key).unwrap_or(f64::NAN)
    }

    /// Per workload (the paper's order) and the average.
    fn series(&self, key: impl Fn(pmlab_workloads::Kind) -> Key) -> (Vec<f64>, f64) {
        let v: Vec<f64> = paper::WORKLOADS
            .iter()
            .map(|&(w, _)| self.norm(key(w)))
            .collect();
        let avg = mean(&v);
        (v, avg)
    }
}

impl Report {
    /// Lays the measurements beside the paper.
    pub fn new(
        config: &Config,
        built: &[Built],
        m: Measured,
        crash: Option<CrashSummary>,
        wall_s: f64,
        load_before: Option<f64>,
    ) -> Report {
        let c = Ctx { m: &m };
        let mut r = Report {
            tables: Vec::new(),
            json: json!({}),
            plots: Vec::new(),
        };
        let averages = r.figure6(&c);
        r.figure7(&c);
        r.figure8(&c, config);
        r.figure9(&c, config);
        if config.readings {
            r.readings(&c);
        }
        if config.overlapped {
            r.overlapped(&c);
        }
        r.targets(&c, &averages);
        r.gap(&c);
        let speed = r.speed(&m, wall_s, load_before, config);
        if let Some(cs) = &crash {
            r.crash(cs);
        }
        r.json = r.assemble(config, built, &c, averages, speed, crash);
        r
    }

    fn figure6(&mut self, c: &Ctx) -> Vec<(HwKind, f64)> {
        let mut header = vec!["workload"];
        header.extend(FIG6.iter().map(|k| k.label()));
        let mut t = Table::new(
            "Figure 6: transaction throughput normalized to the baseline without persistence (168 ns)",
            &header,
        );
        let cols: Vec<(Vec<f64>, f64)> = FIG6
            .iter()
            .map(|&k| c.series(|w| default_key(w, k)))
            .collect();
        for (i, &(_, name)) in paper::WORKLOADS.iter().enumerate() {
            let mut row = vec![name.to_string()];
            row.extend(cols.iter().map(|(v, _)| f3(v[i])));
            t.row(row);
        }
        let mut avg = vec!["average".to_string()];
        avg.extend(cols.iter().map(|(_, a)| f3(*a)));
        t.row(avg);
        let mut p = vec!["paper (average)".to_string()];
        p.extend(
            FIG6.iter()
                .map(|&k| paper::average(k).map_or("-".into(), f3)),
        );
        t.row(p);
        t.note(
            "paper: §V-B states only the averages; its per-workload bars are not given as numbers",
        );
        let mut categories: Vec<String> =
            paper::WORKLOADS.iter().map(|w| w.1.to_string()).collect();
        categories.push("Average".into());
        let series = FIG6
            .iter()
            .zip(&cols)
            .filter(|(k, _)| **k != HwKind::EcWal)
            .map(|(k, (v, a))| {
                let mut v = v.clone();
                v.push(*a);
                (k.label().to_string(), v)
            })
            .collect();
        self.plots.push((
            "fig6.svg".into(),
            BarPlot {
                title: "Figure 6: normalized transaction throughput".into(),
                y_label: "throughput / baseline".into(),
                categories,
                series,
            },
        ));
        self.tables.push(("fig6.csv".into(), t));
        FIG6.iter().zip(cols).map(|(&k, (_, a))| (k, a)).collect()
    }

    fn figure7(&mut self, c: &Ctx) {
        let mut t = Table::new(
            "Figure 7: Eager Commit — H-WAL and EC-WAL, normalized throughput",
            &["workload", "H-WAL", "EC-WAL", "EC-WAL / H-WAL"],
        );
        let (h, ha) = c.series(|w| default_key(w, HwKind::HWal));
        let (e, ea) = c.series(|w| default_key(w, HwKind::EcWal));
        for (i, &(_, name)) in paper::WORKLOADS.iter().enumerate() {
            t.row(vec![name.into(), f3(h[i]), f3(e[i]), f3(e[i] / h[i])]);
        }
        t.row(vec!["average".into(), f3(ha), f3(ea), f3(ea / ha)]);
        t.row(vec![
            "paper (average)".into(),
            f3(0.331),
            "-".into(),
            f3(paper::EC_OVER_H),
        ]);
        let mut categories: Vec<String> =
            paper::WORKLOADS.iter().map(|w| w.1.to_string()).collect();
        categories.push("Average".into());
        let with_avg = |mut v: Vec<f64>, a| {
            v.push(a);
            v
        };
        self.plots.push((
            "fig7.svg".into(),
            BarPlot {
                title: "Figure 7: H-WAL and EC-WAL".into(),
                y_label: "throughput / baseline".into(),
                categories,
                series: vec![
                    ("H-WAL".into(), with_avg(h, ha)),
                    ("EC-WAL".into(), with_avg(e, ea)),
                ],
            },
        ));
        self.tables.push(("fig7.csv".into(), t));
    }

    fn sd_key(w: pmlab_workloads::Kind, sd: u32) -> Key {
        Key {
            sd,
            ..default_key(w, HwKind::LocWal)
        }
    }

    fn figure8(&mut self, c: &Ctx, config: &Config) {
        let mut header = vec!["workload".to_string()];
        header.extend(config.sds.iter().map(|sd| format!("SD={sd}")));
        let h: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut t = Table::new(
            "Figure 8: LOC-WAL by speculation degree, normalized throughput",
            &h,
        );
        let cols: Vec<(Vec<f64>, f64)> = config
            .sds
            .iter()
            .map(|&sd| c.series(|w| Self::sd_key(w, sd)))
            .collect();
        for (i, &(_, name)) in paper::WORKLOADS.iter().enumerate() {
            let mut row = vec![name.to_string()];
            row.extend(cols.iter().map(|(v, _)| f3(v[i])));
            t.row(row);
        }
        let mut avg = vec!["average".to_string()];
        avg.extend(cols.iter().map(|(_, a)| f3(*a)));
        t.row(avg);
        let mut p = vec!["paper (average)".to_string()];
        p.extend(
            config
                .sds
                .iter()
                .map(|&sd| paper::sd_average(sd).map_or("-".into(), f3)),
        );
        t.row(p);
        let mut categories: Vec<String> =
            paper::WORKLOADS.iter().map(|w| w.1.to_string()).collect();
        categories.push("Average".into());
        let series = config
            .sds
            .iter()
            .zip(&cols)
            .map(|(sd, (v, a))| {
                let mut v = v.clone();
                v.push(*a);
                (format!("SD={sd}"), v)
            })
            .collect();
        self.plots.push((
            "fig8.svg".into(),
            BarPlot {
                title: "Figure 8: LOC-WAL by speculation degree".into(),
                y_label: "throughput / baseline".into(),
                categories,
                series,
            },
        ));
        self.tables.push(("fig8.csv".into(), t));
    }

    fn figure9(&mut self, c: &Ctx, config: &Config) {
        let mut t = Table::new(
            "Figure 9: H-WAL and LOC-WAL (SD 16) by memory latency, normalized to the baseline at that latency (averages over the workloads)",
            &[
                "latency (ns)",
                "H-WAL",
                "LOC-WAL",
                "LOC-WAL / H-WAL",
                "LOC-WAL - H-WAL",
            ],
        );
        let mut h_series = Vec::new();
        let mut l_series = Vec::new();
        for &lat in &config.latencies {
            let at = |k: Key| Key {
                latency_ns: lat,
                ..k
            };
            let (_, ha) = c.series(|w| at(default_key(w, HwKind::HWal)));
            let (_, la) = c.series(|w| at(default_key(w, HwKind::LocWal)));
            t.row(vec![
                lat.to_string(),
                f3(ha),
                f3(la),
                f3(la / ha),
                f3(la - ha),
            ]);
            h_series.push(ha);
            l_series.push(la);
        }
        for claim in paper::FIG9_CLAIMS {
            t.note(format!("paper: {claim}"));
        }
        self.plots.push((
            "fig9.svg".into(),
            BarPlot {
                title: "Figure 9: H-WAL and LOC-WAL by memory latency".into(),
                y_label: "throughput / baseline".into(),
                categories: config.latencies.iter().map(|l| format!("{l} ns")).collect(),
                series: vec![("H-WAL".into(), h_series), ("LOC-WAL".into(), l_series)],
            },
        ));
        self.tables.push(("fig9.csv".into(), t));
    }

    fn readings(&mut self, c: &Ctx) {
        let mut t = Table::new(
            "What a block-group \"block\" is: 64-byte lines (default) against 8-byte words, average normalized throughput",
            &["protocol", "line blocks", "word blocks", "word / line"],
        );
        for kind in [HwKind::HWal, HwKind::EcWal, HwKind::LocWal] {
            let (_, line) = c.series(|w| default_key(w, kind));
            let (_, word) = c.series(|w| Key {
                reading: Reading::Word,
                ..default_key(w, kind)
            });
            t.row(vec![
                kind.label().into(),
                f3(line),
                f3(word),
                f3(word / line),
            ]);
        }
        self.tables.push(("readings.csv".into(), t));
    }

    fn overlapped(&mut self, c: &Ctx) {
        let mut header = vec!["workload"];
        header.extend(FIG6.iter().map(|k| k.label()));
        let mut t = Table::new(
            "Figure 6 under the looser reading of strict ordering (persistent writes overlapped across banks, in-place writes left to the cache; LOC-WAL and LOC-Kiln at SD 16 unchanged)",
            &header,
        );
        let key = |w, k: HwKind| {
            let d = default_key(w, k);
            Key {
                strict: d.sd != 1,
                ..d
            }
        };
        let cols: Vec<(Vec<f64>, f64)> = FIG6.iter().map(|&k| c.series(|w| key(w, k))).collect();
        for (i, &(_, name)) in paper::WORKLOADS.iter().enumerate() {
            let mut row = vec![name.to_string()];
            row.extend(cols.iter().map(|(v, _)| f3(v[i])));
            t.row(row);
        }
        let mut avg = vec!["average".to_string()];
        avg.extend(cols.iter().map(|(_, a)| f3(*a)));
        t.row(avg);
        let mut p = vec!["paper (average)".to_string()];
        p.extend(
            FIG6.iter()
                .map(|&k| paper::average(k).map_or("-".into(), f3)),
        );
        t.row(p);
        let ec = cols[2].1 / cols[1].1;
        t.note(format!(
            "EC-WAL / H-WAL: {} (paper {})",
            f3(ec),
            f3(paper::EC_OVER_H)
        ));
        self.tables.push(("overlapped.csv".into(), t));
    }

    fn targets(&mut self, c: &Ctx, averages: &[(HwKind, f64)]) {
        let mut t = Table::new(
            "Targets: the paper's averages beside ours",
            &["target", "paper", "ours", "ours / paper", "within 25%"],
        );
        for &(k, ours) in averages {
            if let Some(p) = paper::average(k) {
                let r = ours / p;
                t.row(vec![
                    format!("{} average", k.label()),
                    f3(p),
                    f3(ours),
                    f3(r),
                    ((r - 1.0).abs() <= 0.25).to_string(),
                ]);
            }
        }
        let avg = |k| averages.iter().find(|a| a.0 == k).map_or(f64::NAN, |a| a.1);
        let ec = avg(HwKind::EcWal) / avg(HwKind::HWal);
        t.row(vec![
            "EC-WAL / H-WAL".into(),
            f3(paper::EC_OVER_H),
            f3(ec),
            f3(ec / paper::EC_OVER_H),
            ((ec / paper::EC_OVER_H - 1.0).abs() <= 0.25).to_string(),
        ]);
        for sd in [1, 32] {
            let (_, ours) = c.series(|w| Self::sd_key(w, sd));
            let p = paper::sd_average(sd).expect("stated");
            t.row(vec![
                format!("LOC-WAL SD={sd} average"),
                f3(p),
                f3(ours),
                f3(ours / p),
                ((ours / p - 1.0).abs() <= 0.25).to_string(),
            ]);
        }
        let order = [HwKind::SWal, HwKind::HWal, HwKind::LocWal, HwKind::LocKiln];
        let ordered = order.windows(2).all(|w| avg(w[0]) < avg(w[1]));
        t.note(format!(
            "paper's order on average (S-WAL < H-WAL < LOC-WAL < LOC-Kiln): {}",
            if ordered { "kept" } else { "NOT kept" }
        ));
        let per: Vec<String> = paper::WORKLOADS
            .iter()
            .filter(|&&(w, _)| {
                order
                    .windows(2)
                    .all(|p| c.norm(default_key(w, p[0])) < c.norm(default_key(w, p[1])))
            })
            .map(|w| w.1.to_string())
            .collect();
        t.note(format!(
            "workloads keeping that order: {} of 6 ({})",
            per.len(),
            per.join(", ")
        ));
        self.tables.push(("targets.csv".into(), t));
    }

    /// LOC-WAL's distance from the paper split into SD 1's (the base) and the gain of
    /// speculation's, over all workloads and the two groups of [`gap::groups`].
    fn gap(&mut self, c: &Ctx) {
        let rows: Vec<(String, GapSplit)> = gap::groups()
            .iter()
            .map(|(label, keep)| {
                let at = |sd| {
                    let (v, _) = c.series(|w| Self::sd_key(w, sd));
                    let kept: Vec<f64> = paper::WORKLOADS
                        .iter()
                        .zip(&v)
                        .filter(|((w, _), _)| keep(*w))
                        .map(|(_, x)| *x)
                        .collect();
                    mean(&kept)
                };
                (label.to_string(), GapSplit::new(at(1), at(16), at(32)))
            })
            .collect();
        let t = gap::table(
            "Where LOC-WAL's distance from the paper lies: SD 1 (no speculation) and the gain to SD 16",
            &rows,
        );
        self.tables.push(("gap.csv".into(), t));
    }

    fn speed(&mut self, m: &Measured, wall_s: f64, load: Option<f64>, config: &Config) -> Value {
        let tx: u64 = m.runs.values().map(|r| r.committed_tx).sum();
        let refs: u64 = m.runs.values().map(|r| r.accesses).sum();
        let sim_wall: f64 = m.runs.values().map(|r| r.wall_s).sum();
        let mut t = Table::new(
            "Simulation speed (measured parts of every run, summed over the worker threads)",
            &[
                "runs",
                "transactions",
                "memory references",
                "seconds",
                "transactions/s",
                "references/s",
            ],
        );
        t.row(vec![
            m.runs.len().to_string(),
            tx.to_string(),
            refs.to_string(),
            format!("{sim_wall:.1}"),
            format!("{:.0}", tx as f64 / sim_wall),
            format!("{:.0}", refs as f64 / sim_wall),
        ]);
        t.note(format!(
            "whole reproduction: {wall_s:.1} s of wall clock on {} threads; load average before it: {}",
            config.threads,
            load.map_or("unknown".into(), |l| format!("{l:.2}"))
        ));
        self.tables.push(("speed.csv".into(), t));
        json!({
            "runs": m.runs.len(),
            "simulated_transactions": tx,
            "memory_references": refs,
            "simulation_seconds": sim_wall,
            "transactions_per_second": tx as f64 / sim_wall,
            "references_per_second": refs as f64 / sim_wall,
            "wall_seconds": wall_s,
            "threads": config.threads,
            "load_average_before": load,
        })
    }

    fn crash(&mut self, cs: &CrashSummary) {
        let mut t = Table::new(
            "Crash exploration: every crash point of every workload under every protocol (small size)",
            &[
                "workload",
                "protocol",
                "blocks",
                "strict",
                "txs",
                "points",
                "images",
                "recoveries",
                "recovery images",
                "truncated",
                "failing",
            ],
        );
        for r in &cs.rows {
            t.row(vec![
                r.workload.into(),
                r.protocol.into(),
                r.reading.into(),
                if r.strict { "yes" } else { "no" }.into(),
                r.txs.to_string(),
                r.points.to_string(),
                r.images.to_string(),
                r.recoveries.to_string(),
                r.recovery_images.to_string(),
                r.truncated_points.to_string(),
                r.failing_images.to_string(),
            ]);
        }
        t.note(format!("{:.1} s", cs.wall_s));
        self.tables.push(("crash.csv".into(), t));
        let mut b = Table::new(
            "Broken variants: each must be caught",
            &[
                "variant",
                "protocol",
                "caught on",
                "failing images",
                "first failure",
            ],
        );
        for r in &cs.broken {
            b.row(vec![
                r.variant.into(),
                r.protocol.into(),
                r.caught_on.unwrap_or("NOT CAUGHT").into(),
                r.failing_images.to_string(),
                r.first_failure.chars().take(120).collect(),
            ]);
        }
        self.tables.push(("broken.csv".into(), b));
    }

    fn assemble(
        &self,
        config: &Config,
        built: &[Built],
        c: &Ctx,
        averages: Vec<(HwKind, f64)>,
        speed: Value,
        crash: Option<CrashSummary>,
    ) -> Value {
        let workloads = workloads_json(built, c);
        let avg: serde_json::Map<String, Value> = averages
            .iter()
            .map(|(k, a)| (k.label().to_string(), json!(a)))
            .collect();
        let paper_avg: serde_json::Map<String, Value> = FIG6
            .iter()
            .filter_map(|&k| paper::average(k).map(|a| (k.label().to_string(), json!(a))))
            .collect();
        let runs = runs_json(c);
        let tables: serde_json::Map<String, Value> = self
            .tables
            .iter()
            .map(|(n, t)| (n.trim_end_matches(".csv").to_string(), json!(t)))
            .collect();
        json!({
            "paper": "001 Lu, Shu, Sun, Mutlu: Loose-Ordering Consistency for Persistent Memory (ICCD 2014)",
            "machine": "LOC Table I: in-order 1 GHz core; L1 32 KiB 2-way 1 cycle, L2 256 KiB 8-way 8 cycles, LLC 1 MiB 16-way 21 cycles, 64-byte lines, LRU; memory 8 banks, 168 ns unless stated",
            "compute_model": ComputeModel::default(),
            "warmup_tx": config.warmup,
            "measured_tx": config.txs,
            "seed": config.seed,
            "workloads": workloads,
            "averages": avg,
            "paper_averages": paper_avg,
            "runs": runs,
            "tables": tables,
            "simulation_speed": speed,
            "crash_exploration": crash,
        })
    }

    /// Writes every table (CSV), plot (SVG) and `loc.json` under `config.out_dir`.
    pub fn write(&self, config: &Config) -> Result<(), LocError> {
        let dir = &config.out_dir;
        for (name, t) in &self.tables {
            t.write_csv(&dir.join(name))?;
        }
        for (name, p) in &self.plots {
            p.write_svg(&dir.join(name))?;
        }
        write_json(&dir.join("loc.json"), &self.json)?;
        Ok(())
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (_, t) in &self.tables {
            writeln!(f, "{t}")?;
        }
        Ok(())
    }
}

/// Per workload: its size and each protocol's figures in the default reading.
fn workloads_json(built: &[Built], c: &Ctx) -> serde_json::Map<String, Value> {
    let mut workloads = serde_json::Map::new();
    for &(w, name) in &paper::WORKLOADS {
        let b = built.iter().find(|b| b.kind == w);
        let mut protocols = serde_json::Map::new();
        for k in HwKind::ALL {
            let key = default_key(w, k);
            if let Some(r) = c.m.get(&key) {
                protocols.insert(
                    k.label().into(),
                    json!({
                        "normalized_throughput": c.m.normalized(&key),
                        "cycles": r.cycles,
                        "committed_tx": r.committed_tx,
                        "stats": r.stats,
                    }),
                );
            }
        }
        workloads.insert(
            name.into(),
            json!({
                "elements": b.map(|b| b.params.elements),
                "footprint_bytes": b.map(|b| b.footprint),
                "protocols": protocols,
            }),
        );
    }
    workloads
}

/// Every run simulated, in a stable order.
fn runs_json(c: &Ctx) -> Vec<Value> {
    let mut keys: Vec<&Key> = c.m.runs.keys().collect();
    keys.sort_by_key(|k| {
        (
            paper::workload_name(k.workload),
            k.kind.label(),
            k.sd,
            k.reading.name(),
            k.latency_ns,
            k.strict,
        )
    });
    keys.into_iter()
        .map(|k| {
            let r = &c.m.runs[k];
            json!({
                "workload": paper::workload_name(k.workload),
                "protocol": k.kind.label(),
                "sd": k.sd,
                "reading": k.reading.name(),
                "latency_ns": k.latency_ns,
                "strict": k.strict,
                "normalized_throughput": c.m.normalized(k),
                "cycles": r.cycles,
                "committed_tx": r.committed_tx,
            })
        })
        .collect()
}

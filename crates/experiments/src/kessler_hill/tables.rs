//! The reproduction's tables, each laid beside the paper's figures, and the files they
//! are written to.

use super::analysis::{cell, mean, reduction, separate};
use super::paper::{self, HEURISTICS, L2_CONFIGS, TABLE1, TABLE3, TABLE4};
use super::{Config, ExperimentError, PassResult, Schedule, Workload, plots, sensitivity};
use pmlab_os::PolicyKind;
use pmlab_report::{Table, write_json};
use std::fmt;

/// The finished reproduction: the raw passes and the tables built from them.
pub struct Report {
    /// Every pass with the index of its schedule (0: the main run).
    pub passes: Vec<(usize, PassResult)>,
    /// The schedules: the main run's first, then the sensitivity runs'.
    pub schedules: Vec<Schedule>,
    /// Appendix A's single-program runs.
    pub appendix: Vec<super::AppendixRun>,
    /// The tables, in print order, with their file names.
    pub tables: Vec<(&'static str, Table)>,
    /// The workload's shape, printed above the tables.
    pub workload_summary: String,
    pub(crate) large_pool: u64,
    pub(crate) small_pool: u64,
}

pub(crate) fn pct(x: f64) -> String {
    format!("{x:.1}%")
}

fn rel(value: f64, reference: f64) -> String {
    format!("{value:.4} ({:+.0}%)", 100.0 * (value / reference - 1.0))
}

impl Report {
    pub(crate) fn build(
        config: &Config,
        workload: &Workload,
        schedules: Vec<Schedule>,
        passes: Vec<(usize, PassResult)>,
        appendix: Vec<super::AppendixRun>,
    ) -> Report {
        let (large, small) = config.pools;
        let mut report = Report {
            workload_summary: String::new(),
            tables: Vec::new(),
            large_pool: large,
            small_pool: small,
            passes,
            schedules,
            appendix,
        };
        report.workload_summary = summary_line(&report, workload, config);
        let t = vec![
            ("table1", report.table1()),
            ("table2", report.table2()),
            ("table3", report.table3()),
            ("table4", report.table4()),
            ("figure11", plots::figure11_table(&report)),
            ("figure12", plots::figure12_table(&report)),
            ("figure13", plots::figure13_table(&report)),
            ("sensitivity", sensitivity::table(&report)),
            ("differences", sensitivity::differences(&report)),
            ("appendix-a", super::appendix::table(&report.appendix)),
        ];
        report.tables = t;
        report
    }

    pub(crate) fn mean(&self, policy: PolicyKind, pool: u64, l2: (u64, u32), warm: bool) -> f64 {
        mean(&self.passes, 0, policy, pool, l2, warm)
    }

    fn table1(&self) -> Table {
        let mut t = Table::new(
            "Table 1. Level-two MPI x 1000, random vs hierarchical mapping, 90% confidence (Student t), medians",
            &[
                "L2",
                "random (ours)",
                "median",
                "hier. (ours)",
                "median",
                "reduction",
                "intervals separate",
                "paper random",
                "paper hier.",
                "paper red.",
                "paper's separate",
            ],
        );
        let mut disagree = 0;
        for (row, &l2) in TABLE1.iter().zip(&L2_CONFIGS) {
            let r = cell(&self.passes, 0, PolicyKind::Random, self.large_pool, l2);
            let h = cell(
                &self.passes,
                0,
                PolicyKind::Hierarchical,
                self.large_pool,
                l2,
            );
            let (Some(r), Some(h)) = (r, h) else { continue };
            let ours = separate((r.mean, r.half_width), (h.mean, h.half_width));
            let theirs = separate(
                (row.random.0, row.random.1),
                (row.hierarchical.0, row.hierarchical.1),
            );
            disagree += usize::from(ours != theirs);
            t.row(vec![
                format!("{}M {}-way", l2.0, l2.1),
                format!("{:.4} ± {:.4}", r.mean, r.half_width),
                format!("{:.4}", r.median),
                format!("{:.4} ± {:.4}", h.mean, h.half_width),
                format!("{:.4}", h.median),
                pct(reduction(r.mean, h.mean)),
                yes_no(ours),
                format!("{:.4} ± {:.4}", row.random.0, row.random.1),
                format!("{:.4} ± {:.4}", row.hierarchical.0, row.hierarchical.1),
                pct(row.reduction_pct),
                yes_no(theirs),
            ]);
        }
        t.note(format!(
            "{} samples per cell; paper: Mult2.2, 4 samples. Intervals separate in {} of 9 rows as in the paper{}.",
            self.samples(),
            9 - disagree,
            if disagree == 0 {
                ""
            } else {
                "; where they do not, the difference is smaller than the sampling noise of these runs"
            }
        ));
        t
    }

    fn table2(&self) -> Table {
        let mut t = Table::new(
            "Table 2. Hierarchical reduction for direct-mapped level twos",
            &["trace", "1M", "4M", "16M"],
        );
        let red = |size, warm| {
            pct(reduction(
                self.mean(PolicyKind::Random, self.large_pool, (size, 1), warm),
                self.mean(PolicyKind::Hierarchical, self.large_pool, (size, 1), warm),
            ))
        };
        t.row(vec![
            "pmlab Mult2-like (ours)".into(),
            red(1, false),
            red(4, false),
            red(16, false),
        ]);
        t.row(vec![
            "ours, cold misses excluded".into(),
            red(1, true),
            red(4, true),
            red(16, true),
        ]);
        for (name, v) in paper::TABLE2 {
            t.row(vec![
                format!("{name} (paper)"),
                pct(v[0]),
                pct(v[1]),
                pct(v[2]),
            ]);
        }
        t
    }

    fn table3(&self) -> Table {
        let mut t = Table::new(
            "Table 3. MPI x 1000 on the 4 MiB direct-mapped level two, large and small pool (relative to hierarchical); avoidable conflicts per process",
            &[
                "heuristic",
                "large pool (ours)",
                "small pool (ours)",
                "large (paper)",
                "small (paper)",
                "C - C_min at 4M, large",
                "C - C_min at 4M, small",
            ],
        );
        let l2 = (4, 1);
        let hier = |pool| self.mean(PolicyKind::Hierarchical, pool, l2, false);
        let (hl, hs) = (hier(self.large_pool), hier(self.small_pool));
        for (i, policy) in PolicyKind::ALL.into_iter().enumerate() {
            let l = self.mean(policy, self.large_pool, l2, false);
            let s = self.mean(policy, self.small_pool, l2, false);
            let (pl, ps) = TABLE3[i];
            t.row(vec![
                HEURISTICS[i].to_string(),
                rel(l, hl),
                rel(s, hs),
                rel(pl, TABLE3[5].0),
                rel(ps, TABLE3[5].1),
                format!("{:.2}", self.avoidable_4m(policy, self.large_pool)),
                format!("{:.2}", self.avoidable_4m(policy, self.small_pool)),
            ]);
        }
        t.note(format!(
            "large pool {} KiB, small pool {} KiB (paper: 4 MiB and 256 KiB). The last columns: mean over processes of",
            self.large_pool >> 10,
            self.small_pool >> 10
        ));
        t.note("the page conflicts within one address space beyond the minimum, in the 4 MiB direct-mapped cache.");
        t.note("Every sample (MPI x 1000, 4 MiB direct-mapped), large pool | small pool:");
        for (i, policy) in PolicyKind::ALL.into_iter().enumerate() {
            let list = |pool| {
                super::analysis::samples(&self.passes, 0, policy, pool, l2, false)
                    .iter()
                    .map(|v| format!("{v:.3}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            t.note(format!(
                "  {:<15} {} | {}",
                HEURISTICS[i],
                list(self.large_pool),
                list(self.small_pool)
            ));
        }
        t
    }

    /// Mean avoidable conflicts per process at 4 MiB direct-mapped.
    pub(crate) fn avoidable_4m(&self, policy: PolicyKind, pool: u64) -> f64 {
        let v: Vec<f64> = super::analysis::select(&self.passes, 0, policy, pool)
            .flat_map(|p| &p.spaces)
            .map(|s| (s.conflicts_4m.0 - s.conflicts_4m.1) as f64)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }

    fn table4(&self) -> Table {
        let mut t = Table::new(
            "Table 4. MPI x 1000 per heuristic across the nine level twos, large pool (relative to hierarchical); paper in brackets",
            &[
                "L2",
                "coloring",
                "coloring-hash",
                "bin-hopping",
                "sequential",
                "hierarchical",
            ],
        );
        for (row, &l2) in L2_CONFIGS.iter().enumerate() {
            let hier = self.mean(PolicyKind::Hierarchical, self.large_pool, l2, false);
            let mut cells = vec![format!("{}M {}-way", l2.0, l2.1)];
            for (j, &policy) in PolicyKind::ALL[1..].iter().enumerate() {
                let ours = self.mean(policy, self.large_pool, l2, false);
                cells.push(format!(
                    "{} [{}]",
                    rel(ours, hier),
                    rel(TABLE4[row][j], TABLE4[row][4])
                ));
            }
            t.row(cells);
        }
        t.note("coloring, bin hopping and sequential are tuned for 4M 1-way; hierarchical for every size.");
        t
    }

    pub(crate) fn samples(&self) -> usize {
        super::analysis::select(&self.passes, 0, PolicyKind::Random, self.large_pool).count()
    }

    /// Writes every table as CSV, the tables and passes as `kessler-hill.json`, and the plots as SVG
    /// under `config.out_dir`.
    pub fn write(&self, config: &Config) -> Result<(), ExperimentError> {
        let dir = &config.out_dir;
        for (n, t) in &self.tables {
            t.write_csv(&dir.join(format!("{n}.csv")))?;
        }
        let tables: Vec<&Table> = self.tables.iter().map(|(_, t)| t).collect();
        let passes: Vec<serde_json::Value> = self
            .passes
            .iter()
            .map(|(s, p)| serde_json::json!({ "schedule": s, "pass": p }))
            .collect();
        let json = serde_json::json!({
            "workload": self.workload_summary,
            "schedules": &self.schedules,
            "tables": tables,
            "passes": passes,
            "appendix": &self.appendix,
        });
        write_json(&dir.join("kessler-hill.json"), &json)?;
        plots::write_all(dir, self)?;
        Ok(())
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

fn summary_line(report: &Report, w: &Workload, config: &Config) -> String {
    let s = &report.schedules[0];
    let streams: Vec<String> = w
        .streams
        .iter()
        .map(|st| format!("{} ({} traces)", st.name, st.programs.len()))
        .collect();
    let active: Vec<f64> =
        super::analysis::select(&report.passes, 0, PolicyKind::Random, report.large_pool)
            .map(|p| p.active_pages.0)
            .collect();
    let active_mb = active.iter().sum::<f64>() / active.len().max(1) as f64
        * config.page_size as f64
        / (1 << 20) as f64;
    format!(
        "workload {}: streams {}; {} processes ran ({} exited), {} references, {} instructions;\n\
         {:?} scheduler, mean quantum {} instructions: {} context switches, one every {:.0} instructions;\n\
         resident memory of the live processes {:.1} MiB on average; memory {} MiB in {} KiB pages;\n\
         level ones split 32K direct-mapped 32B blocks; level twos 128B blocks, random replacement",
        w.source.display(),
        streams.join(", "),
        s.processes,
        s.exited,
        s.refs,
        s.instructions,
        s.spec.scheduler,
        s.spec.mean_quantum,
        s.switches,
        s.mean_switch_interval(),
        active_mb,
        config.memory >> 20,
        config.page_size >> 10,
    )
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}\n", self.workload_summary)?;
        for (_, t) in &self.tables {
            writeln!(f, "{t}")?;
        }
        Ok(())
    }
}

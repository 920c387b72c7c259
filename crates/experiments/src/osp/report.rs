//! The reproduction's tables beside paper 000's numbers, the targets, and the
//! files (CSV, `osp.json`, SVG) they are written to.

use std::collections::BTreeMap;
use std::fmt;

use pmlab_report::{BarPlot, Table, write_json};
use serde::Serialize;

use super::exec::{CrashRow, Results, WorkloadRuns};
use super::paper;
use super::run::Measurement;
use super::{Config, OspError};

/// CPU flushes per transaction by OSP's sources.
#[derive(Clone, Debug, Serialize)]
pub struct OspSources {
    /// Persisting new data.
    pub data: f64,
    /// The journal (or super page), checkpoints included.
    pub journal: f64,
    /// Page consolidation.
    pub consolidation: f64,
}

/// CPU flushes per transaction by the undo log's sources.
#[derive(Clone, Debug, Serialize)]
pub struct UndoSources {
    /// Log entries (one drain each).
    pub log: f64,
    /// Persisting new data.
    pub data: f64,
    /// Commit marks.
    pub commit: f64,
}

/// One protocol's figures on one workload.
#[derive(Clone, Debug, Serialize)]
pub struct VariantResult {
    /// CPU flushes per transaction.
    pub flushes: f64,
    /// Undo flushes over these (1 for the undo log).
    pub flush_reduction: f64,
    /// 64-byte write-combining buffers drained per transaction.
    pub wc_lines: f64,
    /// TLB misses per lookup.
    pub tlb_miss_ratio: f64,
    /// Lines written to NVM per transaction.
    pub nvm_writes: f64,
    /// OSP: flushes by source.
    pub by_source: Option<OspSources>,
    /// OSP: consolidations per transaction, lines copied per consolidation.
    pub consolidations: f64,
    /// OSP: lines copied per consolidation.
    pub lines_per_consolidation: f64,
    /// OSP: consolidation flushes per transaction on the miss path (the rest ran in
    /// the background).
    pub miss_path_consolidation: f64,
    /// OSP (asynchronous): pages per transaction found again in the queue.
    pub queue_hits: f64,
    /// OSP: pages updated per transaction.
    pub pages_per_tx: f64,
}

/// One workload, as `osp.json` holds it.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadResult {
    /// Elements (array entries or keys at the start).
    pub elements: u64,
    /// Bytes of the data area.
    pub footprint_bytes: u64,
    /// Measured transactions per protocol.
    pub txs: u64,
    /// The hardware undo log's CPU flushes per transaction.
    pub undo_flushes: f64,
    /// OSP's (journal, consolidation on eviction) CPU flushes per transaction.
    pub osp_flushes: f64,
    /// OSP's flushes by source, per transaction.
    pub osp_flushes_by_source: OspSources,
    /// The undo log's flushes by source, per transaction.
    pub undo_flushes_by_source: UndoSources,
    /// OSP's TLB misses per lookup.
    pub tlb_miss_ratio: f64,
    /// `undo_flushes / osp_flushes`.
    pub flush_reduction: f64,
    /// Every protocol measured.
    pub variants: BTreeMap<String, VariantResult>,
}

/// One protocol in the large-transaction run.
#[derive(Clone, Debug, Serialize)]
pub struct LargeResult {
    /// The protocol.
    pub protocol: String,
    /// Operations per transaction.
    pub ops_per_tx: u32,
    /// Measured transactions.
    pub txs: u64,
    /// Pages updated per transaction (OSP).
    pub pages_per_tx: f64,
    /// Pages per transaction that left the TLB before their transaction committed.
    pub evicted_in_tx: f64,
    /// CPU flushes per transaction.
    pub flushes: f64,
    /// OSP's flushes by source.
    pub by_source: Option<OspSources>,
    /// The undo log's flushes over these.
    pub flush_reduction: f64,
}

/// One of the targets, checked.
#[derive(Clone, Debug, Serialize)]
pub struct TargetCheck {
    /// What the paper says.
    pub target: String,
    /// What was measured.
    pub measured: String,
    /// Whether the measurement meets it.
    pub met: bool,
}

/// The finished reproduction.
#[derive(Serialize)]
pub struct Report {
    /// `quick` or `full`.
    pub mode: &'static str,
    /// Seed of the operation streams.
    pub seed: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Sizes and the machine, in words.
    pub scale: Vec<String>,
    /// Per workload, keyed by the paper's names.
    pub workloads: BTreeMap<String, WorkloadResult>,
    /// Not the paper's: the Zipf workloads with YCSB's unscrambled generator, keyed by
    /// `HT-zipf-ordered`, `RBT-zipf-ordered`, `BT-zipf-ordered` (empty if not run).
    pub zipf_ordered: BTreeMap<String, WorkloadResult>,
    /// 1 / the mean over the seven workloads of OSP's flushes normalized to the undo
    /// log's (Figure 4a's average bar).
    pub avg_flush_reduction: f64,
    /// The mean of the normalized flushes itself.
    pub avg_normalized_flushes: f64,
    /// The same for every OSP variant.
    pub avg_flush_reduction_by_variant: BTreeMap<String, f64>,
    /// The large-transaction run (HT-uni with several operations per transaction).
    pub large_transactions: Vec<LargeResult>,
    /// Crash explorations.
    pub crash: Vec<CrashRow>,
    /// Broken variants and where they were caught.
    pub broken: Vec<CrashRow>,
    /// The targets.
    pub targets: Vec<TargetCheck>,
    /// Consistency checks of the run (the same lines flushed by every protocol).
    pub checks: Vec<String>,
    /// The tables as printed.
    pub tables: Vec<Table>,
}

fn per(m: &Measurement, n: u64) -> f64 {
    m.per_tx(n)
}

fn variant_result(m: &Measurement, undo: &Measurement) -> VariantResult {
    let f = &m.flushes;
    let total = per(m, f.total());
    let osp = m.protocol != "undo";
    let o = &m.osp;
    VariantResult {
        flushes: total,
        flush_reduction: per(undo, undo.flushes.total()) / total,
        wc_lines: per(m, f.wc_lines),
        tlb_miss_ratio: m.tlb_miss_ratio(),
        nvm_writes: per(m, m.nvm_writes),
        by_source: osp.then(|| OspSources {
            data: per(m, f.data),
            journal: per(m, f.journal),
            consolidation: per(m, f.consolidation),
        }),
        consolidations: per(m, o.consolidations),
        lines_per_consolidation: o.lines_copied as f64 / o.consolidations.max(1) as f64,
        miss_path_consolidation: per(m, o.miss_path_flushes),
        queue_hits: per(m, o.queue_hits),
        pages_per_tx: per(m, o.tx_pages),
    }
}

fn workload_result(w: &WorkloadRuns) -> WorkloadResult {
    let undo = &w.runs[0];
    let osp = &w.runs[1];
    let variants = w
        .runs
        .iter()
        .map(|m| (m.protocol.clone(), variant_result(m, undo)))
        .collect();
    let v = variant_result(osp, undo);
    WorkloadResult {
        elements: w.elements,
        footprint_bytes: w.footprint,
        txs: osp.txs,
        undo_flushes: per(undo, undo.flushes.total()),
        osp_flushes: v.flushes,
        osp_flushes_by_source: v.by_source.clone().expect("OSP has sources"),
        undo_flushes_by_source: UndoSources {
            log: per(undo, undo.flushes.log),
            data: per(undo, undo.flushes.data),
            commit: per(undo, undo.flushes.commit),
        },
        tlb_miss_ratio: osp.tlb_miss_ratio(),
        flush_reduction: v.flush_reduction,
        variants,
    }
}

pub(super) fn f2(x: f64) -> String {
    format!("{x:.2}")
}

pub(super) fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn large_results(config: &Config, results: &Results) -> Vec<LargeResult> {
    let Some(w) = results.runs.iter().find(|w| !w.large.is_empty()) else {
        return Vec::new();
    };
    let undo = &w.large[0];
    w.large
        .iter()
        .map(|m| {
            let v = variant_result(m, undo);
            LargeResult {
                protocol: m.protocol.clone(),
                ops_per_tx: config.large_tx_ops,
                txs: m.txs,
                pages_per_tx: v.pages_per_tx,
                evicted_in_tx: per(m, m.osp.evicted_in_tx),
                flushes: v.flushes,
                by_source: v.by_source,
                flush_reduction: v.flush_reduction,
            }
        })
        .collect()
}

impl Report {
    pub(crate) fn build(config: &Config, results: Results) -> Report {
        let workloads: BTreeMap<String, WorkloadResult> = results
            .runs
            .iter()
            .map(|w| (w.workload.name.to_string(), workload_result(w)))
            .collect();
        let names: Vec<String> = results.runs[0]
            .runs
            .iter()
            .map(|m| m.protocol.clone())
            .collect();
        let mean_norm = |name: &str| {
            let v: Vec<f64> = workloads
                .values()
                .map(|w| 1.0 / w.variants[name].flush_reduction)
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        };
        let avg_norm = mean_norm("osp");
        let mut r = Report {
            mode: if config.quick { "quick" } else { "full" },
            seed: config.seed,
            seconds: results.seconds,
            scale: super::report_text::scale(config, &results),
            avg_flush_reduction: 1.0 / avg_norm,
            avg_normalized_flushes: avg_norm,
            avg_flush_reduction_by_variant: names
                .iter()
                .filter(|n| *n != "undo")
                .map(|n| (n.clone(), 1.0 / mean_norm(n)))
                .collect(),
            workloads,
            zipf_ordered: results
                .ordered
                .iter()
                .map(|w| (w.workload.name.to_string(), workload_result(w)))
                .collect(),
            large_transactions: large_results(config, &results),
            crash: results.crash.clone(),
            broken: results.broken.clone(),
            targets: Vec::new(),
            checks: super::report_text::checks(&results),
            tables: Vec::new(),
        };
        r.targets = super::report_text::targets(&r, &results);
        r.tables = super::report_text::tables(&r, &results);
        r
    }

    /// Writes every table as CSV, `osp.json`, and the plots under `config.out_dir`.
    pub fn write(&self, config: &Config) -> Result<(), OspError> {
        let dir = &config.out_dir;
        for (t, n) in self.tables.iter().zip(super::report_text::TABLE_FILES) {
            t.write_csv(&dir.join(format!("{n}.csv")))?;
        }
        write_json(&dir.join("osp.json"), self)?;
        self.plots(dir)?;
        Ok(())
    }

    fn plots(&self, dir: &std::path::Path) -> Result<(), OspError> {
        let order: Vec<&str> = paper::WORKLOADS.iter().map(|w| w.name).collect();
        let mut cats: Vec<String> = order.iter().map(|s| s.to_string()).collect();
        cats.push("average".into());
        let names: Vec<String> = self.workloads[order[0]].variants.keys().cloned().collect();
        let series = names
            .iter()
            .map(|n| {
                let mut v: Vec<f64> = order
                    .iter()
                    .map(|w| 1.0 / self.workloads[*w].variants[n].flush_reduction)
                    .collect();
                v.push(v.iter().sum::<f64>() / v.len() as f64);
                (n.clone(), v)
            })
            .collect();
        BarPlot {
            title: "Figure 4a: CPU flushes normalized to the undo log".into(),
            y_label: "CPU flushes / undo log's".into(),
            categories: cats,
            series,
        }
        .write_svg(&dir.join("figure4a.svg"))?;
        let src = |f: fn(&OspSources) -> f64| {
            order
                .iter()
                .map(|w| {
                    let s = &self.workloads[*w].osp_flushes_by_source;
                    f(s) / (s.data + s.journal + s.consolidation)
                })
                .collect::<Vec<f64>>()
        };
        BarPlot {
            title: "Figure 4b: OSP's CPU flushes by source".into(),
            y_label: "share of OSP's CPU flushes".into(),
            categories: order.iter().map(|s| s.to_string()).collect(),
            series: vec![
                ("data".into(), src(|s| s.data)),
                ("journal".into(), src(|s| s.journal)),
                ("consolidation".into(), src(|s| s.consolidation)),
            ],
        }
        .write_svg(&dir.join("figure4b.svg"))?;
        let t1 = super::report_text::table1_values(self);
        BarPlot {
            title: "Table 1: TLB miss ratio (%)".into(),
            y_label: "TLB misses per lookup (%)".into(),
            categories: t1.iter().map(|r| r.0.to_string()).collect(),
            series: vec![
                ("pmlab uniform".into(), t1.iter().map(|r| r.1).collect()),
                ("paper uniform".into(), t1.iter().map(|r| r.2).collect()),
                ("pmlab Zipf".into(), t1.iter().map(|r| r.3).collect()),
                ("paper Zipf".into(), t1.iter().map(|r| r.4).collect()),
            ],
        }
        .write_svg(&dir.join("table1.svg"))?;
        Ok(())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "OSP (paper 000), {} run, seed {}", self.mode, self.seed)?;
        for s in &self.scale {
            writeln!(f, "  {s}")?;
        }
        for t in &self.tables {
            writeln!(f)?;
            write!(f, "{t}")?;
        }
        writeln!(f)?;
        for c in &self.checks {
            writeln!(f, "check: {c}")?;
        }
        writeln!(f, "run time: {:.1} s", self.seconds)
    }
}

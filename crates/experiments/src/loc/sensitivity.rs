//! Why the averages differ from the paper's: the strict protocols (S-WAL, H-WAL,
//! EC-WAL) and LOC-WAL against the baseline under changes of one factor at a time —
//! the compute charged per access, the working set, the memory's banks, and two
//! readings of the strict protocols the paper leaves open (whether their persistent
//! writes overlap across banks, and whether their in-place phase is ordered before the
//! next transaction) — with each workload's transaction profile (line accesses,
//! memory reads, lines logged per transaction).
//!
//! Every scenario runs the same seeded operations as the reproduction (xoshiro256++
//! from the run's seed); only the scenario's factor differs from the defaults.

use pmlab_hwtx::{ComputeModel, HwConfig, HwKind, Reading};
use pmlab_model::MachineConfig;
use pmlab_report::{Table, write_json};
use pmlab_workloads::{Kind, NodeReads};
use serde_json::{Value, json};

use super::plan::{bar, build_all, parallel};
use super::run::{self, Built, RunResult};
use super::{Config, LocError, paper, split};

/// One variation of the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Scenario {
    /// Short name (table rows, CSV, JSON).
    pub name: &'static str,
    /// What changed.
    pub what: &'static str,
    /// The workload's computation.
    pub compute: ComputeModel,
    /// Elements divided by this (1: the reproduction's sizes, beyond the LLC).
    pub shrink: u64,
    /// Memory banks.
    pub banks: u64,
    /// `HwConfig::serial_persist`.
    pub serial: bool,
    /// `HwConfig::ordered_in_place`.
    pub ordered_in_place: bool,
    /// The B+-tree and the table search nodes rather than read them whole
    /// ([`NodeReads::Search`]).
    pub node_search: bool,
    /// The B+-tree and the table search nodes and edit changed leaves in place
    /// ([`NodeReads::Edit`]).
    pub leaf_edit: bool,
    /// `HwConfig::window_in_place` (LOC-WAL).
    pub window_in_place: bool,
    /// What a block-group block is (`HwConfig::reading`).
    pub reading: Reading,
    /// `HwConfig::serial_windows` (LOC-WAL).
    pub serial_windows: bool,
    /// A variation of how LOC-WAL persists (its cycles split in `extra_cycles.csv`).
    pub loc_variant: bool,
}

const DEFAULT: Scenario = Scenario {
    name: "default",
    what: "the reproduction's defaults (the strict protocols under strict ordering)",
    compute: ComputeModel {
        per_access: 4,
        per_tx: 20,
    },
    shrink: 1,
    banks: 8,
    serial: true,
    ordered_in_place: true,
    node_search: false,
    leaf_edit: false,
    window_in_place: false,
    reading: Reading::Line,
    serial_windows: false,
    loc_variant: false,
};

/// The scenarios, the defaults first.
pub const SCENARIOS: [Scenario; 15] = [
    DEFAULT,
    Scenario {
        name: "looser",
        what: "strict protocols: writes overlapped across banks, in-place writes left to the cache",
        serial: false,
        ordered_in_place: false,
        ..DEFAULT
    },
    Scenario {
        name: "serialized-only",
        what: "strict protocols: one persistent write in flight, in-place writes left to the cache",
        ordered_in_place: false,
        ..DEFAULT
    },
    Scenario {
        name: "ordered-only",
        what: "strict protocols: writes overlapped, in-place phase before the next transaction",
        serial: false,
        ..DEFAULT
    },
    Scenario {
        name: "no-compute",
        what: "no computation charged (0 per access, 0 per transaction)",
        compute: ComputeModel {
            per_access: 0,
            per_tx: 0,
        },
        ..DEFAULT
    },
    Scenario {
        name: "compute-x4",
        what: "four times the computation (16 per access, 80 per transaction)",
        compute: ComputeModel {
            per_access: 16,
            per_tx: 80,
        },
        ..DEFAULT
    },
    Scenario {
        name: "in-llc",
        what: "working sets 1/64 of the default, inside the 1 MiB LLC",
        shrink: 64,
        ..DEFAULT
    },
    Scenario {
        name: "node-search",
        what: "B+Tree and SQLite search a node by the lines a binary search touches, not whole",
        node_search: true,
        ..DEFAULT
    },
    Scenario {
        name: "leaf-edit",
        what: "node-search, and a changed leaf edited in place: only the pairs an insert or delete shifts read and written",
        leaf_edit: true,
        ..DEFAULT
    },
    Scenario {
        name: "window-in-place",
        what: "LOC-WAL: a window complete (the next TxBegin waits) only once its lines are home too",
        window_in_place: true,
        ..DEFAULT
    },
    Scenario {
        name: "word-blocks",
        what: "a block-group block is an 8-byte word: a group is one 64-byte burst (§III-A), a logged line two groups",
        reading: Reading::Word,
        loc_variant: true,
        ..DEFAULT
    },
    Scenario {
        name: "serial-windows",
        what: "LOC-WAL: the log writer issues a window's groups one at a time, as the strict protocols' (the text leaves it open; not the default)",
        serial_windows: true,
        loc_variant: true,
        ..DEFAULT
    },
    Scenario {
        name: "word-serial-windows",
        what: "word-blocks and serial-windows together: LOC-WAL's log written one 64-byte burst at a time",
        reading: Reading::Word,
        serial_windows: true,
        loc_variant: true,
        ..DEFAULT
    },
    Scenario {
        name: "leaf-edit-serial-windows",
        what: "leaf-edit and serial-windows together: the node workloads' reads as C's, LOC-WAL's windows written one group at a time",
        leaf_edit: true,
        serial_windows: true,
        loc_variant: true,
        ..DEFAULT
    },
    Scenario {
        name: "one-bank",
        what: "memory of one bank (every access queues behind the last; LOC's windows too)",
        banks: 1,
        ..DEFAULT
    },
];

/// The protocols compared (LOC-WAL at SD 16), after the baseline.
const PROTOCOLS: [HwKind; 4] = [HwKind::SWal, HwKind::HWal, HwKind::EcWal, HwKind::LocWal];

use super::gap::{self, GapSplit, node_reading};

#[derive(Clone, Copy, Debug)]
struct Job {
    scenario: usize,
    workload: Kind,
    kind: HwKind,
    /// LOC-WAL's speculation degree (16 but in Figure 8's sweep; 1 for the others).
    sd: u32,
}

impl Job {
    fn hw(&self) -> HwConfig {
        let s = &SCENARIOS[self.scenario];
        HwConfig {
            sd: self.sd,
            compute: s.compute,
            serial_persist: s.serial,
            ordered_in_place: s.ordered_in_place,
            window_in_place: s.window_in_place,
            reading: s.reading,
            serial_windows: s.serial_windows,
            ..HwConfig::new(self.kind)
        }
    }
}

/// What the study measured.
#[derive(Debug)]
pub struct Sensitivity {
    /// Human tables, in order, with their CSV names.
    pub tables: Vec<(String, Table)>,
    /// `sensitivity.json`.
    pub json: Value,
}

/// Runs every scenario (workloads built at each size once).
pub fn run(config: &Config) -> Result<Sensitivity, LocError> {
    let t = std::time::Instant::now();
    let load_before = super::report::load_average();
    let full = build_all(config)?;
    let small = build_all(&Config {
        elements: config
            .elements
            .iter()
            .map(|&(k, n)| (k, (n / 64).max(64)))
            .collect(),
        ..config.clone()
    })?;
    let jobs = jobs();
    let pb = bar(config, jobs.len(), "sensitivity");
    let label = |j: &Job| {
        format!(
            "{} {} {} SD {}",
            SCENARIOS[j.scenario].name,
            paper::workload_name(j.workload),
            j.kind.label(),
            j.sd
        )
    };
    let results = parallel(config, &jobs, &pb, label, |j| {
        let s = &SCENARIOS[j.scenario];
        let built = if s.shrink > 1 { &small } else { &full };
        let b = built
            .iter()
            .find(|b| b.kind == j.workload)
            .expect("every workload was built");
        let mut mc = MachineConfig::loc(b.image.len() as u64);
        mc.device.banks = s.banks;
        let reads = if s.leaf_edit {
            NodeReads::Edit
        } else if s.node_search {
            NodeReads::Search
        } else {
            NodeReads::Whole
        };
        run::run_on(b, j.hw(), mc, reads, config.warmup, config.txs, config.seed)
    })?;
    let m = Results { jobs, results };
    let wall = t.elapsed().as_secs_f64();
    Ok(m.report(config, &full, &small, wall, load_before))
}

/// Every scenario's baseline and protocols (LOC-WAL at SD 16), then Figure 8's other
/// speculation degrees in the scenarios of [`SWEEP`].
fn jobs() -> Vec<Job> {
    let mut jobs = Vec::new();
    for scenario in 0..SCENARIOS.len() {
        for &(workload, _) in paper::WORKLOADS.iter() {
            for kind in std::iter::once(HwKind::Baseline).chain(PROTOCOLS) {
                let sd = if kind == HwKind::LocWal { 16 } else { 1 };
                jobs.push(Job {
                    scenario,
                    workload,
                    kind,
                    sd,
                });
            }
        }
    }
    for scenario in sweep_scenarios() {
        for &(workload, _) in paper::WORKLOADS.iter() {
            for sd in SWEEP_SDS {
                jobs.push(Job {
                    scenario,
                    workload,
                    kind: HwKind::LocWal,
                    sd,
                });
            }
        }
    }
    jobs
}

/// The scenarios Figure 8 is swept in: the defaults, the node workloads read as C
/// would (`leaf-edit`), LOC-WAL's windows written one group at a time
/// (`serial-windows`), and both.
const SWEEP: [&str; 4] = [
    "default",
    "leaf-edit",
    "serial-windows",
    "leaf-edit-serial-windows",
];

/// Figure 8's speculation degrees besides 16 (run in every scenario).
const SWEEP_SDS: [u32; 5] = [1, 2, 4, 8, 32];

fn sweep_scenarios() -> Vec<usize> {
    SWEEP
        .iter()
        .map(|n| scenario_index(|s| s.name == *n))
        .collect()
}

struct Results {
    jobs: Vec<Job>,
    results: Vec<RunResult>,
}

fn f3(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "-".into()
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

impl Results {
    fn get(&self, scenario: usize, workload: Kind, kind: HwKind) -> &RunResult {
        let sd = if kind == HwKind::LocWal { 16 } else { 1 };
        self.get_sd(scenario, workload, kind, sd)
    }

    fn get_sd(&self, scenario: usize, workload: Kind, kind: HwKind, sd: u32) -> &RunResult {
        let i = self
            .jobs
            .iter()
            .position(|j| {
                j.scenario == scenario && j.workload == workload && j.kind == kind && j.sd == sd
            })
            .expect("every job ran");
        &self.results[i]
    }

    fn norm(&self, scenario: usize, workload: Kind, kind: HwKind) -> f64 {
        self.get(scenario, workload, kind).throughput()
            / self.get(scenario, workload, HwKind::Baseline).throughput()
    }

    /// The average over the workloads `keep` selects.
    fn avg(&self, scenario: usize, kind: HwKind, keep: impl Fn(Kind) -> bool) -> f64 {
        mean(
            paper::WORKLOADS
                .iter()
                .filter(|(w, _)| keep(*w))
                .map(|&(w, _)| self.norm(scenario, w, kind)),
        )
    }

    fn report(
        &self,
        config: &Config,
        full: &[Built],
        small: &[Built],
        wall_s: f64,
        load: Option<f64>,
    ) -> Sensitivity {
        let (averages, scenarios_json) = self.averages_table();
        let (mut profile, profile_json) = self.profile_table(full, small);
        self.add_loc_split(&mut profile);
        let (extra, extra_json) = self.extra_table();
        let (sweep, sweep_json) = self.sweep_table();
        let mut by_workload = self.by_workload_table();
        by_workload.note(format!(
            "{} measured transactions per run after {} warm-up, seed {}; {:.1} s of wall clock on {} threads; load average before it: {}",
            config.txs,
            config.warmup,
            config.seed,
            wall_s,
            config.threads,
            load.map_or("-".into(), |l| format!("{l:.2}"))
        ));
        let json = json!({
            "seed": config.seed,
            "warmup_tx": config.warmup,
            "measured_tx": config.txs,
            "wall_s": wall_s,
            "load_average_before": load,
            "paper_averages": {"S-WAL": 0.316, "H-WAL": 0.331, "EC-WAL / H-WAL": 1.064, "LOC-WAL": 0.651},
            "scenarios": scenarios_json,
            "profile": profile_json,
            "extra_cycles": extra_json,
            "sd_sweep": sweep_json,
        });
        Sensitivity {
            tables: vec![
                ("sensitivity.csv".into(), averages),
                ("sensitivity_hwal.csv".into(), by_workload),
                ("profile.csv".into(), profile),
                ("extra_cycles.csv".into(), extra),
                ("sd_sweep.csv".into(), sweep),
            ],
            json,
        }
    }

    fn averages_table(&self) -> (Table, Value) {
        let mut t = Table::new(
            "Why the averages differ: average normalized throughput with one factor changed at a time",
            &[
                "scenario",
                "S-WAL",
                "H-WAL",
                "EC-WAL",
                "LOC-WAL",
                "EC/H",
                "LOC/H",
                "H-WAL 4 small-tx",
                "LOC-WAL 4 small-tx",
                "H-WAL B+Tree,SQLite",
            ],
        );
        let mut out = Vec::new();
        for (i, s) in SCENARIOS.iter().enumerate() {
            let a: Vec<f64> = PROTOCOLS
                .iter()
                .map(|&k| self.avg(i, k, |_| true))
                .collect();
            let small = self.avg(i, HwKind::HWal, |w| !node_reading(w));
            let loc_small = self.avg(i, HwKind::LocWal, |w| !node_reading(w));
            let nodes = self.avg(i, HwKind::HWal, node_reading);
            let mut row = vec![s.name.to_string()];
            row.extend(a.iter().map(|&x| f3(x)));
            row.extend([
                f3(a[2] / a[1]),
                f3(a[3] / a[1]),
                f3(small),
                f3(loc_small),
                f3(nodes),
            ]);
            t.row(row);
            out.push(json!({
                "scenario": s,
                "averages": {"S-WAL": a[0], "H-WAL": a[1], "EC-WAL": a[2], "LOC-WAL": a[3]},
                "ec_over_h": a[2] / a[1],
                "loc_over_h": a[3] / a[1],
                "hwal_average_small_tx": small,
                "locwal_average_small_tx": loc_small,
                "hwal_average_node_reading": nodes,
            }));
        }
        t.row(
            [
                "paper", "0.316", "0.331", "-", "0.651", "1.064", "1.967", "-", "-", "-",
            ]
            .map(String::from)
            .to_vec(),
        );
        for s in &SCENARIOS {
            t.note(format!("{}: {}", s.name, s.what));
        }
        t.note("4 small-tx: Hash, RBTree, SPS, SDG; B+Tree and SQLite read whole 4 KiB nodes (but under node-search)");
        (t, Value::Array(out))
    }

    fn by_workload_table(&self) -> Table {
        let mut header = vec!["scenario"];
        header.extend(paper::WORKLOADS.iter().map(|w| w.1));
        let mut t = Table::new(
            "H-WAL's normalized throughput by workload and scenario",
            &header,
        );
        for (i, s) in SCENARIOS.iter().enumerate() {
            let mut row = vec![s.name.to_string()];
            row.extend(
                paper::WORKLOADS
                    .iter()
                    .map(|&(w, _)| f3(self.norm(i, w, HwKind::HWal))),
            );
            t.row(row);
        }
        t
    }

    /// Per workload under the defaults (and the LLC-sized working set), then the
    /// B+-tree and the table searching nodes: what one transaction does and costs, and
    /// where LOC-WAL's cycles beyond the baseline's go.
    fn profile_table(&self, full: &[Built], small: &[Built]) -> (Table, Value) {
        let mut t = Table::new(
            "Transaction profile (per measured transaction)",
            &[
                "workload",
                "footprint MB",
                "base cycles",
                "line accesses",
                "memory reads",
                "H-WAL lines logged",
                "H-WAL persist stall",
                "H-WAL extra cycles",
                "in-LLC base cycles",
                "LOC extra cycles",
                "LOC window wait",
                "LOC read queue",
                "base read queue",
                "LOC extra memory reads",
                "LOC lines logged",
                "LOC lines evicted to log",
                "LOC version overflows",
                "LOC home writes",
            ],
        );
        let in_llc = scenario_index(|s| s.shrink > 1);
        let mut out = Vec::new();
        for (scenario, w, name) in profile_rows() {
            let fp = |v: &[Built]| v.iter().find(|b| b.kind == w).map_or(0, |b| b.footprint);
            let small_base = self.get(in_llc, w, HwKind::Baseline);
            let mut row = self.profile_row(scenario, w);
            row.insert(6, per(small_base.cycles, small_base));
            let mut cells = vec![name.clone(), format!("{:.1}", fp(full) as f64 / 1e6)];
            cells.extend(row.iter().map(|x| format!("{x:.1}")));
            t.row(cells);
            let keys = [
                "base_cycles_per_tx",
                "line_accesses_per_tx",
                "memory_reads_per_tx",
                "hwal_lines_logged_per_tx",
                "hwal_persist_stall_per_tx",
                "hwal_extra_cycles_per_tx",
                "in_llc_base_cycles_per_tx",
                "locwal_extra_cycles_per_tx",
                "locwal_window_wait_per_tx",
                "locwal_read_queue_per_tx",
                "base_read_queue_per_tx",
                "locwal_extra_memory_reads_per_tx",
                "locwal_lines_logged_per_tx",
                "locwal_lines_evicted_to_log_per_tx",
                "locwal_version_overflows_per_tx",
                "locwal_home_writes_per_tx",
            ];
            let mut o = serde_json::Map::new();
            o.insert("workload".into(), json!(name));
            o.insert("scenario".into(), json!(SCENARIOS[scenario].name));
            o.insert("footprint_bytes".into(), json!(fp(full)));
            o.insert("in_llc_footprint_bytes".into(), json!(fp(small)));
            for (k, v) in keys.iter().zip(&row) {
                o.insert((*k).into(), json!(v));
            }
            out.push(Value::Object(o));
        }
        t.note("LOC: LOC-WAL at SD 16. window wait: TxBegin stalled for the previous speculation window (in-order commit; the model's only wait of one transaction on others); read queue: cycles memory reads waited for a bank busy with earlier requests; extra memory reads: LOC-WAL's minus the baseline's");
        (t, Value::Array(out))
    }

    /// One profile row of `scenario` (without the in-LLC column).
    fn profile_row(&self, scenario: usize, w: Kind) -> Vec<f64> {
        let b = self.get(scenario, w, HwKind::Baseline);
        let h = self.get(scenario, w, HwKind::HWal);
        let l = self.get(scenario, w, HwKind::LocWal);
        vec![
            per(b.cycles, b),
            per(b.accesses, b),
            per(b.memory_reads, b),
            per(h.log_lines, h),
            per(h.persist_stall_cycles, h),
            per(h.cycles, h) - per(b.cycles, b),
            per(l.cycles, l) - per(b.cycles, b),
            per(l.window_wait_cycles, l),
            per(l.read_queue_cycles, l),
            per(b.read_queue_cycles, b),
            per(l.memory_reads, l) - per(b.memory_reads, b),
            per(l.log_lines, l),
            per(l.evicted_log_lines, l),
            per(l.version_overflows, l),
            per(l.home_writes, l),
        ]
    }
}

/// The profile's rows: every workload under the defaults, then the B+-tree and the
/// table searching nodes, and editing their leaves in place.
fn profile_rows() -> Vec<(usize, Kind, String)> {
    let mut rows: Vec<(usize, Kind, String)> = paper::WORKLOADS
        .iter()
        .map(|&(w, name)| (0, w, name.to_string()))
        .collect();
    for (scenario, label) in [
        (scenario_index(|s| s.node_search), "node search"),
        (scenario_index(|s| s.leaf_edit), "leaf edit"),
    ] {
        for &(w, name) in paper::WORKLOADS.iter().filter(|(w, _)| node_reading(*w)) {
            rows.push((scenario, w, format!("{name} ({label})")));
        }
    }
    rows
}

/// The rows of the extra-cycles split: the defaults, then every scenario that changes
/// only the workloads' reads or LOC-WAL's machine-level behaviour.
fn split_scenarios() -> Vec<usize> {
    SCENARIOS
        .iter()
        .enumerate()
        .filter(|(i, s)| {
            *i == 0 || s.node_search || s.leaf_edit || s.window_in_place || s.loc_variant
        })
        .map(|(i, _)| i)
        .collect()
}

impl Results {
    /// Appends to the profile, per row, LOC-WAL's extra cycles split into the ledger's
    /// parts (per transaction; they sum to the `LOC extra cycles` column).
    fn add_loc_split(&self, t: &mut Table) {
        let rows: Vec<(usize, Kind)> = profile_rows().into_iter().map(|(s, w, _)| (s, w)).collect();
        let b = self.get(0, paper::WORKLOADS[0].0, HwKind::Baseline);
        let cols: Vec<String> = split::part_names(b)
            .into_iter()
            .map(|n| format!("LOC extra: {n}"))
            .chain(std::iter::once("LOC extra: sum of parts".to_string()))
            .collect();
        let per_row: Vec<Vec<String>> = rows
            .iter()
            .map(|&(s, w)| {
                let (b, l) = (
                    self.get(s, w, HwKind::Baseline),
                    self.get(s, w, HwKind::LocWal),
                );
                let parts = split::extra_parts(b, l);
                let n = l.committed_tx.max(1) as f64;
                let sum: i64 = parts.iter().map(|(_, c)| c).sum();
                parts
                    .iter()
                    .map(|(_, c)| format!("{:.1}", *c as f64 / n))
                    .chain(std::iter::once(format!("{:.1}", sum as f64 / n)))
                    .collect()
            })
            .collect();
        t.header.extend(cols);
        for (row, extra) in t.rows.iter_mut().zip(per_row) {
            row.extend(extra);
        }
        t.note("LOC extra: X — LOC-WAL's cycles of kind X minus the baseline's, per transaction (the cycle ledger; the parts sum to LOC extra cycles exactly, up to the rounding shown)");
    }

    /// S-WAL's, H-WAL's, EC-WAL's and LOC-WAL's cycles beyond the baseline's, split into the
    /// ledger's parts, and their accesses served by each level beside the baseline's.
    fn extra_table(&self) -> (Table, Value) {
        let b0 = self.get(0, paper::WORKLOADS[0].0, HwKind::Baseline);
        let names = split::part_names(b0);
        let levels = b0.ledger.served.len();
        let mut header: Vec<String> = ["scenario", "workload", "protocol", "extra cycles"]
            .map(String::from)
            .to_vec();
        header.extend(names.iter().cloned());
        header.push("sum of parts".into());
        header.extend((0..levels).map(|i| {
            format!(
                "extra {} accesses",
                pmlab_hwtx::ledger::level_name(i, levels)
            )
        }));
        let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut t = Table::new(
            "Cycles beyond the baseline's, per transaction, by part of the cycle ledger",
            &hdr,
        );
        let mut out = Vec::new();
        for s in split_scenarios() {
            for &(w, name) in paper::WORKLOADS.iter() {
                let b = self.get(s, w, HwKind::Baseline);
                for k in PROTOCOLS {
                    let p = self.get(s, w, k);
                    let n = p.committed_tx.max(1) as f64;
                    let parts = split::extra_parts(b, p);
                    let sum: i64 = parts.iter().map(|(_, c)| c).sum();
                    let mut row = vec![
                        SCENARIOS[s].name.to_string(),
                        name.to_string(),
                        k.label().to_string(),
                        format!("{:.1}", (p.cycles as f64 - b.cycles as f64) / n),
                    ];
                    row.extend(parts.iter().map(|(_, c)| format!("{:.1}", *c as f64 / n)));
                    row.push(format!("{:.1}", sum as f64 / n));
                    row.extend(
                        split::extra_served(b, p)
                            .iter()
                            .map(|c| format!("{:.2}", *c as f64 / n)),
                    );
                    t.row(row);
                    out.push(json!({
                        "scenario": SCENARIOS[s].name,
                        "workload": name,
                        "protocol": k.label(),
                        "split": split::json(b, p),
                    }));
                }
            }
        }
        t.note("each part: the protocol's cycles of that kind minus the baseline's (negative: fewer); compute: the workload's; instructions: TxBegin/TxCommit/TxAbort/TxFlush; l1..memory: accesses served there (memory: as if its bank were idle); read_queue: memory reads waiting for a busy bank; *_wait: persistence waits by cause. extra X accesses: accesses served by X minus the baseline's");
        (t, Value::Array(out))
    }
}

impl Results {
    /// LOC-WAL's average at speculation degree `sd` in `scenario` over the workloads
    /// `keep` selects.
    fn sd_avg(&self, scenario: usize, sd: u32, keep: impl Fn(Kind) -> bool) -> f64 {
        mean(
            paper::WORKLOADS
                .iter()
                .filter(|(w, _)| keep(*w))
                .map(|&(w, _)| {
                    self.get_sd(scenario, w, HwKind::LocWal, sd).throughput()
                        / self.get(scenario, w, HwKind::Baseline).throughput()
                }),
        )
    }

    /// Figure 8 in the scenarios of [`SWEEP`], per workload group, with H-WAL beside it
    /// and LOC-WAL's distance from the paper split into SD 1's and the gain's.
    fn sweep_table(&self) -> (Table, Value) {
        let mut header: Vec<String> = vec!["scenario".into(), "workloads".into(), "H-WAL".into()];
        header.extend(paper::SDS.iter().map(|sd| format!("SD={sd}")));
        header.extend(["SD=1 / paper", "gain 1->16 / paper's", "SD=16 / paper"].map(String::from));
        let h: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut t = Table::new(
            "Figure 8 by scenario: LOC-WAL's average normalized throughput by speculation degree",
            &h,
        );
        let mut out = Vec::new();
        for scenario in sweep_scenarios() {
            for (label, keep) in gap::groups() {
                let by_sd: Vec<f64> = paper::SDS
                    .iter()
                    .map(|&sd| self.sd_avg(scenario, sd, keep))
                    .collect();
                let split = GapSplit::new(
                    self.sd_avg(scenario, 1, keep),
                    self.sd_avg(scenario, 16, keep),
                    self.sd_avg(scenario, 32, keep),
                );
                let hwal = self.avg(scenario, HwKind::HWal, keep);
                let mut row = vec![SCENARIOS[scenario].name.to_string(), label.to_string()];
                row.push(f3(hwal));
                row.extend(by_sd.iter().map(|&x| f3(x)));
                row.extend([split.base_ratio, split.gain_ratio, split.total_ratio].map(f3));
                t.row(row);
                out.push(json!({
                    "scenario": SCENARIOS[scenario].name,
                    "workloads": label,
                    "hwal": hwal,
                    "by_sd": paper::SDS.iter().zip(&by_sd).map(|(sd, x)| json!({"sd": sd, "locwal": x})).collect::<Vec<_>>(),
                    "split": split,
                }));
            }
        }
        let mut p = vec![
            "paper".to_string(),
            "all six".to_string(),
            "0.331".to_string(),
        ];
        p.extend(
            paper::SDS
                .iter()
                .map(|&sd| paper::sd_average(sd).map_or("-".into(), f3)),
        );
        p.extend(["1", "1", "1"].map(String::from));
        t.row(p);
        t.note("SD=1 is EC-WAL (no speculation); SD=16 / paper = SD=1 / paper x gain 1->16 / paper's (0.651 / 0.353 = 1.844)");
        (t, Value::Array(out))
    }
}

/// Per committed transaction.
fn per(x: u64, r: &RunResult) -> f64 {
    x as f64 / r.committed_tx.max(1) as f64
}

/// The first scenario `f` selects.
fn scenario_index(f: impl Fn(&Scenario) -> bool) -> usize {
    SCENARIOS
        .iter()
        .position(f)
        .expect("the scenario is in the list")
}

impl Sensitivity {
    /// Writes the tables (CSV) and `sensitivity.json` under `config.out_dir`.
    pub fn write(&self, config: &Config) -> Result<(), LocError> {
        for (name, t) in &self.tables {
            t.write_csv(&config.out_dir.join(name))?;
        }
        write_json(&config.out_dir.join("sensitivity.json"), &self.json)?;
        Ok(())
    }
}

impl std::fmt::Display for Sensitivity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (_, t) in &self.tables {
            writeln!(f, "{t}")?;
        }
        Ok(())
    }
}

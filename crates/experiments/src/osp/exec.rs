//! Running the reproduction: every workload under every protocol, the crash
//! explorations and the broken variants, as jobs shared by worker threads (one
//! workload's machines at a time per thread), with one progress bar on stderr.

use std::sync::Mutex;
use std::time::Instant;

use pmlab_hwtx::{Atomicity, Consolidation, HwUndoFault, OspConfig, OspFault, OspProtocol};
use pmlab_workloads::{Params, Workload};
use serde::Serialize;

use super::crash::{Subject, explore};
use super::paper::{PaperWorkload, WORKLOADS, ZIPF_ORDERED};
use super::run::{Measurement, UNDO_LOG, Variant, measure, prepare};
use super::{Config, OspError, large_variants, variants};

/// One workload's runs, in [`variants`] order.
#[derive(Clone, Debug)]
pub struct WorkloadRuns {
    /// The workload.
    pub workload: PaperWorkload,
    /// Elements it was made with.
    pub elements: u64,
    /// Bytes of its data area.
    pub footprint: u64,
    /// One measurement per protocol.
    pub runs: Vec<Measurement>,
    /// The large-transaction runs ([`super::large_variants`]; HT-uni only).
    pub large: Vec<Measurement>,
}

/// One crash exploration.
#[derive(Clone, Debug, Serialize)]
pub struct CrashRow {
    /// The workload (paper name).
    pub workload: &'static str,
    /// The protocol.
    pub subject: String,
    /// Transactions recorded and explored.
    pub txs: u64,
    /// Crash points.
    pub points: u64,
    /// Crash images recovered and checked.
    pub images: u64,
    /// Recoveries recorded and explored themselves.
    pub recoveries: u64,
    /// Crash images of those recoveries and the transactions after them.
    pub recovery_images: u64,
    /// Points with more pending write-backs than were enumerated.
    pub truncated: u64,
    /// Images that failed (or 1 if the live run itself broke).
    pub failing: u64,
    /// The first failure.
    pub first_failure: Option<String>,
}

/// Everything measured.
#[derive(Clone, Debug)]
pub struct Results {
    /// Per workload, in the paper's order.
    pub runs: Vec<WorkloadRuns>,
    /// The Zipf workloads with the unscrambled generator (undo log and OSP only).
    pub ordered: Vec<WorkloadRuns>,
    /// Crash explorations of the correct protocols.
    pub crash: Vec<CrashRow>,
    /// For each broken variant, the exploration that caught it (or the last tried).
    pub broken: Vec<CrashRow>,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
}

enum Job {
    Measure(usize, PaperWorkload),
    Crash(usize, PaperWorkload, Subject),
    Broken(usize, Subject),
}

enum Done {
    Measure(usize, WorkloadRuns),
    Crash(usize, CrashRow),
    Broken(usize, CrashRow),
}

/// Protocols of the unscrambled-Zipf runs: the first of [`variants`] (undo log, OSP).
const ORDERED_VARIANTS: usize = 2;

fn is_ordered(w: &PaperWorkload) -> bool {
    ZIPF_ORDERED.iter().any(|o| o.name == w.name)
}

/// The workload of the large-transaction run.
const LARGE_WORKLOAD: &str = "HT-uni";

/// The correct protocols crash-explored: the undo log and OSP's three variants.
fn crash_subjects() -> Vec<Subject> {
    let osp = Subject::osp_small(None);
    vec![
        Subject::Undo(None),
        Subject::Osp(osp.clone()),
        Subject::Osp(OspConfig {
            atomicity: Atomicity::SuperPage,
            ..osp.clone()
        }),
        Subject::Osp(OspConfig {
            consolidation: Consolidation::Async { queue: 2 },
            ..osp
        }),
    ]
}

/// Every broken variant: the undo log's, and OSP's under both atomicity mechanisms.
fn broken_subjects() -> Vec<Subject> {
    let mut v: Vec<Subject> = HwUndoFault::ALL
        .iter()
        .map(|&f| Subject::Undo(Some(f)))
        .collect();
    for f in OspFault::ALL {
        for atomicity in [Atomicity::Journal, Atomicity::SuperPage] {
            v.push(Subject::Osp(OspConfig {
                atomicity,
                ..Subject::osp_small(Some(f))
            }));
        }
    }
    v
}

fn jobs(config: &Config) -> Vec<Job> {
    let mut jobs: Vec<Job> = WORKLOADS
        .iter()
        .enumerate()
        .map(|(i, &w)| Job::Measure(i, w))
        .collect();
    if config.zipf_ordered {
        for (i, &w) in ZIPF_ORDERED.iter().enumerate() {
            jobs.push(Job::Measure(WORKLOADS.len() + i, w));
        }
    }
    if config.crash_txs > 0 {
        let mut k = 0;
        for &w in &WORKLOADS {
            for s in crash_subjects() {
                jobs.push(Job::Crash(k, w, s));
                k += 1;
            }
        }
        for (i, s) in broken_subjects().into_iter().enumerate() {
            jobs.push(Job::Broken(i, s));
        }
    }
    jobs
}

fn bar(config: &Config, jobs: &[Job]) -> indicatif::ProgressBar {
    if !config.progress {
        return indicatif::ProgressBar::hidden();
    }
    let per_variant = config.warmup + config.txs;
    let per_workload = variants().len() as u64 * per_variant;
    let large = config.large_schedule();
    let large = large_variants().len() as u64 * (large.warmup + large.txs);
    let units: u64 = jobs
        .iter()
        .map(|j| match j {
            Job::Measure(_, w) if w.name == LARGE_WORKLOAD => per_workload + large,
            Job::Measure(_, w) if is_ordered(w) => ORDERED_VARIANTS as u64 * per_variant,
            Job::Measure(..) => per_workload,
            Job::Crash(..) | Job::Broken(..) => config.crash_txs,
        })
        .sum();
    let b = indicatif::ProgressBar::new(units);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {percent:>3}% transactions  {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    b
}

/// Runs every job on `config.threads` threads.
pub(super) fn run_all(config: &Config) -> Result<Results, OspError> {
    let t0 = Instant::now();
    let all = jobs(config);
    let bar = bar(config, &all);
    let queue = Mutex::new(all.into_iter().rev().collect::<Vec<Job>>());
    let done: Mutex<Vec<Done>> = Mutex::new(Vec::new());
    let failed: Mutex<Option<OspError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..config.threads.max(1) {
            s.spawn(|| {
                loop {
                    if failed.lock().expect("no poisoned lock").is_some() {
                        return;
                    }
                    let Some(job) = queue.lock().expect("no poisoned lock").pop() else {
                        return;
                    };
                    match run_job(config, job, &bar) {
                        Ok(d) => done.lock().expect("no poisoned lock").push(d),
                        Err(e) => {
                            failed.lock().expect("no poisoned lock").get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    if let Some(e) = failed.into_inner().expect("no poisoned lock") {
        return Err(e);
    }
    let mut done = done.into_inner().expect("no poisoned lock");
    done.sort_by_key(|d| match d {
        Done::Measure(i, _) => (0, *i),
        Done::Crash(i, _) => (1, *i),
        Done::Broken(i, _) => (2, *i),
    });
    let mut r = Results {
        runs: Vec::new(),
        ordered: Vec::new(),
        crash: Vec::new(),
        broken: Vec::new(),
        seconds: 0.0,
    };
    for d in done {
        match d {
            Done::Measure(_, w) if is_ordered(&w.workload) => r.ordered.push(w),
            Done::Measure(_, w) => r.runs.push(w),
            Done::Crash(_, c) => r.crash.push(c),
            Done::Broken(_, c) => r.broken.push(c),
        }
    }
    r.seconds = t0.elapsed().as_secs_f64();
    Ok(r)
}

fn run_job(config: &Config, job: Job, bar: &indicatif::ProgressBar) -> Result<Done, OspError> {
    match job {
        Job::Measure(i, w) => {
            bar.set_message(format!("{}: building", w.name));
            Ok(Done::Measure(i, measure_workload(config, w, bar)?))
        }
        Job::Crash(i, w, s) => {
            bar.set_message(format!("{}: crash points under {}", w.name, s.name()));
            let row = crash_row(config, w, &s, bar)?;
            Ok(Done::Crash(i, row))
        }
        Job::Broken(i, s) => {
            bar.set_message(format!("broken {}", s.name()));
            let mut last = None;
            for &w in &WORKLOADS {
                let row = crash_row(config, w, &s, bar)?;
                if row.failing > 0 {
                    return Ok(Done::Broken(i, row));
                }
                last = Some(row);
            }
            Ok(Done::Broken(i, last.expect("seven workloads")))
        }
    }
}

/// Builds `w` once and measures every protocol on it.
fn measure_workload(
    config: &Config,
    w: PaperWorkload,
    bar: &indicatif::ProgressBar,
) -> Result<WorkloadRuns, OspError> {
    let elements = config.elements(w.kind);
    let params = Params {
        elements,
        dist: w.dist,
        ops_per_tx: 1,
    };
    let footprint = Workload::footprint(w.kind, &params);
    let data_pages = footprint.div_ceil(4096) * 4096;
    let log = variants()
        .iter()
        .chain(large_variants().iter())
        .map(|v| match v {
            Variant::Undo => UNDO_LOG,
            Variant::Osp(c) => OspProtocol::meta_len(data_pages, c),
        })
        .max()
        .unwrap_or(UNDO_LOG);
    let prep = prepare(w, elements, log)?;
    let paper_tlb = OspConfig::paper();
    // The unscrambled-Zipf runs compare the undo log with OSP as the paper runs it.
    let keep = if is_ordered(&w) {
        ORDERED_VARIANTS
    } else {
        usize::MAX
    };
    let mut runs = Vec::new();
    for v in variants().into_iter().take(keep) {
        bar.set_message(format!("{} under {}", w.name, v.name()));
        let m = measure(&prep, &v, &paper_tlb, config.schedule(), &mut || bar.inc(1))?;
        runs.push(m);
    }
    let mut large = Vec::new();
    if w.name == LARGE_WORKLOAD && config.large_txs > 0 {
        for v in large_variants() {
            bar.set_message(format!(
                "{} under {}, {} operations per transaction",
                w.name,
                v.name(),
                config.large_tx_ops
            ));
            let s = config.large_schedule();
            large.push(measure(&prep, &v, &paper_tlb, s, &mut || bar.inc(1))?);
        }
    }
    Ok(WorkloadRuns {
        workload: w,
        elements,
        footprint,
        runs,
        large,
    })
}

/// Explores `w` under `s`: the figures, or the live run's failure as one failing
/// image (a broken variant may break the structure without a crash).
fn crash_row(
    config: &Config,
    w: PaperWorkload,
    s: &Subject,
    bar: &indicatif::ProgressBar,
) -> Result<CrashRow, OspError> {
    let mut row = CrashRow {
        workload: w.name,
        subject: s.name(),
        txs: 0,
        points: 0,
        images: 0,
        recoveries: 0,
        recovery_images: 0,
        truncated: 0,
        failing: 0,
        first_failure: None,
    };
    let broken =
        matches!(s, Subject::Undo(Some(_))) || matches!(s, Subject::Osp(c) if c.fault.is_some());
    let mut seen = 0;
    let r = explore(w, s, config.crash_txs, config.seed, &mut |t| {
        bar.inc(t - seen);
        seen = t;
    });
    bar.inc(config.crash_txs - seen);
    match r {
        Ok(r) => {
            row.txs = r.txs;
            row.points = r.points;
            row.images = r.images;
            row.recoveries = r.recoveries;
            row.recovery_images = r.recovery_images;
            row.truncated = r.truncated_points;
            row.failing = r.failing_images;
            row.first_failure = r.failures.first().map(|f| f.to_string());
        }
        Err(e) if broken => {
            row.failing = 1;
            row.first_failure = Some(format!("the live run: {e}"));
        }
        Err(e) => {
            return Err(OspError::Crash {
                workload: w.name,
                subject: s.name(),
                message: e.to_string(),
            });
        }
    }
    Ok(row)
}

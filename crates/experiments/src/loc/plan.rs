//! The runs each figure needs, run on worker threads with progress on stderr.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use indicatif::{ProgressBar, ProgressStyle};
use pmlab_hwtx::{HwConfig, HwKind, Reading};
use pmlab_workloads::Kind;

use super::run::{self, Built, RunResult};
use super::{Config, LocError, paper};

/// One run: a workload, a protocol (with its speculation degree and reading), a memory
/// latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The workload.
    pub workload: Kind,
    /// The protocol.
    pub kind: HwKind,
    /// Its speculation degree (1 for all but LOC-WAL and LOC-Kiln).
    pub sd: u32,
    /// What a block-group block is.
    pub reading: Reading,
    /// Memory latency (ns).
    pub latency_ns: u64,
    /// The strict protocols (S-WAL, H-WAL, EC-WAL; Kiln's commit) under the paper's
    /// strict ordering: one persistent write in flight at a time
    /// (`HwConfig::serial_persist`) and the in-place phase done before the next
    /// transaction (`HwConfig::ordered_in_place`). The reproduction's default; `false`
    /// is the looser reading (writes overlapped across banks, in-place writes left to
    /// the cache). Protocols with a speculation degree above 1 are the same either way.
    pub strict: bool,
}

impl Key {
    fn new(workload: Kind, kind: HwKind, sd: u32, reading: Reading, latency_ns: u64) -> Key {
        Key {
            workload,
            kind,
            sd,
            reading,
            latency_ns,
            strict: true,
        }
    }

    /// The protocol's configuration.
    pub fn hw(&self) -> HwConfig {
        HwConfig {
            sd: self.sd,
            reading: self.reading,
            serial_persist: self.strict,
            ordered_in_place: self.strict,
            ..HwConfig::new(self.kind)
        }
    }

    /// The baseline this run is normalized to (same workload and latency).
    pub fn baseline(&self) -> Key {
        Key::new(
            self.workload,
            HwKind::Baseline,
            1,
            Reading::Line,
            self.latency_ns,
        )
    }

    fn describe(&self) -> String {
        format!(
            "{} {} SD {} {} blocks {} ns{}",
            paper::workload_name(self.workload),
            self.kind.label(),
            self.sd,
            self.reading.name(),
            self.latency_ns,
            if self.strict { "" } else { " overlapped" }
        )
    }
}

/// Every run's result.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// By run.
    pub runs: HashMap<Key, RunResult>,
}

impl Measured {
    /// A run's result.
    pub fn get(&self, key: &Key) -> Option<&RunResult> {
        self.runs.get(key)
    }

    /// A run's throughput over its baseline's.
    pub fn normalized(&self, key: &Key) -> Option<f64> {
        let base = self.runs.get(&key.baseline())?;
        Some(self.runs.get(key)?.throughput() / base.throughput())
    }
}

/// The runs of every figure, the costliest workloads first.
pub fn keys(config: &Config) -> Vec<Key> {
    let line = Reading::Line;
    let mut out = Vec::new();
    let mut order: Vec<Kind> = paper::WORKLOADS.iter().map(|w| w.0).collect();
    order.sort_by_key(|k| match k {
        Kind::BpTree | Kind::Db => 0,
        _ => 1,
    });
    for w in order {
        let k = |kind, sd, reading, lat| Key::new(w, kind, sd, reading, lat);
        let base = 168;
        for kind in [
            HwKind::Baseline,
            HwKind::SWal,
            HwKind::HWal,
            HwKind::EcWal,
            HwKind::Kiln,
        ] {
            out.push(k(kind, 1, line, base));
        }
        out.push(k(HwKind::LocKiln, 16, line, base));
        for &sd in &config.sds {
            out.push(k(HwKind::LocWal, sd, line, base));
        }
        for &lat in config.latencies.iter().filter(|&&l| l != base) {
            out.push(k(HwKind::Baseline, 1, line, lat));
            out.push(k(HwKind::HWal, 1, line, lat));
            out.push(k(HwKind::LocWal, 16, line, lat));
        }
        if config.readings {
            out.push(k(HwKind::HWal, 1, Reading::Word, base));
            out.push(k(HwKind::EcWal, 1, Reading::Word, base));
            out.push(k(HwKind::LocWal, 16, Reading::Word, base));
        }
        if config.overlapped {
            for kind in [HwKind::SWal, HwKind::HWal, HwKind::EcWal, HwKind::Kiln] {
                out.push(Key {
                    strict: false,
                    ..k(kind, 1, line, base)
                });
            }
        }
    }
    out.dedup();
    out
}

pub(super) fn bar(config: &Config, len: usize, what: &str) -> ProgressBar {
    if !config.progress {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{prefix} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("a valid template"),
    );
    pb.set_prefix(what.to_string());
    pb
}

/// Runs `jobs` on the configured threads, in order of their index; the first error
/// stops the rest.
pub(super) fn parallel<T: Send, J: Sync>(
    config: &Config,
    jobs: &[J],
    pb: &ProgressBar,
    label: impl Fn(&J) -> String + Sync,
    work: impl Fn(&J) -> Result<T, LocError> + Sync,
) -> Result<Vec<T>, LocError> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<Result<T, LocError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..config.threads.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= jobs.len() {
                        break;
                    }
                    pb.set_message(label(&jobs[i]));
                    let r = work(&jobs[i]).map_err(|e| LocError::Run {
                        what: label(&jobs[i]),
                        source: Box::new(e),
                    });
                    let failed = r.is_err();
                    out.lock().expect("no worker panics")[i] = Some(r);
                    pb.inc(1);
                    if failed {
                        next.store(jobs.len(), Ordering::Relaxed);
                    }
                }
            });
        }
    });
    pb.finish_and_clear();
    let mut done = Vec::with_capacity(jobs.len());
    for r in out
        .into_inner()
        .expect("no worker panics")
        .into_iter()
        .flatten()
    {
        done.push(r?);
    }
    Ok(done)
}

/// Builds every workload's image.
pub fn build_all(config: &Config) -> Result<Vec<Built>, LocError> {
    let kinds: Vec<Kind> = paper::WORKLOADS.iter().map(|w| w.0).collect();
    let pb = bar(config, kinds.len(), "building workloads");
    parallel(
        config,
        &kinds,
        &pb,
        |k| paper::workload_name(*k).to_string(),
        |&k| run::build(k, config.params(k)),
    )
}

/// Runs every key of [`keys`].
pub fn run_all(config: &Config, built: &[Built]) -> Result<Measured, LocError> {
    let keys = keys(config);
    let pb = bar(config, keys.len(), "simulating");
    let results = parallel(config, &keys, &pb, Key::describe, |key| {
        let b = built
            .iter()
            .find(|b| b.kind == key.workload)
            .expect("every workload was built");
        run::run(
            b,
            key.hw(),
            key.latency_ns,
            config.warmup,
            config.txs,
            config.seed,
        )
    })?;
    Ok(Measured {
        runs: keys.into_iter().zip(results).collect(),
    })
}

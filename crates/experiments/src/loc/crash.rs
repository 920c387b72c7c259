//! Crash exploration as part of the reproduction: every workload under every
//! persistent protocol at the CI size (pmlab-txcheck's explorer, every crash point,
//! against each workload's checker and the committed-prefix oracle), and each broken
//! variant the crash tests must catch.

use indicatif::{ProgressBar, ProgressStyle};
use pmlab_hwtx::{HwConfig, HwKind, Reading};
use pmlab_txcheck::HwHarness;
use pmlab_txcheck::crash::{self, Report};
use pmlab_txcheck::hw::{broken_variant_config, broken_variants, crash_config};
use pmlab_workloads::Kind;
use serde::Serialize;

use super::{Config, LocError, paper};

/// One workload under one protocol.
#[derive(Clone, Debug, Serialize)]
pub struct CrashRow {
    /// The paper's workload name.
    pub workload: &'static str,
    /// The protocol.
    pub protocol: &'static str,
    /// What a block-group block is.
    pub reading: &'static str,
    /// Under the strict reading (serialized writes, ordered in-place phase).
    pub strict: bool,
    /// Transactions explored.
    pub txs: u64,
    /// Crash points.
    pub points: u64,
    /// Crash images checked (transactions).
    pub images: u64,
    /// Recoveries recorded and explored.
    pub recoveries: u64,
    /// Crash images of those recoveries and the transactions after them.
    pub recovery_images: u64,
    /// Points with more writes in flight than were enumerated.
    pub truncated_points: u64,
    /// Images that failed.
    pub failing_images: u64,
}

/// One broken variant and where it was caught.
#[derive(Clone, Debug, Serialize)]
pub struct BrokenRow {
    /// What is broken.
    pub variant: &'static str,
    /// The protocol it breaks.
    pub protocol: &'static str,
    /// The first workload whose exploration caught it (`None`: not caught).
    pub caught_on: Option<&'static str>,
    /// Failing images there.
    pub failing_images: u64,
    /// The first failure.
    pub first_failure: String,
}

/// The crash exploration's figures.
#[derive(Clone, Debug, Serialize)]
pub struct CrashSummary {
    /// Correct protocols.
    pub rows: Vec<CrashRow>,
    /// Broken variants.
    pub broken: Vec<BrokenRow>,
    /// Wall-clock seconds.
    pub wall_s: f64,
}

fn row(wl: Kind, hw: &HwConfig, r: &Report) -> CrashRow {
    CrashRow {
        workload: paper::workload_name(wl),
        protocol: hw.kind.label(),
        reading: hw.reading.name(),
        strict: hw.serial_persist && hw.ordered_in_place,
        txs: r.txs,
        points: r.points,
        images: r.images,
        recoveries: r.recoveries,
        recovery_images: r.recovery_images,
        truncated_points: r.truncated_points,
        failing_images: r.failing_images,
    }
}

fn protocols() -> Vec<HwConfig> {
    let mut v: Vec<HwConfig> = HwKind::ALL
        .into_iter()
        .filter(|k| k.persistent())
        .map(|k| HwConfig {
            sd: 4,
            ..HwConfig::new(k)
        })
        .collect();
    for k in [HwKind::EcWal, HwKind::LocWal] {
        v.push(HwConfig {
            sd: 4,
            reading: Reading::Word,
            ..HwConfig::new(k)
        });
    }
    // The reproduction's strict reading (serialized writes, ordered in-place phase).
    for k in [HwKind::SWal, HwKind::HWal, HwKind::EcWal, HwKind::Kiln] {
        v.push(HwConfig {
            serial_persist: true,
            ordered_in_place: true,
            ..HwConfig::new(k)
        });
    }
    v
}

/// Explores every workload under every protocol, then the broken variants.
pub fn explore_all(config: &Config) -> Result<CrashSummary, LocError> {
    let t = std::time::Instant::now();
    let jobs: Vec<(Kind, HwConfig)> = paper::WORKLOADS
        .iter()
        .flat_map(|&(wl, _)| protocols().into_iter().map(move |hw| (wl, hw)))
        .collect();
    let pb = if config.progress {
        let pb = ProgressBar::new(jobs.len() as u64);
        pb.set_style(
            ProgressStyle::with_template("{prefix} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
                .expect("a valid template"),
        );
        pb.set_prefix("crash exploration");
        pb
    } else {
        ProgressBar::hidden()
    };
    let rows = super::plan::parallel(
        config,
        &jobs,
        &pb,
        |(wl, hw)| format!("{} {}", paper::workload_name(*wl), hw.kind.label()),
        |(wl, hw)| {
            let r = crash::explore(&HwHarness(*hw), &crash_config(*wl, hw), &mut |_| {})?;
            Ok(row(*wl, hw, &r))
        },
    )?;
    let mut broken = Vec::new();
    for (variant, faults, kinds) in broken_variants() {
        for kind in kinds {
            let hw = HwConfig {
                sd: 4,
                faults,
                ..HwConfig::new(kind)
            };
            broken.push(find_catch(variant, hw)?);
        }
    }
    Ok(CrashSummary {
        rows,
        broken,
        wall_s: t.elapsed().as_secs_f64(),
    })
}

fn find_catch(variant: &'static str, hw: HwConfig) -> Result<BrokenRow, LocError> {
    for wl in [Kind::Sps, Kind::HashTable, Kind::BpTree, Kind::Db] {
        let r = crash::explore(&HwHarness(hw), &broken_variant_config(wl), &mut |_| {})?;
        if !r.passed() {
            return Ok(BrokenRow {
                variant,
                protocol: hw.kind.label(),
                caught_on: Some(paper::workload_name(wl)),
                failing_images: r.failing_images,
                first_failure: r
                    .failures
                    .first()
                    .map(|f| f.to_string())
                    .unwrap_or_default(),
            });
        }
    }
    Ok(BrokenRow {
        variant,
        protocol: hw.kind.label(),
        caught_on: None,
        failing_images: 0,
        first_failure: String::new(),
    })
}

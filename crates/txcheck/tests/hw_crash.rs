//! The hardware protocols of paper 001 under the crash explorer: every workload, every
//! crash point at a small size, against each workload's checker and the
//! committed-prefix oracle, under both readings of a block-group block for Eager
//! Commit; and the three broken variants the issue names, caught.

use pmlab_hwtx::{HwConfig, HwKind, Reading};
use pmlab_txcheck::HwHarness;
use pmlab_txcheck::crash::{self, Config, Report};
use pmlab_txcheck::hw::{broken_variant_config, broken_variants, crash_config};
use pmlab_workloads::Kind;

fn run(hw: HwConfig, cfg: &Config) -> Report {
    crash::explore(&HwHarness(hw), cfg, &mut |_| {})
        .unwrap_or_else(|e| panic!("{} on {}: {e}", hw.kind.label(), cfg.workload))
}

fn protocol(kind: HwKind, reading: Reading) -> HwConfig {
    HwConfig {
        sd: 4,
        reading,
        ..HwConfig::new(kind)
    }
}

fn explore_all(configs: &[HwConfig], workloads: &[Kind]) {
    for &wl in workloads {
        for hw in configs {
            let t = std::time::Instant::now();
            let r = run(*hw, &crash_config(wl, hw));
            eprintln!(
                "{} ({} blocks) {wl}: {} txs, {} points, {} images, {} recoveries ({} images), {} truncated, {:.1}s",
                hw.kind.label(),
                hw.reading.name(),
                r.txs,
                r.points,
                r.images,
                r.recoveries,
                r.recovery_images,
                r.truncated_points,
                t.elapsed().as_secs_f64()
            );
            assert!(r.passed(), "{} {wl}: {}", hw.kind.label(), r.failures[0]);
            assert!(
                r.points >= r.txs,
                "{} {wl}: {} points",
                hw.kind.label(),
                r.points
            );
        }
    }
}

#[test]
fn every_workload_survives_every_crash_under_every_protocol() {
    let all: Vec<HwConfig> = HwKind::ALL
        .into_iter()
        .filter(|k| k.persistent())
        .map(|k| protocol(k, Reading::Line))
        .collect();
    explore_all(&all, &Kind::ALL);
}

#[test]
fn eager_commit_survives_every_crash_with_word_blocks() {
    let word: Vec<HwConfig> = [HwKind::HWal, HwKind::EcWal, HwKind::LocWal]
        .into_iter()
        .map(|k| protocol(k, Reading::Word))
        .collect();
    explore_all(&word, &[Kind::Sps, Kind::HashTable, Kind::BpTree]);
}

#[test]
fn the_strict_reading_survives_every_crash() {
    // Serialized persistent writes and an ordered in-place phase (the reproduction's
    // default for the strict protocols): more ordering points, the same recovery.
    let strict: Vec<HwConfig> = [HwKind::SWal, HwKind::HWal, HwKind::EcWal, HwKind::Kiln]
        .into_iter()
        .map(|k| HwConfig {
            serial_persist: true,
            ordered_in_place: true,
            ..protocol(k, Reading::Line)
        })
        .collect();
    explore_all(&strict, &[Kind::Sps, Kind::HashTable, Kind::BpTree]);
}

#[test]
fn every_broken_variant_is_caught() {
    for (name, faults, kinds) in broken_variants() {
        for kind in kinds {
            let hw = HwConfig {
                faults,
                ..protocol(kind, Reading::Line)
            };
            let caught = [Kind::Sps, Kind::HashTable, Kind::BpTree, Kind::Db]
                .into_iter()
                .find_map(|wl| {
                    let r = run(hw, &broken_variant_config(wl));
                    (!r.passed()).then_some((wl, r))
                });
            let (wl, r) =
                caught.unwrap_or_else(|| panic!("{name} ({}) was not caught", kind.label()));
            eprintln!(
                "{name} ({}): caught on {wl}, {} failing images; first: {}",
                kind.label(),
                r.failing_images,
                r.failures[0]
            );
        }
    }
}

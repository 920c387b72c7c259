//! The hardware protocols of paper 001 under the crash explorer: every workload, every
//! crash point at a small size, against each workload's checker and the
//! committed-prefix oracle; and the three broken variants the issue names, caught.

use pmlab_hwtx::{HwConfig, HwFaults, HwKind, Reading};
use pmlab_model::{CacheLevelConfig, PendingChoice, ReplacementPolicy};
use pmlab_txcheck::HwHarness;
use pmlab_txcheck::crash::{self, Config, Report};
use pmlab_workloads::Kind;

/// A small two-level hierarchy: a volatile L1 of 4 lines over an LLC of `llc` lines of
/// `assoc` ways (so Kiln has volatile levels above its non-volatile LLC, and evictions
/// are frequent).
fn levels(llc: u64, assoc: u64) -> Vec<CacheLevelConfig> {
    let l = |size, assoc| CacheLevelConfig {
        size,
        block_size: 64,
        assoc,
        latency_cycles: 1,
        repl: ReplacementPolicy::Lru,
        write_back: true,
        write_allocate: true,
    };
    vec![l(4 * 64, 4), l(llc * 64, assoc)]
}

fn config(kind: Kind, hw: &HwConfig) -> Config {
    sized(kind, hw.kind.nv_llc())
}

/// `big`: an LLC of 512 lines (16 ways), else 32 (8 ways).
fn sized(kind: Kind, big: bool) -> Config {
    let mut c = Config::small(kind, 1);
    // Kiln's uncommitted versions are pinned in its LLC: give them room (a window of
    // four B+-tree transactions); the WAL protocols get a small LLC, to evict often.
    c.caches = Some(if big { levels(512, 16) } else { levels(32, 8) });
    c.txs = match kind {
        Kind::BpTree | Kind::Db => 6,
        _ => 12,
    };
    c.recovery_samples = 1;
    c
}

fn run(hw: HwConfig, cfg: &Config) -> Report {
    crash::explore(&HwHarness(hw), cfg, &mut |_| {})
        .unwrap_or_else(|e| panic!("{} on {}: {e}", hw.kind.label(), cfg.workload))
}

fn protocol(kind: HwKind, sd: u32, reading: Reading) -> HwConfig {
    HwConfig {
        sd,
        reading,
        ..HwConfig::new(kind)
    }
}

#[test]
fn every_workload_survives_every_crash_under_every_protocol() {
    for wl in Kind::ALL {
        for kind in HwKind::ALL.into_iter().filter(|k| k.persistent()) {
            let hw = protocol(kind, 4, Reading::Line);
            let cfg = config(wl, &hw);
            let t = std::time::Instant::now();
            let r = run(hw, &cfg);
            eprintln!(
                "{} {wl}: {} txs, {} points, {} images, {} recoveries ({} images), {} truncated, {:.1}s",
                kind.label(),
                r.txs,
                r.points,
                r.images,
                r.recoveries,
                r.recovery_images,
                r.truncated_points,
                t.elapsed().as_secs_f64()
            );
            assert!(r.passed(), "{} {wl}: {}", kind.label(), r.failures[0]);
        }
    }
}

/// The broken variants the issue names, each with the protocols it breaks.
fn broken() -> Vec<(&'static str, HwFaults, Vec<HwKind>)> {
    let f = HwFaults::NONE;
    vec![
        (
            "EC recovery that trusts a partial block group",
            HwFaults {
                ec_trust_partial: true,
                ..f
            },
            vec![HwKind::EcWal, HwKind::LocWal],
        ),
        (
            "SP committing out of order",
            HwFaults {
                sp_out_of_order: true,
                ..f
            },
            vec![HwKind::LocWal],
        ),
        (
            "Kiln commit that does not wait for the NV-LLC",
            HwFaults {
                kiln_no_wait: true,
                ..f
            },
            vec![HwKind::Kiln, HwKind::LocKiln],
        ),
    ]
}

#[test]
fn every_broken_variant_is_caught() {
    for (name, faults, kinds) in broken() {
        for kind in kinds {
            let hw = HwConfig {
                faults,
                ..protocol(kind, 4, Reading::Line)
            };
            let caught = [Kind::Sps, Kind::HashTable, Kind::BpTree, Kind::Db]
                .into_iter()
                .find_map(|wl| {
                    // A large LLC, so that a commit finds its blocks still cached and
                    // issues many block groups at once, and sampled subsets of the
                    // writes in flight (more than the exhaustive enumeration takes).
                    let mut cfg = sized(wl, true);
                    cfg.explore.pending = PendingChoice::Random {
                        samples: 16,
                        seed: 7,
                    };
                    let r = run(hw, &cfg);
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

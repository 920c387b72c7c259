//! Every workload under every software protocol, explored crash point by crash point on
//! the machine model at a small size: every image recovers to a checker-clean
//! structure holding a committed prefix that contains every acknowledged transaction.
//! Every deliberately broken variant of each protocol is caught.

use pmlab_tx::FaultPlan;
use pmlab_txcheck::crash::{self, Config, Report};
use pmlab_txcheck::{ProtocolKind, RedoHarness, UndoHarness};
use pmlab_workloads::Kind;

fn run(protocol: ProtocolKind, faults: FaultPlan, cfg: &Config) -> Report {
    let r = match protocol {
        ProtocolKind::Redo => crash::explore(&RedoHarness(faults), cfg, &mut |_| {}),
        ProtocolKind::Undo => crash::explore(&UndoHarness(faults), cfg, &mut |_| {}),
    };
    r.unwrap_or_else(|e| panic!("{protocol} {faults} {}: {e}", cfg.workload))
}

#[test]
fn every_workload_survives_every_crash_under_both_protocols() {
    for kind in Kind::ALL {
        for protocol in ProtocolKind::ALL {
            let cfg = Config::small(kind, 1);
            let t = std::time::Instant::now();
            let r = run(protocol, FaultPlan::CORRECT, &cfg);
            eprintln!(
                "{kind} {protocol}: {} txs, {} points, {} images, {} recoveries ({} images), {} truncated, {:.1}s",
                r.txs,
                r.points,
                r.images,
                r.recoveries,
                r.recovery_images,
                r.truncated_points,
                t.elapsed().as_secs_f64()
            );
            assert!(r.passed(), "{kind} {protocol}: {}", r.failures[0]);
            // At least the two durable steps of every commit (log, data) are points.
            assert!(
                r.points >= 2 * r.txs,
                "{kind} {protocol}: {} points",
                r.points
            );
            assert!(r.recoveries > 0, "{kind} {protocol}: no recovery explored");
        }
    }
}

#[test]
fn every_broken_variant_is_caught() {
    for protocol in ProtocolKind::ALL {
        for &fault in protocol.faults() {
            let caught = [Kind::Sps, Kind::HashTable, Kind::BTree]
                .into_iter()
                .find_map(|kind| {
                    let r = run(protocol, FaultPlan::broken(fault), &Config::small(kind, 1));
                    (!r.passed()).then_some((kind, r))
                });
            let (kind, r) = caught.unwrap_or_else(|| panic!("{protocol} {fault:?} was not caught"));
            eprintln!(
                "{protocol} {}: caught on {kind}, {} failing images; first: {}",
                fault.name(),
                r.failing_images,
                r.failures[0]
            );
        }
    }
}

//! Every crash point of every paper-000 workload under both hardware protocols, at a
//! small size: every image recovers to a checker-clean structure holding a committed
//! prefix with every acknowledged transaction. Each broken variant is caught.

use pmlab_experiments::osp::crash::{Subject, explore};
use pmlab_experiments::osp::paper::WORKLOADS;
use pmlab_hwtx::{Atomicity, Consolidation, HwUndoFault, OspConfig, OspFault};

fn subjects() -> Vec<Subject> {
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

#[test]
fn every_workload_survives_every_crash() {
    for w in WORKLOADS {
        for s in subjects() {
            let t = std::time::Instant::now();
            let r = explore(w, &s, 6, 1, &mut |_| {})
                .unwrap_or_else(|e| panic!("{} {}: {e}", w.name, s.name()));
            eprintln!(
                "{} {}: {} txs, {} points, {} images, {} recoveries ({} images), {} truncated, {:.1}s",
                w.name,
                s.name(),
                r.txs,
                r.points,
                r.images,
                r.recoveries,
                r.recovery_images,
                r.truncated_points,
                t.elapsed().as_secs_f64()
            );
            assert!(r.passed(), "{} {}: {}", w.name, s.name(), r.failures[0]);
            assert!(
                r.recoveries > 0,
                "{} {}: no recovery explored",
                w.name,
                s.name()
            );
        }
    }
}

#[test]
fn every_broken_variant_is_caught() {
    let mut broken: Vec<Subject> = HwUndoFault::ALL
        .iter()
        .map(|&f| Subject::Undo(Some(f)))
        .collect();
    for f in OspFault::ALL {
        for atomicity in [Atomicity::Journal, Atomicity::SuperPage] {
            broken.push(Subject::Osp(OspConfig {
                atomicity,
                ..Subject::osp_small(Some(f))
            }));
        }
    }
    for s in broken {
        let caught = WORKLOADS
            .iter()
            .find_map(|&w| match explore(w, &s, 6, 1, &mut |_| {}) {
                Ok(r) if r.passed() => None,
                Ok(r) => Some(format!(
                    "{}: {} failing images; first: {}",
                    w.name, r.failing_images, r.failures[0]
                )),
                Err(e) => Some(format!("{}: the live run broke: {e}", w.name)),
            });
        let how = caught.unwrap_or_else(|| panic!("{} was not caught", s.name()));
        eprintln!("{} caught on {how}", s.name());
    }
}

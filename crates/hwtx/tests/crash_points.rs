//! Crashes during page consolidation and during recovery, explored point by point on
//! the machine model with OSP's own state (the workloads' exploration through
//! pmlab-txcheck is in pmlab-experiments): a transaction whose TLB miss consolidates a
//! page recovers at every crash point to the state before or after it, and recovery
//! crashed at any point recovers to the same state as recovery run whole.

use pmlab_hwtx::{Atomicity, Consolidation, OspConfig, OspProtocol};
use pmlab_model::{ExploreOptions, Machine, MachineConfig, PointKind, Recording};
use pmlab_tx::{Area, Protocol};

const PAGE: u64 = 4096;
const A: u64 = PAGE; // the page consolidated
const B: u64 = 2 * PAGE; // the page whose miss evicts it

fn areas(cfg: &OspConfig) -> (u64, Area, Area) {
    let data = Area::new(PAGE, 4 * PAGE);
    let meta = Area::new(data.end(), OspProtocol::meta_len(data.len, cfg));
    (meta.end(), meta, data)
}

fn boot(cfg: &OspConfig, image: &[u8]) -> OspProtocol {
    let (_, meta, data) = areas(cfg);
    let m =
        Machine::with_image(MachineConfig::tiny(image.len() as u64, 4), image.to_vec()).unwrap();
    OspProtocol::attach(m, meta, data, cfg.clone()).unwrap()
}

/// A's four lines and B's first word.
fn state(p: &mut OspProtocol) -> Vec<u64> {
    let mut v: Vec<u64> = (0..4).map(|l| p.read_u64(A + 64 * l).unwrap()).collect();
    v.push(p.read_u64(B).unwrap());
    v
}

fn recovered(cfg: &OspConfig, image: &[u8]) -> Result<Vec<u64>, String> {
    let mut p = boot(cfg, image);
    p.recover().map_err(|e| e.to_string())?;
    Ok(state(&mut p))
}

/// Commits four lines of A, then records a transaction on B that evicts A (the TLB
/// holds one entry), so A is consolidated inside the recording.
fn run(cfg: &OspConfig) -> (Recording, Vec<u64>, Vec<u64>) {
    let (size, meta, data) = areas(cfg);
    let m = Machine::new(MachineConfig::tiny(size, 4)).unwrap();
    let mut p = OspProtocol::format(m, meta, data, cfg.clone()).unwrap();
    p.begin().unwrap();
    for l in 0..4 {
        p.write_u64(A + 64 * l, 10 + l).unwrap();
    }
    p.commit().unwrap();
    let before = state(&mut p);
    let consolidated = p.osp_stats().consolidations;
    p.memory_mut().start_recording();
    p.begin().unwrap();
    p.write_u64(B, 99).unwrap();
    p.commit().unwrap();
    // Asynchronous consolidation: a third page pushes A out of the queue of one.
    p.read_u64(3 * PAGE).unwrap();
    let rec = p.memory_mut().stop_recording();
    assert!(
        p.osp_stats().consolidations > consolidated,
        "A was consolidated while recorded"
    );
    let after = state(&mut p);
    (rec, before, after)
}

fn configs() -> Vec<OspConfig> {
    let base = OspConfig::small(1);
    vec![
        base.clone(),
        OspConfig {
            atomicity: Atomicity::SuperPage,
            ..base.clone()
        },
        OspConfig {
            consolidation: Consolidation::Async { queue: 1 },
            ..base
        },
    ]
}

#[test]
fn a_crash_during_consolidation_recovers() {
    for cfg in configs() {
        let (rec, before, after) = run(&cfg);
        let r = rec.explore(&ExploreOptions::default(), |c| {
            let got = recovered(&cfg, c.bytes)?;
            let ok = got == after || (c.kind != PointKind::End && got == before);
            if ok {
                Ok(())
            } else {
                Err(format!("recovered {got:?}"))
            }
        });
        assert!(r.passed(), "{cfg:?}: {:?}", r.failures.first());
        // The copies and the durable steps after them, each with its pending subsets.
        assert!(r.points >= 5 && r.images > r.points, "{cfg:?}: {r:?}");
    }
}

#[test]
fn a_crash_during_recovery_recovers_the_same() {
    for cfg in configs() {
        let (rec, _, _) = run(&cfg);
        // Every image of the transaction's run whose recovery has pages to merge.
        let mut explored = 0;
        for b in 0..rec.boundaries() {
            let image = rec.state_at(b).unwrap().image().to_vec();
            let mut p = boot(&cfg, &image);
            p.memory_mut().start_recording();
            let fixed = p.recover().unwrap();
            let rrec = p.memory_mut().stop_recording();
            if !fixed.repaired {
                continue;
            }
            let want = state(&mut p);
            let r = rrec.explore(&ExploreOptions::default(), |c| {
                let got = recovered(&cfg, c.bytes)?;
                if got == want {
                    Ok(())
                } else {
                    Err(format!("recovered {got:?}, not {want:?}"))
                }
            });
            assert!(r.passed(), "{cfg:?} boundary {b}: {:?}", r.failures.first());
            explored += 1;
        }
        assert!(explored > 0, "{cfg:?}: no recovery had work to do");
    }
}

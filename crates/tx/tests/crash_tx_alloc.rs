//! Allocation inside transactions: each transaction allocates into (or frees from) an
//! owning slot and fills the new extent, under redo or undo logging, recorded on the
//! machine model. At every crash point every image must recover to a checker-clean
//! allocator whose slots and payloads are all from before or all from after the
//! transaction in flight.

use pmlab_model::{ChaosConfig, ExploreOptions, Machine, MachineConfig};
use pmlab_spine::Memory;
use pmlab_tx::{Allocator, Fault, FaultPlan, RedoLog, TxMemory, UndoLog};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MEM: u64 = 16384;
const LOG: u64 = 0;
const LOG_LEN: u64 = 4096;
const SLOTS: u64 = 4096;
const NSLOTS: u64 = 8;
const HEAP: u64 = 8192;
const HEAP_LEN: u64 = 8192;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Redo,
    Undo,
}

fn slots() -> Vec<u64> {
    (0..NSLOTS).map(|i| SLOTS + 8 * i).collect()
}

/// The observable state: each slot's pointer and the first 8 payload bytes it owns.
fn observe(m: &mut impl Memory) -> Vec<(u64, u64)> {
    slots()
        .iter()
        .map(|&s| {
            let p = m.read_u64(s).unwrap();
            (p, if p == 0 { 0 } else { m.read_u64(p).unwrap() })
        })
        .collect()
}

fn recover(kind: Kind, c: &pmlab_model::CrashImage<'_>) -> Result<Vec<(u64, u64)>, String> {
    let mut m = c.memory();
    match kind {
        Kind::Redo => RedoLog::open(&mut m, LOG, LOG_LEN).map(|_| ()),
        Kind::Undo => UndoLog::open(&mut m, LOG, LOG_LEN).map(|_| ()),
    }
    .map_err(|e| format!("log recovery: {e}"))?;
    Allocator::open(&mut m, HEAP).map_err(|e| format!("allocator recovery: {e}"))?;
    Allocator::check(&mut m, HEAP, &slots()).map_err(|e| format!("checker: {e}"))?;
    Ok(observe(&mut m))
}

/// One transaction's work: allocate-and-fill or free, on either kind of transaction.
fn step<T: TxMemory>(tx: &mut T, a: &mut Allocator, slot: u64, size: u64, value: u64) {
    if tx.tx_read_u64(slot).unwrap() == 0 {
        if let Ok(p) = a.alloc_in(tx, size, slot) {
            tx.tx_write_u64(p, value).unwrap();
        }
    } else {
        a.free_in(tx, slot).unwrap();
    }
}

/// A tiny cache (4 lines) with chaos write-backs, so that evictions reorder what
/// reaches memory.
fn machine(seed: u64) -> Machine {
    let mut c = MachineConfig::tiny(MEM, 4);
    c.chaos = Some(ChaosConfig {
        seed,
        probability: 0.05,
    });
    Machine::new(c).unwrap()
}

/// Runs `count` seeded transactions, each recorded on the machine model and explored
/// at every operation boundary with every subset of pending write-backs; returns
/// (crash points, bad images, first failure).
fn explore(kind: Kind, faults: FaultPlan, seed: u64, count: usize) -> (u64, u64, Option<String>) {
    let mut m = machine(seed);
    let mut redo = (kind == Kind::Redo).then(|| {
        RedoLog::format(&mut m, LOG, LOG_LEN)
            .unwrap()
            .with_faults(faults)
    });
    let mut undo = (kind == Kind::Undo).then(|| {
        UndoLog::format(&mut m, LOG, LOG_LEN)
            .unwrap()
            .with_faults(faults)
    });
    let mut a = Allocator::format(&mut m, HEAP, HEAP_LEN, 64).unwrap();
    m.persist_all();
    let opts = ExploreOptions {
        max_failures: 4,
        ..ExploreOptions::default()
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (mut points, mut bad, mut first) = (0u64, 0u64, None);
    for _ in 0..count {
        let slot = SLOTS + 8 * rng.gen_range(0..NSLOTS);
        let size = rng.gen_range(1..=300u64);
        let value = rng.r#gen::<u64>() | 1;
        let commits = rng.gen_bool(0.8);
        let before = observe(&mut m);
        let ((), rec) = m.record(|m| match (&mut redo, &mut undo) {
            (Some(log), _) => {
                let mut tx = log.begin(m);
                step(&mut tx, &mut a, slot, size, value);
                if commits {
                    tx.commit().unwrap()
                } else {
                    tx.abort()
                }
            }
            (_, Some(log)) => {
                let mut tx = log.begin(m);
                step(&mut tx, &mut a, slot, size, value);
                if commits {
                    tx.commit().unwrap()
                } else {
                    tx.abort().unwrap()
                }
            }
            _ => unreachable!(),
        });
        a.resync(&mut m).unwrap();
        let after = observe(&mut m);
        let report = rec.explore(&opts, |c| {
            let s = recover(kind, c)?;
            if s == before || (commits && s == after) {
                Ok(())
            } else {
                Err(format!(
                    "boundary {}: slots/payloads are neither before nor after",
                    c.boundary
                ))
            }
        });
        points += report.points as u64;
        bad += report.failures.len() as u64;
        if first.is_none() {
            first = report.failures.first().map(|f| f.message.clone());
        }
    }
    (points, bad, first)
}

#[test]
fn transactional_allocation_survives_every_crash() {
    for kind in [Kind::Redo, Kind::Undo] {
        for seed in 1..=2 {
            let (points, bad, first) = explore(kind, FaultPlan::CORRECT, seed, 80);
            assert_eq!(
                bad,
                0,
                "{kind:?} seed {seed}: {}",
                first.unwrap_or_default()
            );
            assert!(points > 200, "{points}");
            eprintln!("tx alloc {kind:?} seed {seed}: {points} points");
        }
    }
}

#[test]
fn transactional_allocation_with_a_broken_log_is_caught() {
    for (kind, fault) in [
        (Kind::Redo, Fault::RedoSkipLogFence),
        (Kind::Undo, Fault::UndoSkipSnapshotFence),
    ] {
        let (_, bad, first) = explore(kind, FaultPlan::broken(fault), 1, 80);
        assert!(bad > 0, "{fault:?} not caught");
        eprintln!(
            "tx alloc {fault:?}: caught, {bad} bad images; first: {}",
            first.unwrap()
        );
    }
}

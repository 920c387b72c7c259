//! The same transactions crash-tested on the machine model: each transaction is
//! recorded on a [`Machine`] (real cache evictions on a tiny cache, plus chaos
//! write-backs) and its recording explored at every operation boundary with every
//! subset of pending write-backs; each image is recovered and held against the
//! oracle. The broken protocols must be caught here too.

use pmlab_model::{
    ChaosConfig, ExploreOptions, Granularity, Machine, MachineConfig, PendingChoice,
};
use pmlab_spine::Memory;
use pmlab_tx::{Fault, FaultPlan, RedoLog, UndoLog};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MEM: u64 = 64 * 1024;
const LOG: u64 = 0;
const LOG_LEN: u64 = 3072;
const DATA: u64 = 4096;
const DATA_LEN: usize = 2048;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Redo,
    Undo,
}

fn config(seed: u64) -> MachineConfig {
    let mut c = MachineConfig::tiny(MEM, 4);
    c.chaos = Some(ChaosConfig {
        seed,
        probability: 0.05,
    });
    c
}

fn opts() -> ExploreOptions {
    ExploreOptions {
        granularity: Granularity::EveryOp,
        pending: PendingChoice::Exhaustive { max_pending: 8 },
        skip_unchanged: true,
        max_failures: 4,
        ..ExploreOptions::default()
    }
}

fn data(m: &mut impl Memory) -> Vec<u8> {
    let mut d = vec![0u8; DATA_LEN];
    m.read(DATA, &mut d).unwrap();
    d
}

fn recover(kind: Kind, faults: FaultPlan, m: &mut impl Memory) -> Result<(), String> {
    match kind {
        Kind::Redo => RedoLog::open_with_faults(m, LOG, LOG_LEN, faults).map(|_| ()),
        Kind::Undo => UndoLog::open(m, LOG, LOG_LEN).map(|_| ()),
    }
    .map_err(|e| format!("recovery failed: {e}"))
}

/// Runs `count` seeded transactions, exploring each; returns (points, images,
/// failures, first failure).
fn run(
    kind: Kind,
    faults: FaultPlan,
    seed: u64,
    count: usize,
) -> (usize, usize, usize, Option<String>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut m = Machine::new(config(seed)).unwrap();
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
    m.persist_all();
    let (mut points, mut images, mut failures, mut first) = (0, 0, 0, None);
    for _ in 0..count {
        let n = rng.gen_range(1..=4);
        let writes: Vec<(u64, Vec<u8>)> = (0..n)
            .map(|_| {
                let len = rng.gen_range(1..=40usize);
                let off = rng.gen_range(0..=DATA_LEN - len) as u64;
                (DATA + off, (0..len).map(|_| rng.r#gen::<u8>()).collect())
            })
            .collect();
        let commits = rng.gen_bool(0.85);
        let old = data(&mut m);
        let ((), rec) = m.record(|m| match (&mut redo, &mut undo) {
            (Some(log), _) => {
                let mut tx = log.begin(m);
                for (a, d) in &writes {
                    tx.write(*a, d).unwrap();
                }
                if commits {
                    tx.commit().unwrap()
                } else {
                    tx.abort()
                }
            }
            (_, Some(log)) => {
                let mut tx = log.begin(m);
                for (a, d) in &writes {
                    tx.write(*a, d).unwrap();
                }
                if commits {
                    tx.commit().unwrap()
                } else {
                    tx.abort().unwrap()
                }
            }
            _ => unreachable!(),
        });
        let new = data(&mut m);
        let report = rec.explore(&opts(), |c| {
            let mut img = c.memory();
            recover(kind, faults, &mut img)?;
            let d = data(&mut img);
            if d == old || (commits && d == new) {
                // Recovery must be idempotent: a crash during recovery recovers again.
                recover(kind, faults, &mut img)?;
                if data(&mut img) != d {
                    return Err(format!(
                        "boundary {}: a second recovery changed the data",
                        c.boundary
                    ));
                }
                Ok(())
            } else {
                Err(format!(
                    "boundary {}: data is neither the old nor the new state",
                    c.boundary
                ))
            }
        });
        points += report.points;
        images += report.images;
        failures += report.failures.len();
        if first.is_none() {
            first = report.failures.first().map(|f| f.message.clone());
        }
    }
    (points, images, failures, first)
}

#[test]
fn redo_and_undo_survive_every_crash_on_the_model() {
    for kind in [Kind::Redo, Kind::Undo] {
        for seed in 1..=2 {
            let (points, images, failures, first) = run(kind, FaultPlan::CORRECT, seed, 40);
            assert_eq!(
                failures,
                0,
                "{kind:?} seed {seed}: {}",
                first.unwrap_or_default()
            );
            assert!(points > 150, "{kind:?}: {points} points");
            eprintln!("model {kind:?} seed {seed}: {points} points, {images} images");
        }
    }
}

#[test]
fn broken_protocols_are_caught_on_the_model() {
    for (kind, fault) in [
        (Kind::Redo, Fault::RedoSkipLogFence),
        (Kind::Redo, Fault::RedoSkipApplyFence),
        (Kind::Redo, Fault::RedoHeaderOnlyChecksum),
        (Kind::Undo, Fault::UndoSkipSnapshotFence),
        (Kind::Undo, Fault::UndoSkipDataFence),
    ] {
        let (points, images, failures, first) = run(kind, FaultPlan::broken(fault), 1, 40);
        assert!(
            failures > 0,
            "{fault:?} not caught ({points} points, {images} images)"
        );
        eprintln!(
            "model {fault:?}: caught, {failures} failures; first: {}",
            first.unwrap()
        );
    }
}

/// Allocations and frees into owning slots, each recorded and explored; every image
/// must recover to a checker-clean allocator whose slots are as before or after.
fn run_alloc(faults: FaultPlan, seed: u64, ops: usize) -> (usize, usize, Option<String>) {
    use pmlab_tx::Allocator;
    const HEAP: u64 = 4096;
    let slots: Vec<u64> = (0..10).map(|i| 8 * i).collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut m = Machine::new(config(seed)).unwrap();
    let mut a = Allocator::format(&mut m, HEAP, 16384, 64)
        .unwrap()
        .with_faults(faults);
    m.persist_all();
    let (mut points, mut failures, mut first) = (0, 0, None);
    let read_slots =
        |m: &mut dyn FnMut(u64) -> u64| slots.iter().map(|&s| m(s)).collect::<Vec<u64>>();
    for _ in 0..ops {
        let slot = slots[rng.gen_range(0..slots.len())];
        let size = rng.gen_range(1..=256u64);
        let before = read_slots(&mut |s| m.read_u64(s).unwrap());
        let ((), rec) = m.record(|m| {
            if m.read_u64(slot).unwrap() == 0 {
                let _ = a.alloc_into(m, size, slot);
            } else {
                a.free_from(m, slot).unwrap();
            }
        });
        let after = read_slots(&mut |s| m.read_u64(s).unwrap());
        let report = rec.explore(&opts(), |c| {
            let mut img = c.memory();
            Allocator::open(&mut img, HEAP).map_err(|e| e.to_string())?;
            Allocator::check(&mut img, HEAP, &slots).map_err(|e| e.to_string())?;
            let now = read_slots(&mut |s| img.read_u64(s).unwrap());
            if now == before || now == after {
                Ok(())
            } else {
                Err("slots are neither before nor after".into())
            }
        });
        points += report.points;
        failures += report.failures.len();
        if first.is_none() {
            first = report.failures.first().map(|f| f.message.clone());
        }
    }
    (points, failures, first)
}

#[test]
fn allocator_survives_every_crash_on_the_model_and_its_broken_variant_is_caught() {
    let (points, failures, first) = run_alloc(FaultPlan::CORRECT, 1, 120);
    assert_eq!(failures, 0, "{}", first.unwrap_or_default());
    assert!(points > 300, "{points} points");
    eprintln!("model allocator: {points} points");
    let (_, failures, first) = run_alloc(FaultPlan::broken(Fault::AllocSkipIntentFence), 1, 120);
    assert!(failures > 0);
    eprintln!(
        "model AllocSkipIntentFence: caught, {failures} failures; first: {}",
        first.unwrap()
    );
}

//! Allocation inside transactions: each transaction allocates into (or frees from) an
//! owning slot and fills the new extent, under redo or undo logging. At every persist
//! point every crash image must recover to a checker-clean allocator whose slots and
//! payloads are all from before or all from after the transaction in flight.

use std::cell::RefCell;

use pmlab_spine::Memory;
use pmlab_tx::crashtest::{CrashMemory, Explorer};
use pmlab_tx::{Allocator, Fault, Protocol, RedoLog, TxMemory, UndoLog};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MEM: usize = 16384;
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

fn recover(kind: Kind, image: &[u8]) -> Result<Vec<(u64, u64)>, String> {
    let mut m = CrashMemory::from_image(image.to_vec());
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

fn explore(kind: Kind, protocol: Protocol, seed: u64, count: usize) -> (u64, u64, Option<String>) {
    // Oracle, tag t = transaction t - 1 in flight (0: none yet): (before, after, commits).
    let oracle = RefCell::new(Vec::<(Vec<(u64, u64)>, Vec<(u64, u64)>, bool)>::new());
    let bad = RefCell::new((0u64, None::<String>));
    let seen = RefCell::new(Vec::new());
    let mut m = CrashMemory::new(MEM);
    let mut redo = (kind == Kind::Redo).then(|| {
        RedoLog::format(&mut m, LOG, LOG_LEN)
            .unwrap()
            .with_protocol(protocol)
    });
    let mut undo = (kind == Kind::Undo).then(|| {
        UndoLog::format(&mut m, LOG, LOG_LEN)
            .unwrap()
            .with_protocol(protocol)
    });
    let mut a = Allocator::format(&mut m, HEAP, HEAP_LEN, 64).unwrap();
    let phase = m.tag_handle();
    m.explore(
        Explorer {
            seed,
            ..Explorer::default()
        },
        |p, img| match recover(kind, img) {
            Ok(s) => seen.borrow_mut().push((p.tag, s)),
            Err(e) => {
                let mut b = bad.borrow_mut();
                b.0 += 1;
                b.1.get_or_insert(format!("point {}: {e}", p.index));
            }
        },
    );
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for t in 0..count {
        let slot = SLOTS + 8 * rng.gen_range(0..NSLOTS);
        let size = rng.gen_range(1..=300u64);
        let value = rng.r#gen::<u64>() | 1;
        let commits = rng.gen_bool(0.8);
        let before = observe(&mut m);
        phase.set(t as u64 + 1);
        match (&mut redo, &mut undo) {
            (Some(log), _) => {
                let mut tx = log.begin(&mut m);
                step(&mut tx, &mut a, slot, size, value);
                if commits {
                    tx.commit().unwrap()
                } else {
                    tx.abort()
                }
            }
            (_, Some(log)) => {
                let mut tx = log.begin(&mut m);
                step(&mut tx, &mut a, slot, size, value);
                if commits {
                    tx.commit().unwrap()
                } else {
                    tx.abort().unwrap()
                }
            }
            _ => unreachable!(),
        }
        a.resync(&mut m).unwrap();
        let after = observe(&mut m);
        oracle.borrow_mut().push((before, after, commits));
    }
    let stats = m.stop_exploring();
    drop(m);
    let oracle = oracle.into_inner();
    let (mut n, mut first) = bad.into_inner();
    for (tag, s) in seen.into_inner() {
        let ok = match tag as usize {
            0 => s.iter().all(|&(p, _)| p == 0),
            t => {
                let (before, after, commits) = &oracle[(t - 1).min(oracle.len() - 1)];
                // Past the last transaction's end the state is its `after`.
                s == *before || (*commits && s == *after) || (t > oracle.len() && s == *after)
            }
        };
        if !ok {
            n += 1;
            first.get_or_insert(format!(
                "tag {tag}: slots/payloads are neither before nor after"
            ));
        }
    }
    (stats.points, n, first)
}

#[test]
fn transactional_allocation_survives_every_crash() {
    for kind in [Kind::Redo, Kind::Undo] {
        for seed in 1..=2 {
            let (points, bad, first) = explore(kind, Protocol::CORRECT, seed, 80);
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
        let (_, bad, first) = explore(kind, Protocol::broken(fault), 1, 80);
        assert!(bad > 0, "{fault:?} not caught");
        eprintln!(
            "tx alloc {fault:?}: caught, {bad} bad images; first: {}",
            first.unwrap()
        );
    }
}

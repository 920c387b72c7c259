//! Crash consistency of the persistent allocator: a seeded random sequence of
//! allocations and frees into owning slots; at every persist point every crash image
//! is recovered, checked (no leak, no double owner, no dangling slot) and held against
//! the oracle (each slot holds its value from before or after the operation in flight).

use std::cell::RefCell;

use pmlab_spine::Memory;
use pmlab_tx::crashtest::{CrashMemory, CrashPoint, ExploreStats, Explorer};
use pmlab_tx::{Allocator, Fault, Protocol};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MEM: usize = 16384;
const SLOTS: u64 = 0;
const NSLOTS: u64 = 12;
const HEAP: u64 = 1024;
const HEAP_LEN: u64 = 8192;
const UNIT: u64 = 64;

fn slots() -> Vec<u64> {
    (0..NSLOTS).map(|i| SLOTS + 8 * i).collect()
}

/// Slot values recovered from an image; `None` with a reason if recovery or the
/// checker fails.
fn recover(image: &[u8]) -> Result<Vec<u64>, String> {
    let mut m = CrashMemory::from_image(image.to_vec());
    Allocator::open(&mut m, HEAP).map_err(|e| format!("recovery failed: {e}"))?;
    Allocator::check(&mut m, HEAP, &slots()).map_err(|e| format!("checker: {e}"))?;
    Ok(slots().iter().map(|&s| m.read_u64(s).unwrap()).collect())
}

fn explore(protocol: Protocol, seed: u64, ops: usize) -> (ExploreStats, u64, Option<String>) {
    // Oracle: slot values after each completed operation, filled in as the run goes;
    // a crash during operation i must leave history[i] or history[i + 1].
    let history = RefCell::new(vec![vec![0u64; NSLOTS as usize]]);
    let bad = RefCell::new((0u64, None::<String>));
    let pending = RefCell::new(Vec::<(CrashPoint, Vec<u64>)>::new());
    let mut m = CrashMemory::new(MEM);
    let mut a = Allocator::format(&mut m, HEAP, HEAP_LEN, UNIT)
        .unwrap()
        .with_protocol(protocol);
    let phase = m.tag_handle();
    m.explore(
        Explorer {
            seed,
            ..Explorer::default()
        },
        |p, img| match recover(img) {
            Ok(s) => pending.borrow_mut().push((p, s)),
            Err(e) => {
                let mut b = bad.borrow_mut();
                b.0 += 1;
                b.1.get_or_insert(format!("point {} (op {}): {e}", p.index, p.tag));
            }
        },
    );
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for op in 0..ops {
        phase.set(op as u64 + 1);
        let slot = rng.gen_range(0..NSLOTS);
        let addr = SLOTS + 8 * slot;
        let mut after = history.borrow().last().unwrap().clone();
        if after[slot as usize] == 0 {
            match a.alloc_into(&mut m, rng.gen_range(1..=4 * UNIT), addr) {
                Ok(p) => after[slot as usize] = p,
                Err(pmlab_tx::TxError::OutOfSpace { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        } else {
            a.free_from(&mut m, addr).unwrap();
            after[slot as usize] = 0;
        }
        history.borrow_mut().push(after);
    }
    let stats = m.stop_exploring();
    drop(m);
    // Tag t means "operation t - 1 (0-based) in flight": old state history[t - 1].
    let history = history.into_inner();
    let (mut n, mut first) = bad.into_inner();
    for (p, s) in pending.into_inner() {
        let t = p.tag as usize;
        let ok = if t == 0 {
            s == history[0]
        } else {
            s == history[t - 1] || s == history[t]
        };
        if !ok {
            n += 1;
            first.get_or_insert(format!(
                "point {} (op {}): slots are neither before nor after",
                p.index, t
            ));
        }
    }
    (stats, n, first)
}

#[test]
fn allocator_survives_every_crash() {
    for seed in 1..=3 {
        let (stats, bad, first) = explore(Protocol::CORRECT, seed, 150);
        assert_eq!(bad, 0, "seed {seed}: {}", first.unwrap_or_default());
        assert!(stats.points > 6 * 150, "{stats:?}");
        eprintln!("allocator seed {seed}: {stats:?}");
    }
}

#[test]
fn allocator_without_the_intent_fence_is_caught() {
    let (stats, bad, first) = explore(Protocol::broken(Fault::AllocSkipIntentFence), 1, 150);
    assert!(bad > 0, "not caught: {stats:?}");
    eprintln!(
        "AllocSkipIntentFence: {bad} bad images of {}; first: {}",
        stats.images,
        first.unwrap()
    );
}

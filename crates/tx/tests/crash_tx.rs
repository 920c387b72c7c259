//! Crash consistency of redo and undo transactions: random transaction sequences run
//! on the crash explorer; every image at every persist point is recovered and held
//! against an oracle. The deliberately broken protocols must be caught.

use std::cell::RefCell;

use pmlab_tx::crashtest::{CrashMemory, CrashPoint, ExploreStats, Explorer};
use pmlab_tx::{Fault, Protocol, RedoLog, UndoLog};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MEM: usize = 8192;
const LOG: u64 = 0;
const LOG_LEN: u64 = 3072;
const DATA: usize = 4096;
const DATA_LEN: usize = 2048;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Redo,
    Undo,
}

/// One transaction of the workload.
struct Tx {
    writes: Vec<(u64, Vec<u8>)>,
    commits: bool,
}

/// A seeded (xoshiro256++) sequence of transactions and the oracle: the data area
/// after each committed prefix.
fn workload(seed: u64, count: usize) -> (Vec<Tx>, Vec<Vec<u8>>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut state = vec![0u8; DATA_LEN];
    let mut states = vec![state.clone()];
    let mut txs = Vec::new();
    for _ in 0..count {
        let n = rng.gen_range(1..=5);
        let writes: Vec<(u64, Vec<u8>)> = (0..n)
            .map(|_| {
                let len = rng.gen_range(1..=48usize);
                let off = rng.gen_range(0..=DATA_LEN - len);
                let data = (0..len).map(|_| rng.r#gen::<u8>()).collect();
                ((DATA + off) as u64, data)
            })
            .collect();
        let commits = rng.gen_bool(0.85);
        if commits {
            for (a, d) in &writes {
                let o = *a as usize - DATA;
                state[o..o + d.len()].copy_from_slice(d);
            }
            states.push(state.clone());
        }
        txs.push(Tx { writes, commits });
    }
    (txs, states)
}

fn tag(committed: usize, committing: bool) -> u64 {
    committed as u64 * 2 + committing as u64
}

/// Recovers an image (as `protocol` recovers: a broken checksum is checked the same
/// broken way) and says what is wrong with it, if anything.
fn judge(
    kind: Kind,
    protocol: Protocol,
    point: CrashPoint,
    image: &[u8],
    states: &[Vec<u8>],
) -> Option<String> {
    let mut m = CrashMemory::from_image(image.to_vec());
    let recovered = match kind {
        Kind::Redo => RedoLog::open_with_protocol(&mut m, LOG, LOG_LEN, protocol).map(|_| ()),
        Kind::Undo => UndoLog::open(&mut m, LOG, LOG_LEN).map(|_| ()),
    };
    if let Err(e) = recovered {
        return Some(format!("recovery failed: {e}"));
    }
    let data = &m.current()[DATA..DATA + DATA_LEN];
    let k = (point.tag / 2) as usize;
    let committing = point.tag % 2 == 1;
    if data == states[k].as_slice() || (committing && data == states[k + 1].as_slice()) {
        // Recovery must be idempotent: a crash during recovery recovers again.
        let again = m.current().to_vec();
        let mut m2 = CrashMemory::from_image(again);
        let _ = match kind {
            Kind::Redo => RedoLog::open_with_protocol(&mut m2, LOG, LOG_LEN, protocol).map(|_| ()),
            Kind::Undo => UndoLog::open(&mut m2, LOG, LOG_LEN).map(|_| ()),
        };
        if &m2.current()[DATA..DATA + DATA_LEN] != data {
            return Some("a second recovery changed the data".into());
        }
        return None;
    }
    let what = if committing {
        "neither the old nor the new state"
    } else {
        "not the committed state"
    };
    let first_diff = data
        .iter()
        .zip(&states[k])
        .position(|(a, b)| a != b)
        .unwrap_or(0);
    Some(format!(
        "point {} (committed {k}, committing {committing}): data is {what}; first difference from the old state at {:#x}",
        point.index,
        DATA + first_diff
    ))
}

struct Outcome {
    stats: ExploreStats,
    violations: u64,
    first: Option<String>,
}

fn explore(kind: Kind, protocol: Protocol, seed: u64, count: usize) -> Outcome {
    let (txs, states) = workload(seed, count);
    let violations = RefCell::new((0u64, None::<String>));
    let mut m = CrashMemory::new(MEM);
    let phase = m.tag_handle();
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
    m.explore(
        Explorer {
            seed,
            ..Explorer::default()
        },
        |p, img| {
            if let Some(v) = judge(kind, protocol, p, img, &states) {
                let mut vs = violations.borrow_mut();
                vs.0 += 1;
                vs.1.get_or_insert(v);
            }
        },
    );
    let mut committed = 0usize;
    for t in &txs {
        match (&mut redo, &mut undo) {
            (Some(log), _) => {
                let mut tx = log.begin(&mut m);
                for (a, d) in &t.writes {
                    tx.write(*a, d).unwrap();
                }
                if t.commits {
                    phase.set(tag(committed, true));
                    tx.commit().unwrap();
                    committed += 1;
                } else {
                    tx.abort();
                }
            }
            (_, Some(log)) => {
                let mut tx = log.begin(&mut m);
                for (a, d) in &t.writes {
                    tx.write(*a, d).unwrap();
                }
                if t.commits {
                    phase.set(tag(committed, true));
                    tx.commit().unwrap();
                    committed += 1;
                } else {
                    tx.abort().unwrap();
                }
            }
            _ => unreachable!(),
        }
        phase.set(tag(committed, false));
    }
    let stats = m.stop_exploring();
    drop(m);
    let (violations, first) = violations.into_inner();
    Outcome {
        stats,
        violations,
        first,
    }
}

#[test]
fn redo_survives_every_crash() {
    for seed in 1..=3 {
        let o = explore(Kind::Redo, Protocol::CORRECT, seed, 60);
        assert_eq!(
            o.violations,
            0,
            "seed {seed}: {}",
            o.first.unwrap_or_default()
        );
        // Two fences per committed transaction, a point on either side of each.
        assert!(o.stats.points > 150, "{:?}", o.stats);
        eprintln!("redo seed {seed}: {:?}", o.stats);
    }
}

#[test]
fn undo_survives_every_crash() {
    for seed in 1..=3 {
        let o = explore(Kind::Undo, Protocol::CORRECT, seed, 60);
        assert_eq!(
            o.violations,
            0,
            "seed {seed}: {}",
            o.first.unwrap_or_default()
        );
        assert!(o.stats.points > 450, "{:?}", o.stats);
        eprintln!("undo seed {seed}: {:?}", o.stats);
    }
}

fn assert_caught(kind: Kind, fault: Fault) {
    let o = explore(kind, Protocol::broken(fault), 1, 60);
    assert!(o.violations > 0, "{fault:?} was not caught ({:?})", o.stats);
    eprintln!(
        "{fault:?}: {} bad images of {}; first: {}",
        o.violations,
        o.stats.images,
        o.first.unwrap()
    );
}

#[test]
fn redo_without_the_log_fence_is_caught() {
    assert_caught(Kind::Redo, Fault::RedoSkipLogFence);
}

/// Without the apply fence, the next transaction's log can become durable while this
/// one's in-place writes are still in flight: neither log vouches for them any more.
#[test]
fn redo_without_the_apply_fence_is_caught() {
    assert_caught(Kind::Redo, Fault::RedoSkipApplyFence);
}

/// With a checksum over the header alone, a header durable before its body replays
/// stale body lines.
#[test]
fn redo_with_a_header_only_checksum_is_caught() {
    assert_caught(Kind::Redo, Fault::RedoHeaderOnlyChecksum);
}

#[test]
fn undo_without_the_snapshot_fence_is_caught() {
    assert_caught(Kind::Undo, Fault::UndoSkipSnapshotFence);
}

#[test]
fn undo_without_the_data_fence_is_caught() {
    assert_caught(Kind::Undo, Fault::UndoSkipDataFence);
}

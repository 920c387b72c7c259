//! Exact flush and fence counts per transaction: the figures the hardware protocols
//! are compared with.

use pmlab_spine::{Memory, PersistCounters, VecMemory};
use pmlab_tx::{Allocator, RedoLog, UndoLog};

fn delta(m: &VecMemory, before: PersistCounters) -> (u64, u64) {
    let c = m.persist_counters();
    (c.flushes - before.flushes, c.fences - before.fences)
}

#[test]
fn redo_commit_costs_two_fences() {
    let mut m = VecMemory::new(64 * 1024);
    let mut log = RedoLog::format(&mut m, 0, 4096).unwrap();
    // One 8-byte write: log header line + one body line (a 24-byte record fits in the
    // second line), one data line.
    let c0 = m.persist_counters();
    let mut tx = log.begin(&mut m);
    tx.write_u64(8192, 1).unwrap();
    tx.commit().unwrap();
    assert_eq!(delta(&m, c0), (3, 2));
    // Four writes in four lines: 64 + 4 * 24 = 160 log bytes = 3 lines, 4 data lines.
    let c0 = m.persist_counters();
    let mut tx = log.begin(&mut m);
    for i in 0..4 {
        tx.write_u64(8192 + 64 * i, i).unwrap();
    }
    assert_eq!(
        tx.read_u64(8192 + 64).unwrap(),
        1,
        "reads see the transaction's writes"
    );
    tx.commit().unwrap();
    assert_eq!(delta(&m, c0), (7, 2));
    assert_eq!(m.read_u64(8192 + 192).unwrap(), 3);
    // Read-only and aborted transactions cost nothing.
    let c0 = m.persist_counters();
    let mut tx = log.begin(&mut m);
    assert_eq!(tx.read_u64(8192).unwrap(), 0);
    tx.commit().unwrap();
    let mut tx = log.begin(&mut m);
    tx.write_u64(8192, 99).unwrap();
    tx.abort();
    assert_eq!(delta(&m, c0), (0, 0));
    assert_eq!(m.read_u64(8192).unwrap(), 0);
}

#[test]
fn undo_small_transaction_costs_three_fences_like_pmdk() {
    let mut m = VecMemory::new(64 * 1024);
    let mut log = UndoLog::format(&mut m, 0, 4096).unwrap();
    let c0 = m.persist_counters();
    let mut tx = log.begin(&mut m);
    tx.write_u64(8192, 5).unwrap();
    tx.write_u64(8192, 6).unwrap(); // same range: already logged, no fence
    tx.commit().unwrap();
    // record line + fence; data line + fence; commit mark line + fence.
    assert_eq!(delta(&m, c0), (3, 3));
    assert_eq!(m.read_u64(8192).unwrap(), 6);

    // k separately logged ranges: k + 2 fences; snapshotting them together: 3.
    let c0 = m.persist_counters();
    let mut tx = log.begin(&mut m);
    for i in 0..3 {
        tx.write_u64(8192 + 64 * i, 7).unwrap();
    }
    tx.commit().unwrap();
    assert_eq!(delta(&m, c0).1, 5);
    let c0 = m.persist_counters();
    let mut tx = log.begin(&mut m);
    tx.snapshot(&[(8192, 8), (8256, 8), (8320, 8)]).unwrap();
    for i in 0..3 {
        tx.write_u64(8192 + 64 * i, 8).unwrap();
    }
    tx.commit().unwrap();
    // 3 records of 40 bytes from offset 64: 120 bytes over 2 lines; 3 data lines; 1 mark.
    assert_eq!(delta(&m, c0), (6, 3));

    // Abort: snapshot fence, then roll back + fence, mark + fence.
    let c0 = m.persist_counters();
    let mut tx = log.begin(&mut m);
    tx.write_u64(8192, 100).unwrap();
    tx.abort().unwrap();
    assert_eq!(delta(&m, c0).1, 3);
    assert_eq!(m.read_u64(8192).unwrap(), 8);
    // Dropping an uncommitted transaction aborts it.
    {
        let mut tx = log.begin(&mut m);
        tx.write_u64(8192, 101).unwrap();
    }
    assert_eq!(m.read_u64(8192).unwrap(), 8);
}

#[test]
fn allocation_and_free_cost_three_fences_each() {
    let mut m = VecMemory::new(64 * 1024);
    let mut a = Allocator::format(&mut m, 4096, 32 * 1024, 64).unwrap();
    let slot = 0;
    let c0 = m.persist_counters();
    let p = a.alloc_into(&mut m, 100, slot).unwrap();
    // intent line; state word line + slot line; intent clear line.
    assert_eq!(delta(&m, c0), (4, 3));
    assert_eq!(m.read_u64(slot).unwrap(), p);
    let c0 = m.persist_counters();
    a.free_from(&mut m, slot).unwrap();
    assert_eq!(delta(&m, c0), (4, 3));
    assert_eq!(m.read_u64(slot).unwrap(), 0);
    assert!(a.free_from(&mut m, slot).is_err(), "double free is refused");
}

//! The transactions and the allocator run unchanged on a real mapped region (a memfd
//! with real `clwb`/`clflushopt`/`clflush` + `sfence`), and cost the same flushes and
//! fences there as on the reference memory.

use pmlab_native::Region;
use pmlab_spine::{Memory, PersistCounters, VecMemory};
use pmlab_tx::{Allocator, RedoLog, UndoLog};

/// A fixed mix of work; returns the persist counters it cost.
fn work<M: Memory>(m: &mut M) -> PersistCounters {
    let mut redo = RedoLog::format(m, 0, 4096).unwrap();
    let mut undo = UndoLog::format(m, 4096, 4096).unwrap();
    let mut alloc = Allocator::format(m, 16384, 65536, 64).unwrap();
    let c0 = m.persist_counters();
    for i in 0..10u64 {
        let mut tx = redo.begin(m);
        tx.write_u64(8192 + 64 * i, i).unwrap();
        tx.write(8192 + 64 * i + 8, b"redo").unwrap();
        tx.commit().unwrap();
        let mut tx = undo.begin(m);
        tx.write_u64(12288 + 64 * i, i * 7).unwrap();
        tx.commit().unwrap();
        alloc.alloc_into(m, 100 + i, 8192 + 64 * i + 32).unwrap();
    }
    let c = m.persist_counters();
    PersistCounters {
        flushes: c.flushes - c0.flushes,
        fences: c.fences - c0.fences,
    }
}

#[test]
fn same_results_and_costs_on_a_memfd_region() {
    let mut region = Region::create_memfd("tx", 1 << 20).unwrap();
    let mut reference = VecMemory::new(region.size() as usize);
    let on_region = work(&mut region);
    let on_reference = work(&mut reference);
    assert_eq!(on_region, on_reference);
    // 10 × (redo 2 + undo 3 + alloc 3) fences.
    assert_eq!(on_region.fences, 80);
    assert_eq!(&region.data()[..81920], &reference.bytes()[..81920]);
    eprintln!("persist mode {}: {on_region:?}", region.persist_mode());

    // Recovery on the region finds nothing to do, and the checker agrees.
    let slots: Vec<u64> = (0..10).map(|i| 8192 + 64 * i + 32).collect();
    let (_, rec) = RedoLog::open(&mut region, 0, 4096).unwrap();
    assert_eq!(
        rec.replayed_records, 2,
        "the last redo log is replayed, idempotently"
    );
    let (_, rec) = UndoLog::open(&mut region, 4096, 4096).unwrap();
    assert_eq!(rec.rolled_back_seq, None);
    let report = Allocator::check(&mut region, 16384, &slots).unwrap();
    assert_eq!(report.extents, 10);
}

//! The persistence domain, tested directly: what a crash keeps and what it loses.

use pmlab_model::{ChaosConfig, DeviceConfig, Machine, MachineConfig};
use pmlab_spine::{FlushKind, Memory};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

const MIB: u64 = 1 << 20;

fn u64_at(image: &[u8], addr: u64) -> u64 {
    let a = addr as usize;
    u64::from_le_bytes(image[a..a + 8].try_into().unwrap())
}

#[test]
fn an_unflushed_store_is_lost() {
    let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    m.write_u64(4096, 42).unwrap();
    assert_eq!(m.read_u64(4096).unwrap(), 42);
    assert_eq!(u64_at(&m.crash(), 4096), 0);
    assert_eq!(u64_at(m.current_image(), 4096), 42);
}

#[test]
fn an_evicted_store_survives_without_a_flush() {
    // Two lines of cache: touching three other lines evicts the stored one.
    let mut m = Machine::new(MachineConfig::tiny(MIB, 2)).unwrap();
    m.write_u64(0, 7).unwrap();
    assert_eq!(u64_at(&m.crash(), 0), 0, "still only in the cache");
    for line in 1..=3 {
        m.read_u64(line * 64).unwrap();
    }
    assert_eq!(u64_at(&m.crash(), 0), 7, "eviction wrote it back");
    assert_eq!(m.stats().eviction_writes, 1);
    assert_eq!(m.device().line_writes(0), 1);
}

#[test]
fn flushed_and_fenced_stores_always_survive() {
    for kind in [FlushKind::Clflush, FlushKind::Clflushopt, FlushKind::Clwb] {
        let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
        m.write(100, &[5; 100]).unwrap();
        m.flush(100, 100, kind).unwrap();
        m.fence();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for image in [m.crash(), m.crash_with(&mut rng)] {
            assert_eq!(&image[100..200], &[5; 100], "{kind:?}");
        }
        assert_eq!(m.persist_counters().flushes, 3);
        assert_eq!(m.persist_counters().fences, 1);
    }
}

#[test]
fn clflush_is_ordered_without_a_fence() {
    let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    m.write_u64(0, 3).unwrap();
    m.flush(0, 8, FlushKind::Clflush).unwrap();
    assert_eq!(u64_at(&m.crash(), 0), 3);
    assert!(m.pending_flushes().is_empty());
}

#[test]
fn a_clwb_without_fence_may_be_lost() {
    for kind in [FlushKind::Clwb, FlushKind::Clflushopt] {
        let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
        m.write_u64(0, 9).unwrap();
        m.flush(0, 8, kind).unwrap();
        assert_eq!(m.pending_flushes().len(), 1);
        assert_eq!(
            u64_at(&m.crash(), 0),
            0,
            "crash() leaves pending flushes out"
        );
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let outcomes: Vec<u64> = (0..64)
            .map(|_| u64_at(&m.crash_with(&mut rng), 0))
            .collect();
        assert!(outcomes.contains(&0) && outcomes.contains(&9), "{kind:?}");
        m.fence();
        assert_eq!(u64_at(&m.crash(), 0), 9);
    }
}

#[test]
fn a_store_after_clwb_is_not_covered_by_it() {
    let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    m.write_u64(0, 1).unwrap();
    m.flush(0, 8, FlushKind::Clwb).unwrap();
    m.write_u64(0, 2).unwrap();
    m.fence();
    assert_eq!(u64_at(&m.crash(), 0), 1, "the flush carried the old value");
    assert_eq!(m.dirty_lines(), 1);
}

#[test]
fn chaos_makes_some_unflushed_stores_durable() {
    let mut survived = 0;
    let mut lost = 0;
    for seed in 0..50 {
        let mut cfg = MachineConfig::loc(MIB);
        cfg.chaos = Some(ChaosConfig {
            seed,
            probability: 0.2,
        });
        let mut m = Machine::new(cfg).unwrap();
        for i in 0..8 {
            m.write_u64(i * 64, i + 1).unwrap();
        }
        let image = m.crash();
        for i in 0..8 {
            match u64_at(&image, i * 64) {
                0 => lost += 1,
                v => {
                    assert_eq!(v, i + 1);
                    survived += 1;
                }
            }
        }
    }
    assert!(survived > 0 && lost > 0, "survived {survived}, lost {lost}");
}

#[test]
fn chaos_is_deterministic_per_seed() {
    let run = |seed| {
        let mut cfg = MachineConfig::loc(MIB);
        cfg.chaos = Some(ChaosConfig {
            seed,
            probability: 0.5,
        });
        let mut m = Machine::new(cfg).unwrap();
        for i in 0..32 {
            m.write_u64(i * 64, i + 1).unwrap();
        }
        m.crash()
    };
    assert_eq!(run(3), run(3));
}

#[test]
fn persist_all_makes_durable_equal_current() {
    let mut m = Machine::new(MachineConfig::tiny(MIB, 4)).unwrap();
    for i in 0..100u64 {
        m.write_u64((i * 1000) % (MIB - 8), i).unwrap();
    }
    m.persist_all();
    assert_eq!(m.crash(), m.current_image());
    assert_eq!(m.dirty_lines(), 0);
}

#[test]
fn without_caches_every_store_is_durable() {
    let mut cfg = MachineConfig::loc(MIB);
    cfg.caches.clear();
    let mut m = Machine::new(cfg).unwrap();
    m.write(10, &[1, 2, 3]).unwrap();
    assert_eq!(&m.crash()[10..13], &[1, 2, 3]);
}

#[test]
fn a_crashed_image_boots_a_new_machine() {
    let mut m = Machine::new(MachineConfig::loc_with(MIB, DeviceConfig::pcm())).unwrap();
    m.write_u64(64, 77).unwrap();
    m.persist(64, 8).unwrap();
    let mut r = Machine::with_image(m.config().clone(), m.crash()).unwrap();
    assert_eq!(r.read_u64(64).unwrap(), 77);
}

#[test]
fn non_temporal_stores_bypass_the_caches_and_wait_for_a_fence() {
    let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    m.write_u64(0, 1).unwrap(); // line 0 dirty in L1
    m.write_nt(8, &2u64.to_le_bytes()).unwrap();
    // The dirty line was written back before the streaming store passed it.
    assert_eq!(u64_at(&m.crash(), 0), 1);
    assert_eq!(u64_at(&m.crash(), 8), 0, "pending until the fence");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let seen: Vec<u64> = (0..32)
        .map(|_| u64_at(&m.crash_with(&mut rng), 8))
        .collect();
    assert!(seen.contains(&0) && seen.contains(&2));
    m.fence();
    assert_eq!(u64_at(&m.crash(), 8), 2);
    assert_eq!(m.read_u64(8).unwrap(), 2);
    let s = m.stats();
    assert_eq!(s.nt_stores, 1);
    assert_eq!(*s.served.last().unwrap(), 2, "the line left the caches");
    m.persist_all();
    assert_eq!(m.crash(), m.current_image());
}

#[test]
fn write_through_caches_make_every_store_durable() {
    let mut cfg = MachineConfig::loc(MIB);
    for c in &mut cfg.caches {
        c.write_back = false;
        c.write_allocate = false;
    }
    let mut m = Machine::new(cfg).unwrap();
    m.write_u64(128, 5).unwrap();
    m.write(1000, &[7; 100]).unwrap();
    assert_eq!(u64_at(&m.crash(), 128), 5);
    assert_eq!(&m.crash()[1000..1100], &[7; 100]);
    assert_eq!(m.dirty_lines(), 0);
}

#[test]
fn a_write_back_l1_over_write_through_levels_holds_stores_until_eviction() {
    let mut cfg = MachineConfig::loc(MIB);
    cfg.caches[1].write_back = false;
    cfg.caches[2].write_back = false;
    let mut m = Machine::new(cfg).unwrap();
    m.write_u64(0, 5).unwrap();
    assert_eq!(u64_at(&m.crash(), 0), 0, "dirty in the write-back L1");
    m.flush(0, 8, FlushKind::Clflush).unwrap();
    assert_eq!(u64_at(&m.crash(), 0), 5);
}

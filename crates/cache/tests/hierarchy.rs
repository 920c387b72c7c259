//! Behaviour of the hierarchy API the machine model builds on.

mod support;

use pmlab_cache::{CacheConfig, Hierarchy, HierarchyConfig, Level, MultiL2, Replacement};
use pmlab_trace::Kind;

fn two_level(l1: CacheConfig, l2: CacheConfig) -> Hierarchy {
    Hierarchy::new(
        &HierarchyConfig {
            levels: vec![Level::Unified(l1), Level::Unified(l2)],
        },
        7,
    )
    .expect("valid")
}

#[test]
fn access_reports_the_deepest_level_that_served() {
    let mut h = two_level(CacheConfig::new(1024, 32), CacheConfig::new(64 * 1024, 64));
    assert_eq!(h.access(Kind::Read, 0x1000, 8), 2, "cold: memory");
    assert_eq!(h.access(Kind::Read, 0x1008, 8), 0, "same block: level 1");
    // 0x1400 maps to the same level-1 set and evicts 0x1000; level 2 still has it.
    assert_eq!(h.access(Kind::Read, 0x1400, 8), 2);
    assert_eq!(
        h.access(Kind::Read, 0x1000, 8),
        1,
        "level-1 miss, level-2 hit"
    );
    // Spanning two blocks, one in level 2 (fetched with 0x1000's 64-byte block) and
    // one nowhere: memory.
    assert_eq!(h.access(Kind::Read, 0x103c, 8), 2);
    assert_eq!(
        h.access(Kind::Read, 0x1038, 8),
        0,
        "both blocks now in level 1"
    );
}

#[test]
fn memory_write_log_sees_write_backs_and_write_throughs() {
    let mut h = two_level(CacheConfig::new(1024, 32), CacheConfig::new(4096, 64));
    h.set_memory_write_log(true);
    h.access(Kind::Write, 0x0, 4);
    // Evict the dirty block from level 1 into level 2, then from level 2 to memory.
    h.access(Kind::Read, 0x400, 4);
    h.access(Kind::Read, 0x1000, 4);
    let mut log = Vec::new();
    h.drain_memory_writes(&mut log);
    assert_eq!(log, vec![(0x0, 64)], "level 2's block goes to memory");

    let mut wt = CacheConfig::new(1024, 32);
    wt.write_back = false;
    wt.write_allocate = false;
    let mut h = Hierarchy::new(
        &HierarchyConfig {
            levels: vec![Level::Unified(wt)],
        },
        1,
    )
    .unwrap();
    h.set_memory_write_log(true);
    assert_eq!(h.access(Kind::Write, 0x123, 2), 1);
    let mut log = Vec::new();
    h.drain_memory_writes(&mut log);
    assert_eq!(log, vec![(0x123, 2)]);
    assert_eq!(h.stats()[0].stats.misses.write, 1);
    assert_eq!(
        h.access(Kind::Read, 0x123, 2),
        1,
        "no-write-allocate left it out"
    );
}

#[test]
fn flush_block_writes_back_through_every_level() {
    let mut h = two_level(CacheConfig::new(1024, 32), CacheConfig::new(4096, 64));
    h.set_memory_write_log(true);
    h.access(Kind::Write, 0x40, 8);
    h.flush_block(0x44, false); // clwb: written back, kept
    let mut log = Vec::new();
    h.drain_memory_writes(&mut log);
    assert_eq!(log, vec![(0x40, 64)]);
    let s = h.stats();
    assert_eq!(s[0].stats.flush_writebacks, 1);
    assert_eq!(s[1].stats.flush_writebacks, 1);
    assert_eq!(s[0].stats.writebacks, 0);
    assert_eq!(h.access(Kind::Read, 0x40, 8), 0, "clwb keeps the block");
    h.flush_block(0x40, false);
    h.drain_memory_writes(&mut log);
    assert!(log.len() == 1, "a clean block is not written again");
    h.flush_block(0x40, true); // clflush: invalidated everywhere
    assert_eq!(h.stats()[0].stats.flush_invalidations, 1);
    assert_eq!(h.access(Kind::Read, 0x40, 8), 2);
}

fn two_way(repl: Replacement) -> Hierarchy {
    let mut c = CacheConfig::new(64, 16);
    c.assoc = 2; // two sets of two ways
    c.repl = repl;
    Hierarchy::new(
        &HierarchyConfig {
            levels: vec![Level::Unified(c)],
        },
        3,
    )
    .unwrap()
}

#[test]
fn lru_fifo_and_plru_pick_their_victims() {
    // A, B, A, C in one set; then A again: LRU evicted B (A hits), FIFO evicted A.
    let seq = [0x00u64, 0x20, 0x00, 0x40];
    for (repl, a_hits) in [
        (Replacement::Lru, true),
        (Replacement::Fifo, false),
        (Replacement::TreePlru, true),
    ] {
        let mut h = two_way(repl);
        for a in seq {
            h.access(Kind::Read, a, 4);
        }
        assert_eq!(h.access(Kind::Read, 0x00, 4) == 0, a_hits, "{repl:?}");
    }
}

#[test]
fn random_replacement_is_reproducible_per_seed() {
    let run = |seed| {
        let mut c = CacheConfig::new(1024, 32);
        c.assoc = 4;
        c.repl = Replacement::Random;
        let mut h = Hierarchy::new(
            &HierarchyConfig {
                levels: vec![Level::Unified(c)],
            },
            seed,
        )
        .unwrap();
        for i in 0..20_000u64 {
            h.access(Kind::Read, (i * 7919 % 48) * 32, 4);
        }
        h.stats()[0].stats.misses.read
    };
    assert_eq!(run(1), run(1));
    assert_ne!((run(1), run(2), run(3)), (run(1), run(1), run(1)));
}

/// Kessler & Hill's L1s, and their Table 1's nine level-2 caches.
pub fn kh_upper() -> HierarchyConfig {
    HierarchyConfig {
        levels: vec![Level::Split {
            instr: CacheConfig::new(32 << 10, 32),
            data: CacheConfig::new(32 << 10, 32),
        }],
    }
}

pub fn kh_lowers() -> Vec<HierarchyConfig> {
    let mut v = Vec::new();
    for size in [1u64 << 20, 4 << 20, 16 << 20] {
        for assoc in [1, 2, 4] {
            let mut c = CacheConfig::new(size, 128);
            c.assoc = assoc;
            c.repl = Replacement::Random;
            v.push(HierarchyConfig {
                levels: vec![Level::Unified(c)],
            });
        }
    }
    v
}

#[test]
fn one_pass_equals_separate_runs() {
    let refs = support::load_trace("xz");
    let refs = &refs[..1_500_000];
    let mut multi = MultiL2::new(&kh_upper(), &kh_lowers(), 11).unwrap();
    for chunk in refs.chunks(4096) {
        multi.run(chunk);
    }
    multi.finish();
    for (i, lower) in kh_lowers().iter().enumerate() {
        let mut whole = kh_upper();
        whole.levels.extend(lower.levels.iter().copied());
        let mut h = Hierarchy::new(&whole, 11).unwrap();
        h.run(refs);
        h.finish();
        assert_eq!(multi.stats(i), h.stats(), "alternative {i}");
        assert!(h.stats()[2].stats.misses.total() > 0);
    }
}

/// A small-footprint random trace: every kind, sizes of 0 to 80 bytes (so references
/// span one, two or three 32-byte blocks), addresses that hit and miss.
fn mixed_refs(n: usize, seed: u64) -> Vec<pmlab_trace::Ref> {
    use rand::{RngCore, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let x = rng.next_u64();
            pmlab_trace::Ref {
                addr: (x >> 20) % (24 << 10),
                size: (x % 81) as u32,
                kind: Kind::ALL[((x >> 8) % 4) as usize],
                asid: 0,
            }
        })
        .collect()
}

#[test]
fn batch_runs_count_as_one_reference_at_a_time() {
    // The batch path takes level-1 hits in a loop of its own; a reference at a time
    // goes through `access`. Every configuration the hit loop treats differently:
    // split and unified, direct-mapped and LRU, write-back and write-through, and one
    // it must leave alone (tree-PLRU, miss classification).
    let dm = CacheConfig::new(4 << 10, 32);
    let mut lru = CacheConfig::new(8 << 10, 32);
    lru.assoc = 4;
    let mut through = dm;
    through.write_back = false;
    through.write_allocate = false;
    let mut plru = lru;
    plru.repl = Replacement::TreePlru;
    let mut ccc = dm;
    ccc.ccc = true;
    let mut odd = CacheConfig::new(8 << 10, 64);
    odd.assoc = 2;
    let l2 = Level::Unified(CacheConfig::new(64 << 10, 64));
    let configs = [
        vec![
            Level::Split {
                instr: dm,
                data: dm,
            },
            l2,
        ],
        vec![Level::Unified(dm), l2],
        vec![Level::Unified(lru)],
        vec![
            Level::Split {
                instr: lru,
                data: through,
            },
            l2,
        ],
        vec![
            Level::Split {
                instr: dm,
                data: odd,
            },
            l2,
        ],
        vec![Level::Unified(plru)],
        vec![Level::Split {
            instr: ccc,
            data: dm,
        }],
    ];
    let refs = mixed_refs(200_000, 5);
    for levels in configs {
        let cfg = HierarchyConfig { levels };
        let mut batch = Hierarchy::new(&cfg, 3).unwrap();
        for chunk in refs.chunks(1000) {
            batch.run(chunk);
        }
        batch.finish();
        let mut single = Hierarchy::new(&cfg, 3).unwrap();
        for r in &refs {
            single.access(r.kind, r.addr, r.size);
        }
        single.finish();
        assert_eq!(batch.stats(), single.stats(), "{cfg:?}");
        let l1 = &batch.stats()[0].stats;
        assert!(l1.multi_block_refs > 0 && l1.misses.total() > 0, "{cfg:?}");
    }
}

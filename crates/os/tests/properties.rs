//! Property tests of the paper's claims about its heuristics, each under the condition
//! the paper states or implies.

use pmlab_os::policy::traverse;
use pmlab_os::{BinTree, CacheGeometry, Os, OsConfig, PageSize, PolicyKind, conflicts_of};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

const PAGE: PageSize = PageSize::KIB_4;

fn geometry(bins: u32, assoc: u32) -> CacheGeometry {
    CacheGeometry::new(
        u64::from(bins) * u64::from(assoc) * PAGE.bytes(),
        assoc,
        PAGE,
    )
    .unwrap()
}

/// A workload: `(asid, vpn, exit)` in order; with `exit` set the process exits instead.
fn workload() -> impl Strategy<Value = Vec<(u16, u64, bool)>> {
    // Three processes, working sets of 48 pages, rare exits.
    prop::collection::vec((1u16..4, 0u64..48, prop::bool::weighted(0.01)), 1..300)
}

struct Run {
    os: Os,
    /// Some mapping found a bin of the target cache without an available frame.
    bin_ran_dry: bool,
}

fn run(
    kind: PolicyKind,
    bins: u32,
    frames: u32,
    pool: u32,
    seed: u64,
    ops: &[(u16, u64, bool)],
) -> Run {
    let config = OsConfig {
        frames,
        pool_frames: pool,
        page_size: PAGE,
        seed,
    };
    let mut os = Os::new(config, kind.build(geometry(bins, 1), seed ^ 0x5eed)).unwrap();
    let mut bin_ran_dry = false;
    for &(asid, vpn, exit) in ops {
        if exit {
            os.exit(asid);
            continue;
        }
        if os.translate(asid, vpn).is_none() {
            let pool = os.memory().pool();
            // The policy's pool is indexed by its bins; the random policy's by one bin,
            // so look at the frames themselves.
            let mut seen = vec![false; bins as usize];
            for i in 0..pool.len() {
                seen[(pool.nth(i) & (bins - 1)) as usize] = true;
            }
            bin_ran_dry |= seen.contains(&false);
        }
        os.touch(asid, vpn);
    }
    Run { os, bin_ran_dry }
}

/// Mapping conflicts `C - C_min` of every live address space in a direct-mapped cache of
/// `bins` bins.
fn mapping_conflicts(os: &Os, bins: u32) -> Vec<u64> {
    let g = geometry(bins, 1);
    os.address_spaces()
        .iter()
        .map(|s| conflicts_of(s.frames(), &g).mapping_conflicts())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Section 3.2.4 / Figure 8: "in eliminating conflicts in a cache with more bins,
    /// conflicts are automatically eliminated in caches with less bins". The traversal
    /// decides bit d of the frame number at depth d by rule (2) (fewest pages used), so
    /// each address space's used counts stay balanced at every level of the tree — as
    /// long as rule (1) never forces a decision, i.e. the pool offers a frame in every
    /// bin, and no page of the space is evicted (memory is large enough here). Under
    /// those conditions: conflict-free for B (C = C_min) implies conflict-free for B/2,
    /// B/4, ..., 1; in fact it holds at every level.
    #[test]
    fn hierarchical_is_cache_size_independent(
        ops in workload(),
        log_bins in 1u32..6,
        seed in any::<u64>(),
    ) {
        let bins = 1u32 << log_bins;
        // No evictions: 3 processes x 48 pages fit above the pool.
        let r = run(PolicyKind::Hierarchical, bins, 4096, 16 * bins, seed, &ops);
        prop_assume!(!r.bin_ran_dry);
        prop_assert_eq!(r.os.counters().evictions, 0);
        let mut b = bins;
        let top = mapping_conflicts(&r.os, bins);
        prop_assert!(top.iter().all(|&c| c == 0), "B = {}: {:?}", bins, top);
        while b > 1 {
            b /= 2;
            let smaller = mapping_conflicts(&r.os, b);
            prop_assert!(smaller.iter().all(|&c| c == 0), "conflict-free for {} bins but not for {}: {:?}", bins, b, smaller);
        }
    }

    /// Section 3.2.3: rule (2) picks a bin with the fewest pages of this address space
    /// among bins with a free frame. When every bin offers a frame, that is a global
    /// minimum, so the used counts never differ by more than one and C = C_min: the
    /// Sequential Heuristic never has mapping conflicts, hence never more than random
    /// placement on any pool. (Same conditions as above: no bin runs dry, no evictions.)
    #[test]
    fn sequential_has_no_mapping_conflicts_when_every_bin_offers_a_frame(
        ops in workload(),
        log_bins in 1u32..7,
        seed in any::<u64>(),
    ) {
        let bins = 1u32 << log_bins;
        let r = run(PolicyKind::Sequential, bins, 4096, 16 * bins, seed, &ops);
        prop_assume!(!r.bin_ran_dry);
        let c = mapping_conflicts(&r.os, bins);
        prop_assert!(c.iter().all(|&c| c == 0), "{:?}", c);
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// With a small pool bins do run dry. For one address space without evictions the
    /// frames entering the pool are the same whatever the policy takes (the frame above
    /// the pool joins it when any pool frame leaves), so Sequential and random placement
    /// choose from the same offers. The paper states no per-instance claim here (its
    /// evidence, Table 3, is statistical); this checks the natural one, that on such a
    /// shared pool Sequential's greedy choice never ends with more mapping conflicts
    /// than random's. It is an empirical property (no proof is offered), checked on
    /// 1000 random cases per run.
    #[test]
    fn sequential_never_worse_than_random_on_the_same_pool(
        pages in prop::collection::vec(0u64..200, 1..200),
        log_bins in 1u32..6,
        pool in 1u32..24,
        seed in any::<u64>(),
    ) {
        let bins = 1u32 << log_bins;
        let ops: Vec<_> = pages.iter().map(|&v| (1u16, v, false)).collect();
        let seq = run(PolicyKind::Sequential, bins, 512, pool, seed, &ops);
        let rnd = run(PolicyKind::Random, bins, 512, pool, seed, &ops);
        prop_assert_eq!(seq.os.counters().evictions, 0);
        let (s, r) = (mapping_conflicts(&seq.os, bins)[0], mapping_conflicts(&rnd.os, bins)[0]);
        prop_assert!(s <= r, "sequential {} > random {}", s, r);
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The OS invariants under arbitrary workloads, every policy, with memory pressure.
    #[test]
    fn os_invariants_hold(ops in workload(), kind in prop::sample::select(PolicyKind::ALL.to_vec()), seed in any::<u64>()) {
        let config = OsConfig { frames: 40, pool_frames: 6, page_size: PAGE, seed };
        let mut os = Os::new(config, kind.build(geometry(8, 1), seed)).unwrap();
        for &(asid, vpn, exit) in &ops {
            if exit { os.exit(asid); } else { os.touch(asid, vpn); }
            prop_assert!(os.check().is_ok(), "{:?}", os.check());
        }
    }
}

/// With several address spaces and a small pool there is no per-instance guarantee: one
/// process's choices change what the next is offered. The paper's evidence (Table 3:
/// Sequential best with a small pool) is statistical, so this compares the means over
/// many seeded runs.
#[test]
fn sequential_beats_random_in_expectation_with_many_processes() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(77);
    let (mut seq_total, mut rnd_total) = (0u64, 0u64);
    for seed in 0..200u64 {
        let ops: Vec<(u16, u64, bool)> = (0..400)
            .map(|_| {
                use rand::Rng;
                (
                    rng.gen_range(1..5),
                    rng.gen_range(0..40),
                    rng.gen_bool(0.005),
                )
            })
            .collect();
        seq_total += mapping_conflicts(
            &run(PolicyKind::Sequential, 32, 2048, 16, seed, &ops).os,
            32,
        )
        .iter()
        .sum::<u64>();
        rnd_total += mapping_conflicts(&run(PolicyKind::Random, 32, 2048, 16, seed, &ops).os, 32)
            .iter()
            .sum::<u64>();
    }
    assert!(
        seq_total * 2 < rnd_total,
        "sequential {seq_total} vs random {rnd_total} mapping conflicts over 200 runs"
    );
}

/// The limit of size independence: when rule (1) forces a decision, a mapping can be
/// conflict-free for B bins and not for B/2. Four bins, one page already in bin 0, and
/// the pool offers frames only in bins 0 and 2 (the right subtree, low bit 1, is empty).
#[test]
fn size_independence_needs_a_free_frame_in_every_subtree() {
    let mut used = BinTree::new(4);
    used.add(0);
    let mut free = BinTree::new(4);
    free.add(0);
    free.add(2);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    let bin = traverse(&used, &free, &mut rng);
    assert_eq!(
        bin, 2,
        "rule (1) forces the left subtree, rule (2) then picks bin 2"
    );
    // Pages in bins 0 and 2: no conflict with 4 bins, one avoidable conflict with 2.
    let frames = [0u32, bin];
    assert_eq!(conflicts_of(frames, &geometry(4, 1)).mapping_conflicts(), 0);
    assert_eq!(conflicts_of(frames, &geometry(2, 1)).mapping_conflicts(), 1);
}

//! The OS model end to end: LRU, pool, first touch, eviction, exit, under every policy.

use pmlab_os::{CacheGeometry, Os, OsConfig, PageSize, PolicyKind};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn small_os(kind: PolicyKind, frames: u32, pool: u32, seed: u64) -> Os {
    let geometry = CacheGeometry::new(8 * 4096, 1, PageSize::KIB_4).unwrap(); // 8 bins
    let config = OsConfig {
        frames,
        pool_frames: pool,
        page_size: PageSize::KIB_4,
        seed,
    };
    Os::new(config, kind.build(geometry, seed)).unwrap()
}

#[test]
fn invariants_hold_under_every_policy() {
    for kind in PolicyKind::ALL {
        let mut os = small_os(kind, 64, 9, 5);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        for step in 0..3000 {
            let asid = rng.gen_range(1..5);
            if step % 97 == 96 {
                os.exit(asid);
            } else {
                let vpn = rng.gen_range(0..30);
                let pfn = os.touch(asid, vpn);
                assert_eq!(os.translate(asid, vpn), Some(pfn), "{kind}");
                assert_eq!(
                    os.memory().lru_order()[0],
                    pfn,
                    "{kind}: touched frame is MRU"
                );
            }
            os.check()
                .unwrap_or_else(|e| panic!("{kind} step {step}: {e}"));
        }
        let c = os.counters();
        assert!(
            c.evictions > 0 && c.refaults > 0,
            "{kind}: memory pressure must evict: {c:?}"
        );
        let resident: usize = os.address_spaces().iter().map(|s| s.resident_pages()).sum();
        assert_eq!(
            c.first_touch_faults + c.refaults,
            resident as u64 + c.evictions + c.frames_released,
            "{kind}: every mapping is resident, evicted or released"
        );
    }
}

#[test]
fn taking_an_occupied_frame_unmaps_its_page() {
    // 4 frames, pool of 2: six pages cannot all stay resident.
    let mut os = small_os(PolicyKind::Random, 4, 2, 1);
    for vpn in 0..6 {
        os.touch(1, vpn);
    }
    let resident = (0..6).filter(|&v| os.translate(1, v).is_some()).count() as u64;
    assert!(
        os.take_stale() && !os.take_stale(),
        "evictions make translations stale"
    );
    assert!(resident <= 4);
    assert_eq!(os.counters().evictions, 6 - resident);
    assert_eq!(
        os.address_space(1).unwrap().resident_pages() as u64,
        resident
    );
    let evicted = (0..6).find(|&v| os.translate(1, v).is_none()).unwrap();
    assert!(os.address_space(1).unwrap().was_evicted(evicted));
    os.touch(1, evicted);
    assert_eq!(os.counters().refaults, 1);
}

#[test]
fn exit_releases_frames_to_the_bottom() {
    let mut os = small_os(PolicyKind::Sequential, 32, 4, 3);
    let frames: Vec<u32> = (0..6).map(|v| os.touch(7, v)).collect();
    os.touch(8, 0);
    assert_eq!(os.exit(7), 6);
    assert!(os.address_space(7).is_none());
    let order = os.memory().lru_order();
    // The pool (bottom 4) now consists of the released frames; the highest page's frame
    // is the least recently used.
    assert_eq!(order[order.len() - 1], frames[5]);
    let pool: Vec<u32> = order[order.len() - 4..].to_vec();
    assert_eq!(pool, vec![frames[2], frames[3], frames[4], frames[5]]);
    assert_eq!(os.counters().frames_released, 6);
    os.check().unwrap();
}

#[test]
fn physical_addresses_keep_the_page_offset() {
    let mut os = small_os(PolicyKind::Hierarchical, 16, 4, 9);
    let pa = os.access(3, 0x5123);
    assert_eq!(pa & 0xfff, 0x123);
    assert_eq!(os.physical_address(3, 0x5fff), Some((pa & !0xfff) | 0xfff));
    assert_eq!(os.physical_address(3, 0x6000), None);
    assert_eq!(os.translate(4, 5), None);
}

#[test]
fn page_coloring_matches_bins_when_it_can() {
    let geometry = CacheGeometry::new(8 * 4096, 1, PageSize::KIB_4).unwrap();
    // A pool of the whole memory offers every bin at every mapping.
    let config = OsConfig {
        frames: 128,
        pool_frames: 128,
        page_size: PageSize::KIB_4,
        seed: 2,
    };
    let mut os = Os::new(config, PolicyKind::ColoringExact.build(geometry, 0)).unwrap();
    for vpn in 0..20u64 {
        let pfn = os.touch(1, vpn);
        assert_eq!(u64::from(geometry.bin_of(pfn)), vpn % 8);
    }
}

#[test]
fn bad_configurations_are_errors() {
    assert!(OsConfig::from_bytes(128 << 20, 4 << 20, PageSize::KIB_16, 0).is_ok());
    assert!(OsConfig::from_bytes(128 << 20, 5000, PageSize::KIB_16, 0).is_err());
    assert!(OsConfig::from_bytes(1 << 20, 4 << 20, PageSize::KIB_16, 0).is_err());
    let g = CacheGeometry::new(1 << 20, 1, PageSize::KIB_16).unwrap();
    let bad = OsConfig {
        frames: 8,
        pool_frames: 0,
        page_size: PageSize::KIB_16,
        seed: 0,
    };
    assert!(Os::new(bad, PolicyKind::Random.build(g, 0)).is_err());
}

#[test]
fn careful_policies_beat_random_on_a_multiprogrammed_workload() {
    use pmlab_os::compare::{CompareConfig, run_policy};
    let config = CompareConfig {
        os: OsConfig {
            frames: 2048,
            pool_frames: 64,
            page_size: PageSize::KIB_16,
            seed: 4,
        },
        geometry: CacheGeometry::new(1 << 20, 1, PageSize::KIB_16).unwrap(),
        processes: 4,
        pages: 64,
        quantum: 500,
        lifetime: 3000,
        exits: 60,
        seed: 4,
    };
    let random = run_policy(&config, PolicyKind::Random).unwrap();
    assert_eq!(random.processes, 60);
    for kind in [
        PolicyKind::BinHopping,
        PolicyKind::Sequential,
        PolicyKind::Hierarchical,
    ] {
        let careful = run_policy(&config, kind).unwrap();
        assert!(
            careful.mean_mapping_conflicts * 4.0 < random.mean_mapping_conflicts,
            "{kind}: {careful:?} vs random {random:?}"
        );
    }
}

#[test]
fn bin_hopping_maps_successive_bins_per_process() {
    let geometry = CacheGeometry::new(8 * 4096, 1, PageSize::KIB_4).unwrap();
    let config = OsConfig {
        frames: 128,
        pool_frames: 128,
        page_size: PageSize::KIB_4,
        seed: 6,
    };
    let mut os = Os::new(config, PolicyKind::BinHopping.build(geometry, 6)).unwrap();
    for asid in [1, 2] {
        let bins: Vec<u32> = (0..12)
            .map(|v| geometry.bin_of(os.touch(asid, v * 1000)))
            .collect();
        for w in bins.windows(2) {
            assert_eq!(w[1], (w[0] + 1) % 8, "asid {asid}: {bins:?}");
        }
    }
}

#[test]
fn pid_hashed_coloring_offsets_processes() {
    let geometry = CacheGeometry::new(64 * 4096, 1, PageSize::KIB_4).unwrap();
    let config = OsConfig {
        frames: 1024,
        pool_frames: 1024,
        page_size: PageSize::KIB_4,
        seed: 8,
    };
    let mut os = Os::new(config, PolicyKind::ColoringPidHash.build(geometry, 0)).unwrap();
    // The same virtual page (a stack page, say) of different processes.
    let bins: std::collections::HashSet<u32> = (1..=8)
        .map(|asid| geometry.bin_of(os.touch(asid, 0x7fff)))
        .collect();
    assert!(
        bins.len() >= 6,
        "commonly used pages should spread over bins: {bins:?}"
    );
    // XOR is a bijection of bins: one process's 64 consecutive pages fill all 64 bins.
    let bins: std::collections::HashSet<u32> = (0x9000..0x9040)
        .map(|vpn| geometry.bin_of(os.touch(1, vpn)))
        .collect();
    assert_eq!(bins.len(), 64);
}

#[test]
fn exited_pids_can_return() {
    let mut os = small_os(PolicyKind::Sequential, 64, 8, 12);
    os.touch(1, 5);
    os.touch(2, 5);
    os.exit(1);
    assert_eq!(
        os.translate(1, 5),
        None,
        "an exited process has no translations"
    );
    os.touch(3, 9); // reuses the exited process's slot
    assert!(os.translate(3, 9).is_some());
    assert_eq!(os.translate(1, 5), None);
    os.touch(1, 6);
    assert!(os.translate(1, 6).is_some() && os.translate(2, 5).is_some());
    os.check().unwrap();
}

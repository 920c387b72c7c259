//! Measures the per-reference cost of the OS model: `touch` (translation + exact LRU
//! update, faults included) and side-effect-free `translate`, on a multiprogrammed
//! reference stream with page locality.
//!
//! `cargo run --release -p pmlab-os --example translate_speed`

use std::hint::black_box;
use std::time::Instant;

use pmlab_os::{CacheGeometry, Os, OsConfig, PageSize, PolicyKind};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn main() {
    const REFS: usize = 20_000_000;
    // Four processes of 1500 pages (24 MiB each in 16 KiB pages) in 128 MiB: no pressure.
    // Each reference stays on the previous page of its process with probability 0.9.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut last = [0u64; 4];
    let stream: Vec<(u32, u64)> = (0..REFS)
        .map(|i| {
            let p = (i / 50_000) % 4; // a context switch every 50,000 references
            if rng.gen_bool(0.1) {
                last[p] = rng.gen_range(0..1500);
            }
            (p as u32 + 1, (last[p] << 14) | rng.gen_range(0..1 << 14))
        })
        .collect();
    let geometry = CacheGeometry::new(1 << 20, 1, PageSize::KIB_16).unwrap();
    for kind in [
        PolicyKind::Random,
        PolicyKind::Sequential,
        PolicyKind::Hierarchical,
    ] {
        let mut os = Os::new(OsConfig::paper(7), kind.build(geometry, 7)).unwrap();
        let t = Instant::now();
        let mut sum = 0u64;
        for &(pid, vaddr) in &stream {
            sum = sum.wrapping_add(os.access(pid, vaddr));
        }
        let touch_ns = t.elapsed().as_nanos() as f64 / REFS as f64;
        black_box(sum);
        let t = Instant::now();
        let mut sum = 0u64;
        for &(pid, vaddr) in &stream {
            sum = sum.wrapping_add(os.physical_address(pid, vaddr).unwrap_or(0));
        }
        let translate_ns = t.elapsed().as_nanos() as f64 / REFS as f64;
        black_box(sum);
        println!(
            "{:<13} access (translate + LRU + faults): {touch_ns:5.1} ns/ref   translate only: {translate_ns:5.1} ns/ref   faults: {}",
            kind.name(),
            os.counters().first_touch_faults
        );
    }
}

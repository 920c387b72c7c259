//! Measures the per-reference cost of the OS model: `touch` (translation + exact LRU
//! update, faults included) and side-effect-free `translate`, on a multiprogrammed
//! reference stream with page locality.
//!
//! `cargo run --release -p pmlab-os --example translate_speed`
//!
//! Times are this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), so other load on the
//! machine does not inflate them.

use std::hint::black_box;

use pmlab_os::{CacheGeometry, Os, OsConfig, PageSize, PolicyKind};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A point in this thread's CPU time.
struct Instant(f64);

impl Instant {
    fn now() -> Self {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
        Instant(ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64)
    }

    /// Nanoseconds of CPU time since `self`.
    fn elapsed_ns(&self) -> f64 {
        Instant::now().0 - self.0
    }
}

fn main() {
    const REFS: usize = 20_000_000;
    // Four processes of 1500 pages (24 MiB each in 16 KiB pages) in 128 MiB: no pressure.
    // Each reference stays on the previous page of its process with probability 0.9.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut last = [0u64; 4];
    let stream: Vec<(u16, u64)> = (0..REFS)
        .map(|i| {
            let p = (i / 50_000) % 4; // a context switch every 50,000 references
            if rng.gen_bool(0.1) {
                last[p] = rng.gen_range(0..1500);
            }
            (p as u16 + 1, (last[p] << 14) | rng.gen_range(0..1 << 14))
        })
        .collect();
    let geometry = CacheGeometry::new(1 << 20, 1, PageSize::KIB_16).unwrap();
    // The floor: reading the reference stream itself.
    let t = Instant::now();
    let mut sum = 0u64;
    for &(asid, vaddr) in &stream {
        sum = sum.wrapping_add(u64::from(asid) ^ vaddr);
    }
    black_box(sum);
    println!(
        "stream read only: {:5.1} ns/ref",
        t.elapsed_ns() / REFS as f64
    );
    for kind in [
        PolicyKind::Random,
        PolicyKind::Sequential,
        PolicyKind::Hierarchical,
    ] {
        let mut os = Os::new(OsConfig::paper(7), kind.build(geometry, 7)).unwrap();
        let t = Instant::now();
        let mut sum = 0u64;
        for &(asid, vaddr) in &stream {
            sum = sum.wrapping_add(os.access(asid, vaddr));
        }
        let touch_ns = t.elapsed_ns() / REFS as f64;
        black_box(sum);
        let t = Instant::now();
        let mut sum = 0u64;
        for &(asid, vaddr) in &stream {
            sum = sum.wrapping_add(os.physical_address(asid, vaddr).unwrap_or(0));
        }
        let translate_ns = t.elapsed_ns() / REFS as f64;
        black_box(sum);
        println!(
            "{:<13} access (translate + LRU + faults): {touch_ns:5.1} ns/ref   translate only: {translate_ns:5.1} ns/ref   faults: {}",
            kind.name(),
            os.counters().first_touch_faults
        );
    }
}

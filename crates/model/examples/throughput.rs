//! Simulation speed of the machine: random 8-byte stores and loads, with a persist
//! every 16 stores, on the LOC machine (PCM device).

use std::time::Instant;

use pmlab_model::{DeviceConfig, Machine, MachineConfig};
use pmlab_spine::Memory;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn main() {
    let size = 64u64 << 20;
    let mut m = Machine::new(MachineConfig::loc_with(size, DeviceConfig::pcm())).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let ops = 2_000_000u64;
    let start = Instant::now();
    for i in 0..ops {
        let a = rng.gen_range(0..size / 8) * 8;
        if i % 2 == 0 {
            m.write_u64(a, i).unwrap();
            if i % 32 == 0 {
                m.persist(a, 8).unwrap();
            }
        } else {
            m.read_u64(a).unwrap();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let s = m.stats();
    println!(
        "{ops} ops in {secs:.2} s: {:.2} M ops/s; simulated {} cycles, served {:?}, TLB misses {}, NVM line writes {}",
        ops as f64 / secs / 1e6,
        s.cycles,
        s.served,
        s.tlb.misses,
        m.endurance().total_line_writes
    );
}

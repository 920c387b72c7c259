//! Kiln's recovery is itself crash-safe: a crash at any point of a recovery (every
//! subset of its write-backs in flight) recovers to the committed state again, with
//! chaos write-backs of the machine's own caches under the recovery.

use pmlab_hwtx::{HwConfig, HwImage, HwKind, HwProtocol};
use pmlab_model::{CacheLevelConfig, ExploreOptions, Machine, MachineConfig, ReplacementPolicy};
use pmlab_spine::{Memory, VecMemory};
use pmlab_tx::{Area, Protocol};

fn cfg() -> MachineConfig {
    let l = |size, assoc| CacheLevelConfig {
        size,
        block_size: 64,
        assoc,
        latency_cycles: 1,
        repl: ReplacementPolicy::Lru,
        write_back: true,
        write_allocate: true,
    };
    let mut c = MachineConfig::tiny(1 << 20, 8);
    c.caches = vec![l(4 * 64, 4), l(256 * 64, 8)];
    c.chaos = Some(pmlab_model::ChaosConfig {
        seed: 3,
        probability: 0.05,
    });
    c
}

#[test]
fn kiln_recovery_is_crash_safe() {
    let log = Area::new(4096, 64 * 1024);
    let data = Area::new(128 * 1024, 64 * 1024);
    let hw = HwConfig::new(HwKind::Kiln);
    let mut p = HwProtocol::format(Machine::new(cfg()).unwrap(), log, data, hw).unwrap();
    for i in 0..4u64 {
        p.begin().unwrap();
        for j in 0..10 {
            p.write_u64(data.base + j * 64, i * 100 + j).unwrap();
        }
        p.commit().unwrap();
    }
    let image = p.memory().crash();
    let m = Machine::with_image(cfg(), image).unwrap();
    let mut q = HwProtocol::attach(m, log, data, hw).unwrap();
    q.memory_mut().start_recording();
    q.recover().unwrap();
    let rec = q.memory_mut().stop_recording();
    for j in 0..10 {
        assert_eq!(q.read_u64(data.base + j * 64).unwrap(), 300 + j);
    }
    let r = rec.explore(&ExploreOptions::default(), |c| {
        let mut mem = VecMemory::new(c.bytes.len());
        mem.write(0, c.bytes).unwrap();
        let mut img = HwImage::new(mem, log, hw);
        img.recover().map_err(|e| e.to_string())?;
        for j in 0..10 {
            let v = img
                .read_u64(data.base + j * 64)
                .map_err(|e| e.to_string())?;
            if v != 300 + j {
                return Err(format!(
                    "boundary {} kind {:?} applied {:?}: line {j} holds {v}",
                    c.boundary, c.kind, c.applied
                ));
            }
        }
        Ok(())
    });
    assert!(r.passed(), "{:?}", r.failures.first());
    assert!(r.points > 10, "recovery wrote: {} crash points", r.points);
}

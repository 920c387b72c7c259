//! The checkers read crash images and pools from elsewhere, so they must survive any
//! bytes: a structure with random bytes flipped, or random words written over it, is
//! judged (sound or not) and never panics, loops or reads out of bounds.

use pmlab_spine::{Memory, VecMemory};
use pmlab_tx::{Area, Protocol, RedoProtocol};
use pmlab_workloads::{Dist, Kind, Ops, Params, Workload};
use proptest::prelude::*;

const LOG: Area = Area::new(0, 128 * 1024);

fn built(kind: Kind) -> (RedoProtocol<VecMemory>, Workload, Area) {
    let params = Params {
        elements: if kind == Kind::BpTree { 600 } else { 120 },
        dist: Dist::Uniform,
        ops_per_tx: kind.default_ops_per_tx(),
    };
    let data = Area::new(LOG.end(), Workload::footprint(kind, &params));
    let mut p = RedoProtocol::format(VecMemory::new(data.end() as usize), LOG, data).unwrap();
    let mut w = Workload::format(&mut p, kind, &params, data).unwrap();
    let mut ops = Ops::new(1, &w, &params);
    for _ in 0..40 {
        w.run_tx(&mut p, &mut ops).unwrap();
    }
    (p, w, data)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn checkers_judge_damaged_structures_without_panicking(
        kind in 0..Kind::ALL.len(),
        damage in proptest::collection::vec((any::<u64>(), any::<u64>(), 0u8..3), 1..40),
    ) {
        let kind = Kind::ALL[kind];
        let (mut p, w, data) = built(kind);
        for (at, value, how) in damage {
            // Word-aligned writes land on links, counts and keys; bytes anywhere.
            let off = at % (data.len - 8);
            let addr = data.base + 256 + off % (data.len - 264);
            match how {
                0 => p.memory_mut().write_u64(addr & !7, value).unwrap(),
                1 => p.memory_mut().write(addr, &[value as u8]).unwrap(),
                _ => p.memory_mut().write_u64(addr & !7, data.base + value % data.len).unwrap(),
            }
        }
        let _ = w.check(&mut p);
        // Opening the area again reads its header, which the damage never touched.
        prop_assert!(Workload::open(&mut p, kind, data).is_ok());
    }

    #[test]
    fn a_random_header_is_refused_or_read_never_panics(bytes in proptest::collection::vec(any::<u8>(), 256)) {
        let mut m = VecMemory::new(LOG.end() as usize + 4096);
        m.write(LOG.end(), &bytes).unwrap();
        let mut p = RedoProtocol::format(m, LOG, Area::new(LOG.end(), 4096)).unwrap();
        for kind in Kind::ALL {
            prop_assert!(Workload::open(&mut p, kind, Area::new(LOG.end(), 4096)).is_err());
        }
    }
}

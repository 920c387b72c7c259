//! Property tests: the machine computes what the reference memory computes, and
//! flushing everything makes the durable image the current one.

use pmlab_model::{ChaosConfig, ExploreOptions, Machine, MachineConfig, PageSize, PendingChoice};
use pmlab_spine::{FlushKind, Memory, VecMemory};
use proptest::prelude::*;

const SIZE: u64 = 64 << 10;

#[derive(Clone, Debug)]
enum Op {
    Write(u64, Vec<u8>),
    WriteNt(u64, Vec<u8>),
    Read(u64, usize),
    Flush(u64, u64, FlushKind),
    Fence,
}

fn op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        Just(FlushKind::Clflush),
        Just(FlushKind::Clflushopt),
        Just(FlushKind::Clwb)
    ];
    prop_oneof![
        4 => (0..SIZE - 300, prop::collection::vec(any::<u8>(), 1..300))
            .prop_map(|(a, d)| Op::Write(a, d)),
        1 => (0..SIZE - 300, prop::collection::vec(any::<u8>(), 1..100))
            .prop_map(|(a, d)| Op::WriteNt(a, d)),
        3 => (0..SIZE - 300, 1usize..300).prop_map(|(a, n)| Op::Read(a, n)),
        2 => (0..SIZE - 300, 1u64..300, kind).prop_map(|(a, n, k)| Op::Flush(a, n, k)),
        1 => Just(Op::Fence),
    ]
}

fn config(variant: u8, seed: u64) -> MachineConfig {
    let mut cfg = match variant {
        0 => MachineConfig::loc(SIZE),
        1 => MachineConfig::tiny(SIZE, 4),
        _ => {
            let mut c = MachineConfig::tiny(SIZE, 8);
            c.translation.identity = false;
            c.translation.page_size = PageSize::KIB_16;
            c
        }
    };
    if seed % 2 == 1 {
        cfg.chaos = Some(ChaosConfig {
            seed,
            probability: 0.3,
        });
    }
    cfg
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn behaves_like_vec_memory_and_persists_everything(
        ops in prop::collection::vec(op(), 1..80),
        variant in 0u8..3,
        seed in 0u64..1000,
    ) {
        let mut m = Machine::new(config(variant, seed)).unwrap();
        let mut r = VecMemory::new(SIZE as usize);
        // Every value each byte ever held (bit v of history[a] set when byte a held v),
        // for identity-translated machines.
        let mut history = vec![[1u64, 0, 0, 0]; SIZE as usize]; // zero at start
        let mut note = |a: u64, d: &[u8]| {
            for (i, &b) in d.iter().enumerate() {
                history[a as usize + i][usize::from(b / 64)] |= 1 << (b % 64);
            }
        };
        m.start_recording();
        for op in &ops {
            match op {
                Op::Write(a, d) => {
                    m.write(*a, d).unwrap();
                    r.write(*a, d).unwrap();
                    note(*a, d);
                }
                Op::WriteNt(a, d) => {
                    m.write_nt(*a, d).unwrap();
                    r.write(*a, d).unwrap();
                    note(*a, d);
                }
                Op::Read(a, n) => {
                    let (mut x, mut y) = (vec![0; *n], vec![0; *n]);
                    m.read(*a, &mut x).unwrap();
                    r.read(*a, &mut y).unwrap();
                    prop_assert_eq!(x, y);
                }
                Op::Flush(a, n, k) => {
                    m.flush(*a, *n, *k).unwrap();
                    r.flush(*a, *n, *k).unwrap();
                }
                Op::Fence => {
                    m.fence();
                    r.fence();
                }
            }
        }
        let rec = m.stop_recording();
        prop_assert_eq!(m.persist_counters(), r.persist_counters());
        // Replaying the recording reproduces the live durable state.
        prop_assert!(rec.state_at(rec.boundaries() - 1).as_ref() == Some(m.durable()));
        if variant != 2 {
            // No crash image invents a byte: each holds a value its address once held.
            let opts = ExploreOptions {
                pending: PendingChoice::Random { samples: 2, seed },
                ..ExploreOptions::default()
            };
            let report = rec.explore(&opts, |c| {
                for (a, &b) in c.bytes.iter().enumerate() {
                    if history[a][usize::from(b / 64)] & (1 << (b % 64)) == 0 {
                        return Err(format!("byte {a} = {b} was never stored there"));
                    }
                }
                Ok(())
            });
            prop_assert!(report.passed(), "{:?}", report.failures);
        }
        // Every byte the reference holds is readable from the machine.
        let mut all = vec![0; SIZE as usize];
        m.read(0, &mut all).unwrap();
        prop_assert!(all == r.bytes());
        // Flushing every dirty line and fencing leaves nothing volatile.
        m.persist_all();
        prop_assert!(m.crash() == m.current_image());
        if variant != 2 {
            // Identity translation: physical image = the spine's space.
            prop_assert!(m.crash() == r.bytes());
        }
    }
}

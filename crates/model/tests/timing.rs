//! Cycle accounting, TLB behaviour and counters, against hand-computed figures.

use pmlab_model::{DeviceConfig, Machine, MachineConfig, PageSize, TlbConfig};
use pmlab_spine::{FlushKind, Memory};

const MIB: u64 = 1 << 20;

#[test]
fn cycles_follow_the_level_that_served() {
    // LOC Table I: L1 1, L2 8, LLC 21 cycles, memory 168 ns at 1 GHz; walk 30 cycles.
    let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    m.read_u64(0).unwrap();
    assert_eq!(m.cycles(), 30 + 1 + (1 + 8 + 21 + 168));
    m.read_u64(8).unwrap();
    assert_eq!(m.cycles(), 229 + 1 + 1);
    m.advance_instructions(10);
    assert_eq!(m.cycles(), 241);
    let s = m.stats();
    assert_eq!(s.served, vec![1, 0, 0, 1]);
    assert_eq!((s.instructions, s.loads, s.device_reads), (12, 2, 1));
    assert_eq!((s.tlb.hits, s.tlb.misses), (1, 1));
}

#[test]
fn flush_and_fence_costs() {
    let mut m = Machine::new(MachineConfig::loc_with(MIB, DeviceConfig::pcm())).unwrap();
    m.write_u64(0, 1).unwrap();
    let c0 = m.cycles();
    m.flush(0, 8, FlushKind::Clwb).unwrap();
    assert_eq!(m.cycles() - c0, 1, "issue only; the TLB hits");
    let c1 = m.cycles();
    m.fence();
    assert_eq!(m.cycles() - c1, 1 + 500, "fence waits for one PCM write");
    // clflush of a dirty line waits for its write itself.
    m.write_u64(64, 1).unwrap();
    let c2 = m.cycles();
    m.flush(64, 8, FlushKind::Clflush).unwrap();
    assert_eq!(m.cycles() - c2, 1 + 500);
    // Nine outstanding clwbs over 8 banks: two rounds.
    for i in 0..9 {
        m.write_u64(4096 + i * 64, 1).unwrap();
        m.flush(4096 + i * 64, 8, FlushKind::Clwb).unwrap();
    }
    let c3 = m.cycles();
    m.fence();
    assert_eq!(m.cycles() - c3, 1 + 2 * 500);
    let s = m.stats();
    assert_eq!(s.flushes_by_kind, [1, 0, 10]);
    assert_eq!(s.flush_writebacks, 11);
    assert_eq!(m.endurance().total_line_writes, 11);
}

#[test]
fn a_clean_line_flush_writes_nothing() {
    let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    m.read_u64(0).unwrap();
    m.flush(0, 64, FlushKind::Clwb).unwrap();
    m.fence();
    let s = m.stats();
    assert_eq!((s.flush_writebacks, s.device_writes), (0, 0));
    assert!(m.pending_flushes().is_empty());
}

fn two_space_run(tagged: bool) -> (u64, u64) {
    let mut cfg = MachineConfig::loc(MIB);
    cfg.translation.identity = false;
    cfg.translation.page_size = PageSize::KIB_4;
    cfg.translation.tlb = Some(TlbConfig {
        tagged,
        ..TlbConfig::default()
    });
    let mut m = Machine::new(cfg).unwrap();
    for round in 0..10u64 {
        for asid in [1, 2] {
            m.switch_space(asid);
            for page in 0..4u64 {
                m.write_u64(page * 4096, round * 10 + u64::from(asid))
                    .unwrap();
            }
        }
    }
    // The spaces are separate: the same virtual address holds each space's value.
    m.switch_space(1);
    assert_eq!(m.read_u64(0).unwrap(), 91);
    m.switch_space(2);
    assert_eq!(m.read_u64(0).unwrap(), 92);
    let t = m.stats().tlb;
    (t.misses, t.flushes)
}

#[test]
fn tagged_tlbs_keep_entries_across_switches() {
    assert_eq!(two_space_run(true), (8, 0), "only compulsory misses");
    let (misses, flushes) = two_space_run(false);
    assert_eq!(flushes, 22, "one per switch");
    assert_eq!(
        misses,
        20 * 4 + 2,
        "every switch costs the walks of the pages touched"
    );
}

#[test]
fn page_sizes_change_the_walks() {
    for (size, walks) in [
        (PageSize::KIB_4, 64),
        (PageSize::KIB_16, 16),
        (PageSize::MIB_2, 1),
    ] {
        let mut cfg = MachineConfig::loc(4 * MIB);
        cfg.translation.page_size = size;
        let mut m = Machine::new(cfg).unwrap();
        for a in (0..256 * 1024).step_by(4096) {
            m.read_u64(a).unwrap();
        }
        assert_eq!(m.stats().tlb.misses, walks, "{size:?}");
    }
}

#[test]
fn machines_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<Machine>();
    let m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    let cycles = std::thread::spawn(move || {
        let mut m = m;
        m.read_u64(0).unwrap();
        m.cycles()
    })
    .join()
    .unwrap();
    assert!(cycles > 0);
}

/// CR3 loads: an untagged load flushes the TLB (the next access walks again), a tagged
/// load with the no-flush bit keeps it, and each is charged its configured cycles.
#[test]
fn cr3_loads_flush_or_keep_the_tlb_and_cost_what_is_configured() {
    use pmlab_model::{Machine, MachineConfig};
    use pmlab_spine::Memory;
    for tagged in [false, true] {
        let mut cfg = MachineConfig::loc(1 << 20);
        cfg.translation.tlb.as_mut().unwrap().tagged = tagged;
        let mut m = Machine::new(cfg).unwrap();
        let mut b = [0u8; 8];
        m.read(0, &mut b).unwrap();
        let misses = m.stats().tlb.misses;
        let before = m.cycles();
        let charged = m.load_cr3(0, true);
        assert_eq!(m.cycles() - before, charged);
        let c = m.os_costs().clone();
        assert_eq!(
            charged,
            if tagged {
                c.cr3_tagged_cycles
            } else {
                c.cr3_cycles
            }
        );
        m.read(0, &mut b).unwrap();
        let walked = m.stats().tlb.misses - misses;
        assert_eq!(walked, if tagged { 0 } else { 1 }, "tagged = {tagged}");
        let s = m.vas_switch(0);
        assert_eq!(s.syscall, c.syscall_cycles);
        assert_eq!(m.stats().syscalls, 1);
        assert_eq!(m.stats().cr3_loads, 2);
    }
}

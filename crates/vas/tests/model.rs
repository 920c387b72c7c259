//! The model backend: segments' frames shared by address spaces, page-table work
//! counted, switches charged, TLB entries kept only with tags, too few VA bits refused.

use pmlab_model::MachineConfig;
use pmlab_spine::Memory;
use pmlab_vas::model::{ModelSpaces, ModelVasConfig};
use pmlab_vas::{Access, AttachTo, Mode, SpaceJmp, VasCtl, VasError};

fn spaces(tagged: bool, va_bits: u32) -> ModelSpaces {
    let mut machine = MachineConfig::loc(8 << 20);
    machine.translation.tlb.as_mut().unwrap().tagged = tagged;
    ModelSpaces::new(ModelVasConfig { machine, va_bits }).unwrap()
}

#[test]
fn two_vases_share_a_segments_frames_and_its_lock() {
    let mut m = spaces(true, 48);
    let sid = m
        .seg_alloc("s0", Some(0x10_0000), 64 << 10, Mode(0o660))
        .unwrap();
    let rw = m.vas_create("rw", Mode(0o660)).unwrap();
    let ro = m.vas_create("ro", Mode(0o660)).unwrap();
    m.seg_attach(AttachTo::Vas(rw), sid, Access::ReadWrite)
        .unwrap();
    m.seg_attach(AttachTo::Vas(ro), sid, Access::ReadOnly)
        .unwrap();
    let (hw, hr) = (m.vas_attach(rw).unwrap(), m.vas_attach(ro).unwrap());
    m.vas_switch(hw).unwrap();
    m.machine().write_u64(0x10_0040, 77).unwrap();
    m.vas_switch(hr).unwrap();
    assert_eq!(m.machine().read_u64(0x10_0040).unwrap(), 77);
    // Leaving ro released its shared hold, so an exclusive attachment can be entered.
    let h2 = m.vas_attach(rw).unwrap();
    assert!(
        m.vas_switch(h2).is_ok(),
        "switching out of ro released its shared hold"
    );
    m.vas_switch_home().unwrap();
    // Outside every VAS the address is unmapped.
    assert!(m.machine().read_u64(0x10_0040).is_err());
    // Two attachments of 16 pages: 16 leaf entries + 3 interior tables each.
    let w = m.table_work();
    assert_eq!(w.entry_writes, 3 * (16 + 3));
    assert_eq!(w.tables_allocated, 1 + 3 * (1 + 3));
}

#[test]
fn untagged_switches_flush_the_tlb_tagged_ones_keep_it() {
    let mut misses = Vec::new();
    for tagged in [false, true] {
        let mut m = spaces(tagged, 48);
        let a = m
            .seg_alloc("a", Some(0x10_0000), 16 << 12, Mode(0o600))
            .unwrap();
        let b = m
            .seg_alloc("b", Some(0x10_0000), 16 << 12, Mode(0o600))
            .unwrap();
        let (va, vb) = (
            m.vas_create("va", Mode(0o600)).unwrap(),
            m.vas_create("vb", Mode(0o600)).unwrap(),
        );
        m.seg_attach(AttachTo::Vas(va), a, Access::ReadWrite)
            .unwrap();
        m.seg_attach(AttachTo::Vas(vb), b, Access::ReadWrite)
            .unwrap();
        for v in [va, vb] {
            m.vas_ctl(v, VasCtl::TlbTag(true)).unwrap();
        }
        let (ha, hb) = (m.vas_attach(va).unwrap(), m.vas_attach(vb).unwrap());
        for round in 0..10u64 {
            for (h, tag) in [(ha, 1u64), (hb, 2)] {
                m.vas_switch(h).unwrap();
                for p in 0..16 {
                    let addr = 0x10_0000 + p * 4096;
                    if round > 0 {
                        assert_eq!(
                            m.machine().read_u64(addr).unwrap(),
                            tag * 1000 + p,
                            "same VA, different segment"
                        );
                    }
                    m.machine().write_u64(addr, tag * 1000 + p).unwrap();
                }
            }
        }
        misses.push(m.machine_ref().stats().tlb.misses);
    }
    assert_eq!(misses[0], 20 * 16, "untagged: every switch refills");
    assert_eq!(misses[1], 2 * 16, "tagged: only the first touch walks");
}

#[test]
fn a_segment_beyond_the_va_bits_is_refused() {
    let mut m = spaces(true, 20); // 1 MiB of virtual address per VAS, 8 MiB of memory
    let fits = m.seg_alloc("low", Some(0), 1 << 20, Mode(0o600)).unwrap();
    let high = m
        .seg_alloc("high", Some(1 << 20), 1 << 20, Mode(0o600))
        .unwrap();
    let v = m.vas_create("v", Mode(0o600)).unwrap();
    m.seg_attach(AttachTo::Vas(v), fits, Access::ReadWrite)
        .unwrap();
    m.vas_attach(v).unwrap();
    m.seg_attach(AttachTo::Vas(v), high, Access::ReadWrite)
        .unwrap();
    assert!(matches!(
        m.vas_attach(v),
        Err(VasError::Model(
            pmlab_os::vas::VasModelError::NotEnoughVaBits { .. }
        ))
    ));
    // The same memory in a second VAS at the same addresses is fine: beyond the VA bits.
    let again = m.seg_alloc("again", Some(0), 1 << 20, Mode(0o600)).unwrap();
    let w = m.vas_create("w", Mode(0o600)).unwrap();
    m.seg_attach(AttachTo::Vas(w), again, Access::ReadWrite)
        .unwrap();
    assert!(m.vas_attach(w).is_ok());
}

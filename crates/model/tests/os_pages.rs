//! The machine over the OS model's page tables and placement policies.

use pmlab_model::{Machine, MachineConfig, OsPages, PageSize, dinero_hierarchy};
use pmlab_os::{CacheGeometry, Os, OsConfig, PolicyKind};
use pmlab_spine::Memory;

const MIB: u64 = 1 << 20;

fn machine(frames_mib: u64, policy: PolicyKind) -> Machine {
    let mut cfg = MachineConfig::loc(4 * MIB);
    cfg.translation.identity = false;
    cfg.translation.page_size = PageSize::KIB_16;
    let page = pmlab_os::PageSize::KIB_16;
    let os_cfg = OsConfig::from_bytes(frames_mib * MIB, 256 << 10, page, 7).unwrap();
    // Bins of the LLC (1 MiB, 16-way): the cache the placement tries to spread over.
    let geometry = CacheGeometry::new(MIB, 16, page).unwrap();
    let os = Os::new(os_cfg, policy.build(geometry, 7)).unwrap();
    let caches = Box::new(dinero_hierarchy(&cfg.caches, 0).unwrap());
    let image = vec![0; cfg.memory_size as usize];
    Machine::with_parts(cfg, image, caches, Box::new(OsPages::new(os))).unwrap()
}

#[test]
fn spaces_keep_their_data_under_every_policy() {
    for policy in PolicyKind::ALL {
        let mut m = machine(4, policy);
        for asid in [1u16, 2] {
            m.switch_space(asid);
            for page in 0..40u64 {
                m.write_u64(page * 16384 + 8, page * 10 + u64::from(asid))
                    .unwrap();
            }
        }
        for asid in [1u16, 2] {
            m.switch_space(asid);
            for page in 0..40u64 {
                let v = m.read_u64(page * 16384 + 8).unwrap();
                assert_eq!(v, page * 10 + u64::from(asid), "{policy:?}");
            }
        }
    }
}

#[test]
fn os_evictions_shoot_the_tlb_down() {
    // 1 MiB of frames (64 pages of 16 KiB) for 100 pages: the OS evicts, and the TLB
    // must not keep translations to frames that now hold other pages.
    let mut m = machine(1, PolicyKind::Random);
    m.switch_space(1);
    for page in 0..100u64 {
        m.write_u64(page * 16384, page).unwrap();
    }
    let t = m.stats().tlb;
    assert!(t.flushes > 0, "{t:?}");
    // The most recent page is resident and readable through a fresh translation.
    assert_eq!(m.read_u64(99 * 16384).unwrap(), 99);
}

#[test]
fn placement_from_a_toml_config() {
    let mut cfg = MachineConfig::loc(4 * MIB);
    cfg.translation.identity = false;
    cfg.translation.page_size = PageSize::KIB_16;
    cfg.translation.placement = Some(pmlab_model::PlacementConfig {
        policy: "bin-hopping".into(),
        pool_size: 256 << 10,
        seed: 1,
    });
    let cfg = MachineConfig::from_toml("m.toml", &cfg.to_toml()).unwrap();
    let mut m = Machine::new(cfg.clone()).unwrap();
    m.switch_space(3);
    m.write_u64(5 * 16384, 55).unwrap();
    assert_eq!(m.read_u64(5 * 16384).unwrap(), 55);

    let text = cfg.to_toml().replace("bin-hopping", "best-fit");
    let cfg = MachineConfig::from_toml("m.toml", &text).unwrap();
    let err = Machine::new(cfg).unwrap_err().to_string();
    assert!(
        err.contains("translation.placement.policy") && err.contains("best-fit"),
        "{err}"
    );
}

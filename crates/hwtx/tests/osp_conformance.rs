//! Both hardware protocols keep the transaction interface's contract
//! (`pmlab_tx::conformance`), and OSP's machine feature behaves as paper 000 says.

use pmlab_hwtx::{Atomicity, Consolidation, HwUndoProtocol, OspConfig, OspProtocol};
use pmlab_model::{Machine, MachineConfig};
use pmlab_tx::conformance::{Harness, check_all};
use pmlab_tx::{Area, Protocol};

const PAGE: u64 = 4096;

fn osp_areas(cfg: &OspConfig, data_pages: u64) -> (u64, Area, Area) {
    let data = Area::new(PAGE, data_pages * PAGE);
    let meta_len = OspProtocol::meta_len(data.len, cfg);
    let meta = Area::new(data.end(), meta_len);
    (meta.end(), meta, data)
}

fn osp(cfg: &OspConfig, data_pages: u64) -> OspProtocol {
    let (size, meta, data) = osp_areas(cfg, data_pages);
    let m = Machine::new(MachineConfig::tiny(size, 8)).unwrap();
    OspProtocol::format(m, meta, data, cfg.clone()).unwrap()
}

fn variants() -> Vec<OspConfig> {
    let mut out = Vec::new();
    for atomicity in [Atomicity::Journal, Atomicity::SuperPage] {
        for consolidation in [Consolidation::OnEviction, Consolidation::Async { queue: 4 }] {
            out.push(OspConfig {
                atomicity,
                consolidation,
                ..OspConfig::small(2)
            });
        }
    }
    out
}

#[test]
fn osp_keeps_the_contract() {
    for cfg in variants() {
        let (_, meta, data) = osp_areas(&cfg, 4);
        let c2 = cfg.clone();
        let mut h = Harness {
            fresh: || osp(&cfg, 4),
            reattach: move |m| OspProtocol::attach(m, meta, data, c2.clone()),
            data,
        };
        check_all(&mut h).unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
    }
}

#[test]
fn the_hardware_undo_log_keeps_the_contract() {
    let (log, data) = (Area::new(PAGE, 8 * PAGE), Area::new(9 * PAGE, 4 * PAGE));
    let fresh = || {
        let m = Machine::new(MachineConfig::tiny(16 * PAGE, 8)).unwrap();
        HwUndoProtocol::format(m, log, data).unwrap()
    };
    let mut h = Harness {
        fresh,
        reattach: |m| HwUndoProtocol::attach(m, log, data),
        data,
    };
    check_all(&mut h).unwrap();
}

/// The paper's flush counts, line by line: the undo log pays an entry and a data
/// flush per line plus a commit mark; OSP a data flush per line plus one journal drain
/// (and consolidation when pages leave the TLB).
#[test]
fn cpu_flushes_follow_the_protocols() {
    let mut u = {
        let (log, data) = (Area::new(PAGE, 8 * PAGE), Area::new(9 * PAGE, 4 * PAGE));
        let m = Machine::new(MachineConfig::tiny(16 * PAGE, 8)).unwrap();
        HwUndoProtocol::format(m, log, data).unwrap()
    };
    let base = 9 * PAGE;
    let s0 = u.memory().stats();
    u.begin().unwrap();
    for a in [base, base + 8, base + 64, base + PAGE] {
        u.write_u64(a, 5).unwrap(); // three distinct lines
    }
    u.commit().unwrap();
    let f = u.flushes();
    assert_eq!((f.log, f.data, f.commit), (3, 3, 1));
    let s = u.memory().stats();
    let machine =
        |s: &pmlab_model::MachineStats| s.flushes_by_kind.iter().sum::<u64>() + s.nt_drains;
    assert_eq!(f.total(), machine(&s) - machine(&s0));

    let mut o = osp(&OspConfig::small(4), 4);
    let d = PAGE;
    let s0 = o.memory().stats();
    o.begin().unwrap();
    for a in [d, d + 8, d + 64, d + PAGE] {
        o.write_u64(a, 5).unwrap();
    }
    o.commit().unwrap();
    let f = o.flushes();
    assert_eq!((f.data, f.journal, f.consolidation), (3, 1, 0));
    let s = o.memory().stats();
    assert_eq!(f.total(), machine(&s) - machine(&s0));
    assert_eq!(o.read_u64(d + 64).unwrap(), 5);
}

/// A page leaving the TLB is merged into the frame holding more of its committed
/// lines: one updated line costs one copied line.
#[test]
fn consolidation_copies_the_fewer_lines() {
    let mut o = osp(&OspConfig::small(1), 4);
    let d = PAGE;
    o.begin().unwrap();
    o.write_u64(d, 1).unwrap();
    o.commit().unwrap();
    assert_eq!(o.read_u64(d + 2 * PAGE).unwrap(), 0); // evicts page 1
    let s = o.osp_stats();
    assert_eq!((s.consolidations, s.lines_copied), (1, 1));
    assert_eq!(o.flushes().consolidation, 1);
    assert_eq!(
        o.read_u64(d).unwrap(),
        1,
        "the merged page reads the committed line"
    );
    // A page whose every line was updated moves to its second frame: nothing copied.
    o.begin().unwrap();
    for l in 0..64 {
        o.write_u64(d + l * 64, l + 7).unwrap();
    }
    o.commit().unwrap();
    o.read_u64(d + 3 * PAGE).unwrap();
    let s = o.osp_stats();
    assert_eq!((s.consolidations, s.lines_copied), (2, 1));
    for l in 0..64 {
        assert_eq!(o.read_u64(d + l * 64).unwrap(), l + 7);
    }
}

/// Regular stores keep working: they go through the same entries to the current
/// version of each line, transactional or not.
#[test]
fn regular_stores_see_and_are_seen() {
    let mut o = osp(&OspConfig::small(2), 4);
    let d = PAGE;
    o.begin().unwrap();
    o.write_u64(d, 1).unwrap();
    o.write_regular(d + 8, &[9; 8]).unwrap(); // the updated line: its new version
    o.write_regular(d + 64, &[3; 8]).unwrap(); // a clean line: its committed version
    assert_eq!(o.read_u64(d).unwrap(), 1);
    assert_eq!(o.read_u64(d + 8).unwrap(), 0x0909_0909_0909_0909);
    o.commit().unwrap();
    assert_eq!(o.read_u64(d + 8).unwrap(), 0x0909_0909_0909_0909);
    assert_eq!(o.read_u64(d + 64).unwrap(), 0x0303_0303_0303_0303);
}

/// A transaction may update more pages than the TLB holds: evicted pages keep their
/// uncommitted lines until the commit (and are consolidated after it).
#[test]
fn transactions_larger_than_the_tlb() {
    for cfg in variants() {
        let mut o = osp(&cfg, 12);
        o.begin().unwrap();
        for p in 0..10 {
            o.write_u64(PAGE + p * PAGE + 64, p + 100).unwrap();
        }
        for p in 0..10 {
            assert_eq!(o.read_u64(PAGE + p * PAGE + 64).unwrap(), p + 100);
        }
        o.commit().unwrap();
        assert!(o.osp_stats().evicted_in_tx > 0, "{cfg:?}");
        let data = Area::new(PAGE, 12 * PAGE);
        let meta = o.layout().meta;
        let mut o = OspProtocol::attach(o.into_memory(), meta, data, cfg.clone()).unwrap();
        let rec = o.recover().unwrap();
        assert!(
            rec.repaired,
            "{cfg:?}: recovery consolidates the pages still in two frames"
        );
        for p in 0..10 {
            assert_eq!(
                o.read_u64(PAGE + p * PAGE + 64).unwrap(),
                p + 100,
                "{cfg:?}"
            );
        }
        assert_eq!(
            o.osp_stats().refills,
            10,
            "{cfg:?}: every page in one frame again"
        );
    }
}

//! The software TLB miss handler: refills, departures, line maps, marked stores,
//! physical accesses, and write-combining drains.

use std::any::Any;

use pmlab_model::{
    Departed, LineMap, Machine, MachineConfig, TlbConfig, TlbMissHandler, Translation,
};
use pmlab_spine::{Asid, Memory};

const PAGE: u64 = 4096;

/// Maps virtual page 1 to frame 5 with line 0 served by frame 6; a marked store moves
/// its line to frame 6 too. Every other page is left to the page tables.
#[derive(Default)]
struct Redirect {
    refills: Vec<u64>,
    departed: Vec<u64>,
    marked: Vec<u64>,
}

impl TlbMissHandler for Redirect {
    fn refill(&mut self, m: &mut Machine, _asid: Asid, vpn: u64) -> Option<Translation> {
        self.refills.push(vpn);
        // The handler may touch memory physically while it runs.
        m.phys().write_u64(7 * PAGE, vpn).unwrap();
        (vpn == 1).then_some(Translation {
            pfn: 5,
            lines: Some(LineMap {
                alt_pfn: 6,
                select: 1,
            }),
        })
    }

    fn departed(&mut self, _m: &mut Machine, gone: Departed) {
        self.departed.push(gone.vpn);
    }

    fn marked_store(
        &mut self,
        _m: &mut Machine,
        _asid: Asid,
        vpn: u64,
        line: u64,
        t: Translation,
    ) -> Translation {
        self.marked.push(vpn * 64 + line);
        let mut map = t.lines.unwrap_or(LineMap {
            alt_pfn: 6,
            select: 0,
        });
        map.select |= 1 << line;
        Translation {
            pfn: t.pfn,
            lines: Some(map),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn machine() -> Machine {
    let mut m = Machine::new(MachineConfig::tiny(16 * PAGE, 8)).unwrap();
    m.reconfigure_tlb(Some(TlbConfig {
        entries: 2,
        assoc: 2,
        tagged: true,
        walk_cycles: 10,
    }))
    .unwrap();
    m.set_miss_handler(Some(Box::new(Redirect::default())));
    m
}

#[test]
fn lines_go_where_the_entry_says() {
    let mut m = machine();
    m.write_u64(PAGE, 11).unwrap(); // line 0 of page 1: frame 6
    m.write_u64(PAGE + 64, 22).unwrap(); // line 1: frame 5
    let mut p = m.phys();
    assert_eq!(p.read_u64(6 * PAGE).unwrap(), 11);
    assert_eq!(p.read_u64(5 * PAGE + 64).unwrap(), 22);
    assert_eq!(
        p.read_u64(PAGE).unwrap(),
        0,
        "the identity frame is untouched"
    );
    assert_eq!(p.read_u64(7 * PAGE).unwrap(), 1, "the refill's own store");
    // A marked store to line 2 moves the line to frame 6 before it is routed.
    m.write_marked(PAGE + 128, &[3; 8]).unwrap();
    assert_eq!(
        m.phys().read_u64(6 * PAGE + 128).unwrap(),
        0x0303030303030303
    );
    assert_eq!(m.tlb_entry(1).unwrap().lines.unwrap().select, 0b101);
    assert_eq!(m.read_u64(PAGE + 128).unwrap(), 0x0303030303030303);
    let h = m.miss_handler::<Redirect>().unwrap();
    assert_eq!(h.refills, vec![1]);
    assert_eq!(h.marked, vec![64 + 2]);
}

#[test]
fn departures_are_reported_in_order() {
    let mut m = machine();
    for vpn in [1, 2, 3, 1] {
        m.read_u64(vpn * PAGE).unwrap();
    }
    // 2 entries, LRU: 3 replaces 1, then 1 replaces 2.
    let h = m.miss_handler::<Redirect>().unwrap();
    assert_eq!(h.refills, vec![1, 2, 3, 1]);
    assert_eq!(h.departed, vec![1, 2]);
    m.reconfigure_tlb(None).unwrap();
    let h = m.miss_handler::<Redirect>().unwrap();
    let mut rest = h.departed[2..].to_vec();
    rest.sort();
    assert_eq!(rest, vec![1, 3], "a reconfigured TLB reports what it held");
}

#[test]
fn with_miss_handler_reaches_the_handler_and_the_machine() {
    let mut m = machine();
    m.read_u64(PAGE).unwrap();
    let n = m
        .with_miss_handler(|h: &mut Redirect, m: &mut Machine| {
            m.phys().write_u64(9 * PAGE, 5).unwrap();
            h.refills.len()
        })
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(m.phys().read_u64(9 * PAGE).unwrap(), 5);
}

#[test]
fn a_fence_that_drains_nt_stores_is_one_wc_flush() {
    let mut m = Machine::new(MachineConfig::tiny(16 * PAGE, 8)).unwrap();
    m.write_nt(0, &[1; 128]).unwrap(); // two lines, one drain
    m.fence();
    m.fence(); // nothing to drain
    m.write(4096, &[1; 8]).unwrap();
    m.persist(4096, 8).unwrap(); // a clwb, not a WC flush
    m.phys().write_nt(8192, &[2; 8]).unwrap();
    m.fence();
    let s = m.stats();
    assert_eq!((s.nt_stores, s.nt_drains), (3, 2));
    assert_eq!(m.crash()[8192], 2);
}

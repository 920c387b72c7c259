//! The protocols' mechanisms on small hand-computed cases: what a commit costs under
//! each ordering, write coalescing with a dependency pair, version overflow, Kiln's
//! commit at the NV-LLC. LOC's Table I machine: L1 1, L2 8, LLC 21 cycles, memory 168
//! cycles with 8 banks; no computation charged (so the figures are the protocols').

use pmlab_hwtx::{ComputeModel, HwConfig, HwImage, HwKind, HwProtocol};
use pmlab_model::{CacheLevelConfig, Machine, MachineConfig, ReplacementPolicy};
use pmlab_spine::{Memory, VecMemory};
use pmlab_tx::{Area, Protocol};

const LOG: Area = Area::new(64 * 1024, 2 << 20);
const DATA: Area = Area::new(3 << 20, 64 * 1024);
const X: u64 = DATA.base;

fn protocol(kind: HwKind, sd: u32, machine: MachineConfig) -> HwProtocol {
    protocol_with(kind, sd, machine, false)
}

/// [`protocol`], with strict WAL's in-place phase ordered or not.
fn protocol_with(kind: HwKind, sd: u32, machine: MachineConfig, ordered: bool) -> HwProtocol {
    let cfg = HwConfig {
        sd,
        ordered_in_place: ordered,
        compute: ComputeModel {
            per_access: 0,
            per_tx: 0,
        },
        ..HwConfig::new(kind)
    };
    HwProtocol::format(Machine::new(machine).unwrap(), LOG, DATA, cfg).unwrap()
}

fn loc() -> MachineConfig {
    let mut c = MachineConfig::loc(4 << 20);
    c.translation.tlb = None;
    c
}

fn cycles(p: &HwProtocol) -> u64 {
    p.memory().cycles()
}

/// One transaction storing one word of a line not cached: begin, the store's miss, the
/// commit; returns the cycles of each.
fn one_store(p: &mut HwProtocol, value: u64) -> (u64, u64, u64) {
    let t0 = cycles(p);
    p.begin().unwrap();
    let t1 = cycles(p);
    p.write_u64(X, value).unwrap();
    let t2 = cycles(p);
    p.commit().unwrap();
    (t1 - t0, t2 - t1, cycles(p) - t2)
}

#[test]
fn h_wal_waits_for_the_log_then_the_commit_record() {
    let mut p = protocol(HwKind::HWal, 1, loc());
    let (begin, store, commit) = one_store(&mut p, 5);
    assert_eq!(begin, 1, "TxBegin");
    assert_eq!(store, 1 + 30 + 168, "issue, three levels, memory");
    // TxCommit; the logic gathers the line into a group (a cycle) and issues it
    // (metadata + the line: two banks) and waits; then the commit record's group, and
    // waits again.
    assert_eq!(commit, 1 + 1 + 168 + 168);
    assert_eq!(p.durable(), 1, "acknowledged at return");
    p.begin().unwrap();
    let s = p.engine().unwrap().stats();
    assert_eq!(
        s.window_wait_cycles, 0,
        "H-WAL waits inside TxCommit, not at TxBegin"
    );
}

#[test]
fn ec_wal_commits_at_once_and_the_next_transaction_waits_once() {
    let mut p = protocol(HwKind::EcWal, 1, loc());
    let (_, _, commit) = one_store(&mut p, 5);
    assert_eq!(commit, 1, "Eager Commit: no wait at TxCommit");
    assert_eq!(p.durable(), 0, "not yet persistent");
    let t = cycles(&p);
    p.begin().unwrap();
    // The group was issued a cycle after TxCommit (the line gathered into it); the
    // next TxBegin waits for it: one memory write, no commit record.
    assert_eq!(cycles(&p) - t, 1 + 168);
    let s = p.engine().unwrap().stats();
    assert_eq!(s.window_wait_cycles, 168, "the stall at TxBegin, counted");
    assert_eq!(s.evicted_log_lines, 0, "logged at the window's end");
    p.abort().unwrap();
    assert_eq!(p.durable(), 1);
}

#[test]
fn loc_wal_coalesces_a_line_two_transactions_wrote() {
    let mut p = protocol(HwKind::LocWal, 2, loc());
    let (_, _, c1) = one_store(&mut p, 1);
    let (_, store2, c2) = one_store(&mut p, 2);
    assert_eq!(c1, 1);
    assert_eq!(
        store2, 2,
        "an L1 hit: the older version moved aside in the LLC"
    );
    assert_eq!(c2, 1, "the window's end issues its writes without waiting");
    let s = p.engine().unwrap().stats();
    assert_eq!(s.versions_kept, 1);
    assert_eq!(
        s.coalesced_blocks, 1,
        "transaction 1's block rides on transaction 2's"
    );
    assert_eq!(s.log_lines, 1, "one line logged for two transactions");
    p.flush().unwrap();
    assert_eq!(p.durable(), 2);
    // Recovery from the crash image finds transaction 1 committed through its
    // dependency pair and count record, and transaction 2 by its count.
    let mut mem = VecMemory::new(p.memory().size() as usize);
    mem.write(0, &p.memory().crash()).unwrap();
    let mut img = HwImage::new(mem, LOG, *p.config());
    let r = img.recover().unwrap();
    assert!(
        r.note.contains("2 transactions committed (1 blocks home)"),
        "{}",
        r.note
    );
    assert_eq!(img.read_u64(X).unwrap(), 2);
}

#[test]
fn a_full_set_sends_the_oldest_version_to_the_log() {
    // One LLC set of two ways under a one-line L1: the newest and an older version of
    // line X fill it, and the next line of the set evicts the older (LRU) version.
    let level = |size, assoc, latency_cycles| CacheLevelConfig {
        size,
        block_size: 64,
        assoc,
        latency_cycles,
        repl: ReplacementPolicy::Lru,
        write_back: true,
        write_allocate: true,
    };
    let mut m = loc();
    m.caches = vec![level(64, 1, 1), level(128, 2, 21)];
    let mut p = protocol(HwKind::LocWal, 4, m);
    one_store(&mut p, 1);
    p.begin().unwrap();
    p.write_u64(X, 2).unwrap();
    p.read_u64(X + 64).unwrap();
    let s = p.engine().unwrap().stats();
    assert_eq!(s.version_overflows, 1);
    assert_eq!(s.log_lines, 1);
    assert_eq!(s.evicted_log_lines, 1, "the overflowing version");
    p.commit().unwrap();
    p.flush().unwrap();
    assert_eq!(p.read_u64(X).unwrap(), 2);
}

#[test]
fn a_window_complete_with_its_in_place_writes_costs_one_home_write_more() {
    // Two transactions of a window of two store X; the next TxBegin waits for the
    // window's log writes, and with `window_in_place` for X's home write after them
    // (one line, its bank idle by then: 168 cycles more).
    let begin_after_window = |in_place: bool| {
        let cfg = HwConfig {
            sd: 2,
            window_in_place: in_place,
            compute: ComputeModel {
                per_access: 0,
                per_tx: 0,
            },
            ..HwConfig::new(HwKind::LocWal)
        };
        let mut p = HwProtocol::format(Machine::new(loc()).unwrap(), LOG, DATA, cfg).unwrap();
        one_store(&mut p, 1);
        one_store(&mut p, 2);
        let t = cycles(&p);
        p.begin().unwrap();
        let s = p.engine().unwrap().stats();
        (cycles(&p) - t, s.window_wait_cycles, durable_word(&p, X))
    };
    let (lazy, lazy_wait, lazy_home) = begin_after_window(false);
    let (ordered, ordered_wait, ordered_home) = begin_after_window(true);
    assert_eq!(ordered, lazy + 168);
    assert_eq!(
        lazy_wait,
        lazy - 1,
        "all but TxBegin's issue cycle is the wait"
    );
    assert_eq!(ordered_wait, lazy_wait + 168);
    assert_eq!(
        (lazy_home, ordered_home),
        (0, 2),
        "X home only when ordered"
    );
}

#[test]
fn serial_windows_write_a_windows_group_line_after_line() {
    // Two transactions of a window of two store two different lines: at the window's
    // end one block group goes to the log, its metadata line and two slots (three
    // lines, consecutive, so three banks). Overlapped they take one access (168
    // cycles after the gather); one after another, three.
    let begin_after_window = |serial: bool| {
        let cfg = HwConfig {
            sd: 2,
            serial_windows: serial,
            compute: ComputeModel {
                per_access: 0,
                per_tx: 0,
            },
            ..HwConfig::new(HwKind::LocWal)
        };
        let mut p = HwProtocol::format(Machine::new(loc()).unwrap(), LOG, DATA, cfg).unwrap();
        for (i, addr) in [X, X + 64].into_iter().enumerate() {
            p.begin().unwrap();
            p.write_u64(addr, i as u64 + 1).unwrap();
            p.commit().unwrap();
        }
        let t = cycles(&p);
        p.begin().unwrap();
        let ledger = p.engine().unwrap().core().ledger().clone();
        (cycles(&p) - t, ledger.wait(pmlab_hwtx::Wait::Window))
    };
    let (overlapped, overlapped_wait) = begin_after_window(false);
    let (serial, serial_wait) = begin_after_window(true);
    assert_eq!(serial, overlapped + 2 * 168);
    assert_eq!(serial_wait, overlapped_wait + 2 * 168);
    assert_eq!(
        overlapped_wait,
        overlapped - 1,
        "all but TxBegin's issue cycle"
    );
}

#[test]
fn kiln_commits_at_the_llc() {
    let mut p = protocol(HwKind::Kiln, 1, loc());
    let (_, store, commit) = one_store(&mut p, 5);
    assert_eq!(store, 1 + 30 + 168);
    // TxCommit; the line flushed from L1 into the NV-LLC (L2 and LLC latencies, one
    // line); the commit register written in the NV-LLC.
    assert_eq!(commit, 1 + (8 + 21 + 1) + (8 + 21));
    assert_eq!(p.durable(), 1);
}

#[test]
fn s_wal_flushes_and_fences_in_software() {
    let mut p = protocol(HwKind::SWal, 1, loc());
    one_store(&mut p, 5);
    let s = p.engine().unwrap().stats();
    // The group's two lines, then the commit group's one; the head at format.
    assert_eq!(s.clflushes, 3 + 1);
    assert_eq!(s.barriers, 2 + 1);
    assert_eq!(p.durable(), 1);
}

/// The durable (crash) image's word at `addr`, without recovery.
fn durable_word(p: &HwProtocol, addr: u64) -> u64 {
    let img = p.memory().crash();
    let a = addr as usize;
    u64::from_le_bytes(img[a..a + 8].try_into().unwrap())
}

#[test]
fn h_wal_with_ordered_in_place_writes_home_before_the_next_transaction() {
    let mut p = protocol_with(HwKind::HWal, 1, loc(), true);
    let (_, _, commit) = one_store(&mut p, 5);
    // As above (gather, the log group, the commit record), then the in-place write of
    // the line (its bank idle by then), waited for.
    assert_eq!(commit, 1 + 1 + 168 + 168 + 168);
    assert_eq!(durable_word(&p, X), 5, "home holds the new value");
    // Without the ordered in-place phase the line stays dirty in the cache.
    let mut lazy = protocol(HwKind::HWal, 1, loc());
    let (_, _, commit) = one_store(&mut lazy, 5);
    assert_eq!(commit, 1 + 1 + 168 + 168);
    assert_eq!(durable_word(&lazy, X), 0, "home not yet written");
}

#[test]
fn ec_wal_with_ordered_in_place_waits_for_the_log_then_home() {
    let mut p = protocol_with(HwKind::EcWal, 1, loc(), true);
    let (_, _, commit) = one_store(&mut p, 5);
    assert_eq!(commit, 1, "Eager Commit: no wait at TxCommit");
    let t = cycles(&p);
    p.begin().unwrap();
    assert_eq!(
        cycles(&p) - t,
        1 + 168 + 168,
        "the log group, then the home write"
    );
    assert_eq!(durable_word(&p, X), 5);
    p.abort().unwrap();
}

#[test]
fn s_wal_with_ordered_in_place_flushes_home_lines() {
    let mut p = protocol_with(HwKind::SWal, 1, loc(), true);
    one_store(&mut p, 5);
    let s = p.engine().unwrap().stats();
    // As without, plus one `clflush` of the home line and one `mfence`.
    assert_eq!(s.clflushes, 3 + 1 + 1);
    assert_eq!(s.barriers, 2 + 1 + 1);
    assert_eq!(durable_word(&p, X), 5);
}

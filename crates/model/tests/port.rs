//! The memory port: writes queued at the controller land when they complete, a barrier
//! waits for exactly the writes it is given, and crash exploration sees writes in flight
//! as pending and landed writes as durable. Figures hand-computed from LOC's Table I
//! (168-cycle memory, 8 banks, 64-byte lines interleaved over the banks).

use pmlab_model::{ExploreOptions, Machine, MachineConfig};

const MIB: u64 = 1 << 20;

fn machine() -> Machine {
    Machine::new(MachineConfig::loc(MIB)).unwrap()
}

#[test]
fn writes_to_different_banks_overlap_and_one_bank_queues() {
    let mut m = machine();
    m.advance_cycles(10);
    let a = m.port_write(10, 0, &[1; 64]); // bank 0
    let b = m.port_write(10, 64, &[2; 64]); // bank 1
    let c = m.port_write(10, 8 * 64, &[3; 64]); // bank 0 again
    assert_eq!((a, b, c), (178, 178, 346));
    assert_eq!(m.port_writes_in_flight(), 3);
    // A barrier on the write to bank 1 waits for it alone.
    m.persist_barrier(b);
    assert_eq!(m.cycles(), 178);
    assert_eq!(m.durable().image()[64], 2);
    assert_eq!(
        m.durable().image()[0],
        1,
        "bank 0's first write completed too"
    );
    assert_eq!(m.durable().image()[8 * 64], 0, "the queued one has not");
    assert_eq!(m.pending_flushes().len(), 1);
    // A read of bank 0 queues behind the second write.
    assert_eq!(m.port_read(200, 16 * 64), 346 + 168);
    m.stall_until(400);
    assert_eq!(m.durable().image()[8 * 64], 3);
    assert_eq!(m.port_writes_in_flight(), 0);
}

#[test]
fn a_multi_line_write_lands_whole_when_its_last_line_completes() {
    let mut m = machine();
    // Nine lines: banks 0..=7 and bank 0 again, so the last completes at 336.
    let done = m.port_write(0, 0, &[7; 9 * 64]);
    assert_eq!(done, 336);
    m.stall_until(335);
    assert_eq!(
        m.durable().image()[0],
        0,
        "nothing lands before the last line"
    );
    m.stall_until(336);
    assert!(m.durable().image()[..9 * 64].iter().all(|&b| b == 7));
}

#[test]
fn a_serial_write_queues_its_lines_one_after_another() {
    let mut m = machine();
    // Three lines on three idle banks, each waiting for the one before.
    let done = m.port_write_serial(0, 0, &[3; 3 * 64]);
    assert_eq!(done, 3 * 168);
    m.stall_until(2 * 168);
    assert_eq!(
        m.durable().image()[0],
        0,
        "one write: nothing lands before the last line"
    );
    m.stall_until(done);
    assert_eq!(m.durable().image()[128], 3);
}

#[test]
fn exploration_sees_writes_in_flight_and_landed() {
    let mut m = machine();
    let ((), run) = m.record(|m| {
        let d = m.port_write(0, 0, &[1; 128]);
        m.nv_write(4096, &[9; 8]);
        m.persist_barrier(d);
    });
    let mut images = Vec::new();
    let report = run.explore(&ExploreOptions::default(), |c| {
        images.push((c.bytes[0], c.bytes[64], c.bytes[4096], c.pending));
        // The two lines of one port write are never torn.
        if c.bytes[0] != c.bytes[64] {
            return Err("torn".into());
        }
        Ok(())
    });
    assert!(report.passed(), "{report:?}");
    // Start; after the write is queued (without it, with it); after the NV write
    // (without, with); after it landed.
    assert_eq!(
        images,
        vec![
            (0, 0, 0, 0),
            (0, 0, 0, 1),
            (1, 1, 0, 1),
            (0, 0, 9, 1),
            (1, 1, 9, 1),
            (1, 1, 9, 0),
        ]
    );
}

#[test]
fn a_fence_orders_port_writes_too() {
    let mut m = machine();
    m.port_write(0, 0, &[5; 64]);
    pmlab_spine::Memory::fence(&mut m);
    assert_eq!(m.cycles(), 168);
    assert_eq!(m.durable().image()[0], 5);
    assert_eq!(m.port_writes_in_flight(), 0);
}

#[test]
fn coherent_writes_are_not_durable() {
    let mut m = machine();
    m.coherent_write(100, &[4; 4]);
    assert_eq!(m.current_image()[100], 4);
    assert_eq!(m.crash()[100], 0);
}

//! The software protocols behind the [`Protocol`] interface: the interface's contract
//! ([`pmlab_tx::conformance`]), their exact flush and fence costs, and their answers to
//! corrupt logs.

use pmlab_spine::{Memory, PersistCounters, VecMemory};
use pmlab_tx::conformance::{self, Harness};
use pmlab_tx::{Area, Protocol, RedoProtocol, TxError, UndoProtocol};

const LOG: Area = Area::new(0, 8192);
const DATA: Area = Area::new(8192, 16384);
const MEM: usize = 8192 + 16384;

#[test]
fn redo_keeps_the_interface_contract() {
    let mut h = Harness {
        fresh: || RedoProtocol::format(VecMemory::new(MEM), LOG, DATA).unwrap(),
        reattach: |m| RedoProtocol::attach(m, LOG, DATA),
        data: DATA,
    };
    conformance::check_all(&mut h).unwrap();
}

#[test]
fn undo_keeps_the_interface_contract() {
    let mut h = Harness {
        fresh: || UndoProtocol::format(VecMemory::new(MEM), LOG, DATA).unwrap(),
        reattach: |m| UndoProtocol::attach(m, LOG, DATA),
        data: DATA,
    };
    conformance::check_all(&mut h).unwrap();
}

/// The same contract with the machine model as the memory (caches, write-backs,
/// persistence domain): where the hardware protocols will run.
#[test]
fn both_keep_the_contract_on_the_machine_model() {
    use pmlab_model::{Machine, MachineConfig};
    let machine = || Machine::new(MachineConfig::tiny(MEM as u64, 16)).unwrap();
    conformance::check_all(&mut Harness {
        fresh: || RedoProtocol::format(machine(), LOG, DATA).unwrap(),
        reattach: |m| RedoProtocol::attach(m, LOG, DATA),
        data: DATA,
    })
    .unwrap();
    conformance::check_all(&mut Harness {
        fresh: || UndoProtocol::format(machine(), LOG, DATA).unwrap(),
        reattach: |m| UndoProtocol::attach(m, LOG, DATA),
        data: DATA,
    })
    .unwrap();
}

/// A protocol that forgets to undo on abort fails the contract checks: they can fail.
#[test]
fn the_contract_checks_catch_an_abort_that_keeps_writes() {
    struct KeepOnAbort(RedoProtocol<VecMemory>);
    impl Protocol for KeepOnAbort {
        type Mem = VecMemory;
        fn name(&self) -> &'static str {
            "keep-on-abort"
        }
        fn recover(&mut self) -> Result<pmlab_tx::Recovery, TxError> {
            self.0.recover()
        }
        fn begin(&mut self) -> Result<(), TxError> {
            self.0.begin()
        }
        fn read(&mut self, a: u64, b: &mut [u8]) -> Result<(), TxError> {
            self.0.read(a, b)
        }
        fn write(&mut self, a: u64, d: &[u8]) -> Result<(), TxError> {
            self.0.write(a, d)
        }
        fn commit(&mut self) -> Result<u64, TxError> {
            self.0.commit()
        }
        /// The bug: abort commits.
        fn abort(&mut self) -> Result<(), TxError> {
            self.0.commit().map(|_| ())
        }
        fn flush(&mut self) -> Result<(), TxError> {
            self.0.flush()
        }
        fn durable(&self) -> u64 {
            self.0.durable()
        }
        fn in_transaction(&self) -> bool {
            self.0.in_transaction()
        }
        fn stats(&self) -> pmlab_tx::TxStats {
            self.0.stats()
        }
        fn memory(&self) -> &VecMemory {
            self.0.memory()
        }
        fn memory_mut(&mut self) -> &mut VecMemory {
            self.0.memory_mut()
        }
        fn into_memory(self) -> VecMemory {
            self.0.into_memory()
        }
    }
    let mut h = Harness {
        fresh: || KeepOnAbort(RedoProtocol::format(VecMemory::new(MEM), LOG, DATA).unwrap()),
        reattach: |m| RedoProtocol::attach(m, LOG, DATA).map(KeepOnAbort),
        data: DATA,
    };
    let e = conformance::check_all(&mut h).unwrap_err();
    assert!(e.starts_with("abort restores"), "{e}");
}

fn cost<P: Protocol>(p: &mut P, body: impl FnOnce(&mut P)) -> (u64, u64) {
    let c0: PersistCounters = p.memory().persist_counters();
    body(p);
    let c = p.memory().persist_counters();
    (c.flushes - c0.flushes, c.fences - c0.fences)
}

/// SPS's transaction (swap two 8-byte entries on different lines): redo flushes the
/// log's two lines and the two data lines under 2 fences; undo with both ranges
/// declared logs them under one fence, then data and commit mark: 3 fences; undo
/// without the declaration takes one snapshot fence per entry.
#[test]
fn a_swap_costs_what_the_protocols_promise() {
    let swap = |p: &mut dyn FnMut(u64, u64)| p(DATA.base, DATA.base + 4096);
    let mut redo = RedoProtocol::format(VecMemory::new(MEM), LOG, DATA).unwrap();
    let got = cost(&mut redo, |p| {
        swap(&mut |i, j| {
            p.begin().unwrap();
            let (a, b) = (p.read_u64(i).unwrap(), p.read_u64(j).unwrap());
            p.write_u64(i, b).unwrap();
            p.write_u64(j, a).unwrap();
            p.commit().unwrap();
        })
    });
    // Log: 64-byte header + two 24-byte records = 112 bytes, 2 lines.
    assert_eq!(got, (2 + 2, 2));
    assert_eq!(redo.stats().log_bytes, 112);
    for declare in [true, false] {
        let mut undo = UndoProtocol::format(VecMemory::new(MEM), LOG, DATA).unwrap();
        let got = cost(&mut undo, |p| {
            swap(&mut |i, j| {
                p.begin().unwrap();
                if declare {
                    p.declare(&[(i, 8), (j, 8)]).unwrap();
                }
                let (a, b) = (p.read_u64(i).unwrap(), p.read_u64(j).unwrap());
                p.write_u64(i, b).unwrap();
                p.write_u64(j, a).unwrap();
                p.commit().unwrap();
            })
        });
        // Two 40-byte records at log offsets 64 and 104 (lines 1-2: two flushes when
        // written together; one, then two, when written apart), two data lines, the
        // commit mark's line.
        let want = if declare {
            (2 + 2 + 1, 3)
        } else {
            (1 + 2 + 2 + 1, 4)
        };
        assert_eq!(got, want, "declare {declare}");
    }
}

#[test]
fn abort_costs_redo_nothing_and_undo_two_fences() {
    let mut redo = RedoProtocol::format(VecMemory::new(MEM), LOG, DATA).unwrap();
    let got = cost(&mut redo, |p| {
        p.begin().unwrap();
        p.write_u64(DATA.base, 1).unwrap();
        p.abort().unwrap();
    });
    assert_eq!(got, (0, 0));
    let mut undo = UndoProtocol::format(VecMemory::new(MEM), LOG, DATA).unwrap();
    let got = cost(&mut undo, |p| {
        p.begin().unwrap();
        p.write_u64(DATA.base, 1).unwrap();
        p.abort().unwrap();
    });
    // Snapshot (1 line, fence), restore (1 line, fence), finish mark (1 line, fence).
    assert_eq!(got, (3, 3));
}

/// A log full of a transaction is an error that changes nothing.
#[test]
fn a_full_log_refuses_the_write_and_keeps_the_transaction() {
    let small = Area::new(0, 256);
    for undo in [false, true] {
        let mem = VecMemory::new(MEM);
        let mut p: Box<dyn FnMut() -> Result<(), String>> = if undo {
            let mut p = UndoProtocol::format(mem, small, DATA).unwrap();
            Box::new(move || full_log(&mut p))
        } else {
            let mut p = RedoProtocol::format(mem, small, DATA).unwrap();
            Box::new(move || full_log(&mut p))
        };
        p().unwrap();
    }
}

fn full_log<P: Protocol>(p: &mut P) -> Result<(), String> {
    p.begin().unwrap();
    p.write_u64(DATA.base, 5).unwrap();
    match p.write(DATA.base + 1024, &[1u8; 300]) {
        Err(TxError::LogFull { .. }) => {}
        other => return Err(format!("{}: {other:?}", p.name())),
    }
    let mut b = [0u8; 300];
    p.read(DATA.base + 1024, &mut b).unwrap();
    assert_eq!(b, [0u8; 300], "{}: the refused write is visible", p.name());
    p.commit().unwrap();
    assert_eq!(p.read_u64(DATA.base).unwrap(), 5);
    Ok(())
}

/// A redo log whose header announces more than the area holds, or whose valid log
/// writes outside the data area: corruption, refused by field, nothing written.
#[test]
fn corrupt_redo_logs_are_refused_by_field_and_nothing_is_written() {
    let mut p = RedoProtocol::format(VecMemory::new(MEM), LOG, DATA).unwrap();
    p.begin().unwrap();
    p.write_u64(DATA.base, 42).unwrap();
    p.commit().unwrap();
    let clean = p.into_memory();

    let mut m = clean.clone();
    m.write_u64(LOG.base + 16, 1 << 40).unwrap();
    let before = m.bytes().to_vec();
    let mut q = RedoProtocol::attach(m, LOG, DATA).unwrap();
    let e = q.recover().unwrap_err().to_string();
    assert!(e.contains("field `body_len` at byte offset 16"), "{e}");
    assert_eq!(q.memory().bytes(), &before[..]);

    // A checksum-valid log (re-encoded) whose record points into the log area itself.
    let mut m = clean.clone();
    let image = pmlab_tx::encode_redo(
        9,
        &[pmlab_tx::RedoRecord {
            addr: LOG.base + 512,
            data: vec![1; 8],
        }],
    );
    m.write(LOG.base, &image).unwrap();
    let before = m.bytes().to_vec();
    let mut q = RedoProtocol::attach(m, LOG, DATA).unwrap();
    let e = q.recover().unwrap_err().to_string();
    assert!(
        e.contains("field `addr` at byte offset 64") && e.contains("outside the data area"),
        "{e}"
    );
    assert_eq!(q.memory().bytes(), &before[..]);

    let mut m = clean;
    m.write_u64(LOG.base, 0).unwrap();
    let e = RedoProtocol::attach(m, LOG, DATA)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("field `magic` at byte offset 0"), "{e}");
}

/// A live undo record outside the data area is refused, nothing written.
#[test]
fn corrupt_undo_logs_are_refused_by_field_and_nothing_is_written() {
    let mut p = UndoProtocol::format(VecMemory::new(MEM), LOG, DATA).unwrap();
    p.begin().unwrap();
    p.write_u64(DATA.base, 42).unwrap();
    // A crash here leaves a live record; forge one that points outside the data area.
    let mut m = p.into_memory();
    let rec = pmlab_tx::encode_undo(&pmlab_tx::UndoRecord {
        seq: 1,
        addr: 64,
        old: vec![0; 8],
    });
    m.write(LOG.base + 64, &rec).unwrap();
    let before = m.bytes().to_vec();
    let mut q = UndoProtocol::attach(m, LOG, DATA).unwrap();
    let e = q.recover().unwrap_err().to_string();
    assert!(
        e.contains("field `addr` at byte offset 72") && e.contains("outside the data area"),
        "{e}"
    );
    assert_eq!(q.memory().bytes(), &before[..]);
}

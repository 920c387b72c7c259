//! Every protocol of paper 001 keeps the transaction interface's contract
//! (`pmlab_tx::conformance`): misuse is an error, commits are numbered and (after
//! `TxFlush`) acknowledged, an abort restores everything, a failed write changes
//! nothing, a clean restart keeps what committed.

use pmlab_hwtx::{HwConfig, HwKind, HwProtocol};
use pmlab_model::{Machine, MachineConfig};
use pmlab_tx::conformance::{self, Harness};
use pmlab_tx::{Area, Protocol};

/// The log area holds Kiln's NV-LLC state too: 16,416 records of 80 bytes for LOC's
/// 1 MiB LLC.
const LOG: Area = Area::new(64 * 1024, 2 << 20);
const DATA: Area = Area::new(3 << 20, 64 * 1024);

fn machine() -> Machine {
    Machine::new(MachineConfig::loc(4 << 20)).unwrap()
}

fn check(kind: HwKind) -> Result<(), String> {
    let cfg = HwConfig {
        sd: 4,
        ..HwConfig::new(kind)
    };
    let mut h = Harness {
        fresh: || HwProtocol::format(machine(), LOG, DATA, cfg).unwrap(),
        reattach: |m| HwProtocol::attach(m, LOG, DATA, cfg),
        data: DATA,
    };
    conformance::check_all(&mut h)
}

#[test]
fn every_persistent_protocol_keeps_the_contract() {
    for kind in HwKind::ALL.into_iter().filter(|k| k.persistent()) {
        check(kind).unwrap_or_else(|e| panic!("{}: {e}", kind.label()));
    }
}

#[test]
fn the_baseline_acknowledges_nothing() {
    let err = check(HwKind::Baseline).unwrap_err();
    assert!(err.contains("durable() is 0 after flush"), "{err}");
    let mut p = HwProtocol::format(machine(), LOG, DATA, HwConfig::new(HwKind::Baseline)).unwrap();
    p.begin().unwrap();
    p.write_u64(DATA.base, 7).unwrap();
    assert_eq!(p.commit().unwrap(), 1);
    p.flush().unwrap();
    assert_eq!(p.durable(), 0);
    assert_eq!(p.read_u64(DATA.base).unwrap(), 7);
}

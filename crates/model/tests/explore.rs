//! Crash-point exploration: a correct persist protocol passes at every crash point, a
//! broken one is caught.

use pmlab_model::{
    ChaosConfig, ExploreOptions, Granularity, Machine, MachineConfig, PendingChoice, PointKind,
};
use pmlab_spine::{FlushKind, Memory};

const MIB: u64 = 1 << 20;
const DATA: u64 = 0;
const FLAG: u64 = 4096;
const RECORDS: u64 = 6;

fn u64_at(image: &[u8], addr: u64) -> u64 {
    let a = addr as usize;
    u64::from_le_bytes(image[a..a + 8].try_into().unwrap())
}

/// Appends records to a log, publishing each with a count at `FLAG`: the count must
/// never cover a record that is not durable. `order_data` = false is the classic bug:
/// the count is persisted without first persisting the record.
fn append_log(m: &mut Machine, order_data: bool, kind: FlushKind) {
    for i in 0..RECORDS {
        let rec = DATA + i * 64;
        m.write(rec, &[(i + 1) as u8; 64]).unwrap();
        if order_data {
            m.flush(rec, 64, kind).unwrap();
            m.fence();
        }
        m.write_u64(FLAG, i + 1).unwrap();
        m.flush(FLAG, 8, kind).unwrap();
        m.fence();
        if !order_data {
            m.flush(rec, 64, kind).unwrap();
            m.fence();
        }
    }
}

fn check(image: &[u8]) -> Result<(), String> {
    let n = u64_at(image, FLAG);
    for i in 0..n.min(RECORDS) {
        let a = (DATA + i * 64) as usize;
        if image[a..a + 64].iter().any(|&b| b != (i + 1) as u8) {
            return Err(format!("count {n} covers record {i}, which is not durable"));
        }
    }
    Ok(())
}

fn opts(granularity: Granularity) -> ExploreOptions {
    ExploreOptions {
        granularity,
        pending: PendingChoice::Exhaustive { max_pending: 8 },
        skip_unchanged: true,
        max_failures: 4,
        stride: 1,
    }
}

#[test]
fn a_correct_protocol_survives_every_crash_point() {
    for kind in [FlushKind::Clwb, FlushKind::Clflushopt, FlushKind::Clflush] {
        let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
        let ((), rec) = m.record(|m| append_log(m, true, kind));
        let report = rec.explore(&opts(Granularity::EveryOp), |c| check(c.bytes));
        assert!(report.passed(), "{kind:?}: {:?}", report.failures);
        assert!(report.points > 2 * RECORDS as usize);
        assert_eq!(report.truncated_points, 0);
    }
}

#[test]
fn a_broken_protocol_is_caught() {
    let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    let ((), rec) = m.record(|m| append_log(m, false, FlushKind::Clwb));
    let report = rec.explore(&opts(Granularity::Fences), |c| check(c.bytes));
    assert!(!report.passed());
    assert_eq!(report.failures[0].kind, PointKind::Fence);
    // Even the deterministic crash (no pending write-backs) catches it.
    let mut o = opts(Granularity::Fences);
    o.pending = PendingChoice::None;
    assert!(!rec.explore(&o, |c| check(c.bytes)).passed());
}

#[test]
fn pending_subsets_reveal_a_missing_fence() {
    // Record and count flushed with clwb but ordered by ONE fence: at the crash point
    // between the two flushes and the fence, the count may land without the record.
    let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    let ((), rec) = m.record(|m| {
        m.write(DATA, &[1; 64]).unwrap();
        m.write_u64(FLAG, 1).unwrap();
        m.flush(DATA, 64, FlushKind::Clwb).unwrap();
        m.flush(FLAG, 8, FlushKind::Clwb).unwrap();
        m.fence();
    });
    let mut o = opts(Granularity::EveryOp);
    o.pending = PendingChoice::None;
    assert!(rec.explore(&o, |c| check(c.bytes)).passed());
    o.pending = PendingChoice::Exhaustive { max_pending: 8 };
    let report = rec.explore(&o, |c| check(c.bytes));
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert_eq!(report.failures[0].applied, vec![1]);
    o.pending = PendingChoice::Random {
        samples: 16,
        seed: 5,
    };
    assert!(!rec.explore(&o, |c| check(c.bytes)).passed());
}

#[test]
fn exploration_matches_state_at_and_the_live_machine() {
    let mut m = Machine::new(MachineConfig::tiny(MIB, 2)).unwrap();
    let ((), rec) = m.record(|m| {
        for i in 0..20u64 {
            m.write_u64(i * 64, i + 1).unwrap();
            if i % 3 == 0 {
                m.persist(i * 64, 8).unwrap();
            }
        }
    });
    let last = rec.boundaries() - 1;
    assert_eq!(rec.state_at(last).unwrap().image(), &m.crash()[..]);
    let mut o = opts(Granularity::EveryOp);
    o.skip_unchanged = false;
    o.pending = PendingChoice::None;
    let mut seen = 0;
    let report = rec.explore(&o, |c| {
        seen += 1;
        let expect = rec.state_at(c.boundary).unwrap();
        if c.bytes == expect.image() {
            Ok(())
        } else {
            Err(format!("boundary {} differs", c.boundary))
        }
    });
    assert!(report.passed());
    assert_eq!(seen, rec.boundaries());
}

#[test]
fn chaos_write_backs_are_crash_points() {
    let mut cfg = MachineConfig::loc(MIB);
    cfg.chaos = Some(ChaosConfig {
        seed: 11,
        probability: 0.5,
    });
    let mut m = Machine::new(cfg).unwrap();
    let ((), rec) = m.record(|m| append_log(m, true, FlushKind::Clwb));
    assert!(m.stats().chaos_writebacks > 0);
    let report = rec.explore(&ExploreOptions::default(), |c| check(c.bytes));
    assert!(report.passed(), "{:?}", report.failures);
}

#[test]
fn recovery_code_runs_on_a_crash_image() {
    let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    let ((), rec) = m.record(|m| append_log(m, true, FlushKind::Clwb));
    let mut counts = Vec::new();
    let report = rec.explore(&opts(Granularity::Fences), |c| {
        let mut mem = c.memory();
        counts.push(mem.read_u64(FLAG).map_err(|e| e.to_string())?);
        Ok(())
    });
    assert!(report.passed());
    assert_eq!(counts.first(), Some(&0));
    assert_eq!(counts.last(), Some(&RECORDS));
}

#[test]
fn a_stride_samples_points() {
    let mut m = Machine::new(MachineConfig::loc(MIB)).unwrap();
    let ((), rec) = m.record(|m| append_log(m, true, FlushKind::Clwb));
    let mut o = opts(Granularity::Fences);
    let all = rec.explore(&o, |_| Ok(())).points;
    o.stride = 3;
    let some = rec.explore(&o, |_| Ok(())).points;
    assert!(some < all && some >= all / 3, "{some} of {all}");
}

/// A recording is bounded: past its limit it stops, and exploring it fails with an error
/// saying so, instead of growing without bound or passing on a partial run.
#[test]
fn a_recording_past_its_limit_stops_and_is_reported() {
    let mut m = Machine::new(MachineConfig::tiny(MIB, 16)).unwrap();
    // Each record's write-back costs its 64 bytes plus the event overhead; a small limit
    // stops the recording within the run.
    m.set_recording_limit(300);
    let ((), rec) = m.record(|m| append_log(m, true, FlushKind::Clwb));
    let overflow = rec.overflow().expect("the limit was reached");
    assert_eq!(overflow.limit, 300);
    let report = rec.explore(&opts(Granularity::EveryOp), |c| check(c.bytes));
    assert!(!report.passed() && report.points == 0, "{report:?}");
    let message = report.incomplete.unwrap().to_string();
    assert!(message.contains("limit of 300 bytes"), "{message}");
    // The default limit holds the whole run.
    let mut m = Machine::new(MachineConfig::tiny(MIB, 16)).unwrap();
    let ((), rec) = m.record(|m| append_log(m, true, FlushKind::Clwb));
    assert!(rec.overflow().is_none());
    assert!(
        rec.explore(&opts(Granularity::EveryOp), |c| check(c.bytes))
            .passed()
    );
}

//! The kill test: a writer process is SIGKILLed at its k-th store to the segment — in
//! a SET's recovery, its log write, or its in-place apply, holding the exclusive lock —
//! for every k over two SETs' worth of stores. After each kill the next client must
//! take the lock over (the dead holder reported), recover, find the store consistent
//! (the checker), and find exactly the acknowledged SETs plus, at most, the one in
//! flight (the oracle). Two deliberately broken variants must be caught: SETs stored
//! in place with no log, and a recovery that skips replaying the log.
//!
//! Every sweep runs in both persistence domains (`pmlab_kvjmp::persist`): `power`
//! (clwb + sfence per commit step) and `process` (the same steps ordered by the
//! compiler only), since a SIGKILL is exactly the failure `process` claims to survive;
//! the broken variants must be caught in both.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use pmlab_kvjmp::store::Faults;
use pmlab_kvjmp::{KvStore, Persist, segmem};
use pmlab_testkit::child;
use pmlab_tx::{Fault, FaultPlan};
use pmlab_vas::Mode;
use pmlab_vas::native::MechanismChoice;

const KEYS: u64 = 40;

fn faults(name: &str) -> Faults {
    match name {
        "correct" | "correct-resident" | "correct-implicit" => Faults::default(),
        "in-place" => Faults {
            in_place: true,
            ..Faults::default()
        },
        "recovery-skips-replay" => Faults {
            tx: FaultPlan::broken(Fault::RedoRecoverySkipsReplay),
            ..Faults::default()
        },
        "never-recover" => Faults {
            never_recover: true,
            ..Faults::default()
        },
        other => panic!("unknown variant {other}"),
    }
}

/// The switch mechanism of a variant: `resident` must keep the lock protocol and
/// the store's durability exactly as `mprotect` does.
fn mechanism(variant: &str) -> MechanismChoice {
    if variant.ends_with("resident") {
        MechanismChoice::Resident
    } else {
        MechanismChoice::Auto
    }
}

/// The persistence domain of this sweep (`KV_PERSIST`), for the writer and the
/// recovering client alike.
fn persist() -> Persist {
    Persist::parse(&std::env::var("KV_PERSIST").unwrap()).unwrap()
}

/// Opens the store as a writer of `variant` in this sweep's domain.
fn open(dir: &Path, variant: &str) -> KvStore {
    KvStore::open_with(dir, "k", true, mechanism(variant))
        .unwrap()
        .with_faults(faults(variant))
        .with_persist(persist())
}

/// Whether the sweep leaves recovery to the next client's first SET (instead of
/// running `recover` after each kill).
fn recovers_by_set(variant: &str) -> bool {
    matches!(variant, "correct-implicit" | "never-recover")
}

/// The j-th SET of the sequence: keys cycle so that SETs insert, replace in place,
/// and replace with a longer or shorter value (a new block, the old one freed).
fn op(j: u64) -> (Vec<u8>, Vec<u8>) {
    (
        format!("key:{:04}", j % KEYS).into_bytes(),
        format!("v{j}-{}", "x".repeat((j % 7) as usize * 5)).into_bytes(),
    )
}

/// The writer: SETs from `start` on, acknowledging each on stdout, killed at a store.
fn writer(dir: &Path, start: u64, kill_at: u64, variant: &str) {
    let mut s = open(dir, variant);
    segmem::arm_kill_at_store(kill_at);
    for j in start..start + 50 {
        let (k, v) = op(j);
        s.set(&k, &v).unwrap();
        // Marked: the harness prints its "test ... " prefix on the same line.
        println!("ack {j}");
    }
}

/// One kill: returns (acknowledged SETs' last index + 1, whether it died by SIGKILL).
fn kill_round(test: &str, dir: &Path, start: u64, kill_at: u64, variant: &str) -> (u64, bool) {
    let mut c = child::command(test, "writer")
        .env("KV_DIR", dir)
        .env("KV_START", start.to_string())
        .env("KV_KILL_AT", kill_at.to_string())
        .env("KV_VARIANT", variant)
        .env("KV_PERSIST", persist().name())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut next = start;
    for line in BufReader::new(c.stdout.take().unwrap()).lines() {
        if let Some(Ok(j)) = line
            .unwrap()
            .split("ack ")
            .nth(1)
            .map(|j| j.trim().parse::<u64>())
        {
            next = j + 1;
        }
    }
    use std::os::unix::process::ExitStatusExt;
    let st = c.wait().unwrap();
    (next, st.signal() == Some(libc::SIGKILL))
}

/// Runs the whole kill sweep with `variant`; returns the first failure found.
fn sweep(test: &str, variant: &str) -> Result<u32, String> {
    let dir = tempfile::Builder::new()
        .prefix("pmlab-kv-kill")
        .tempdir_in("/dev/shm")
        .unwrap();
    drop(KvStore::create(dir.path(), "k", 8 << 20, Mode(0o600), 5).unwrap());
    let mut reference: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut start = 0;
    let mut kills = 0;
    for kill_at in 1..=40u64 {
        let (next, killed) = kill_round(test, dir.path(), start, kill_at, variant);
        if !killed && next != start + 50 {
            return Err(format!(
                "kill at store {kill_at}: the writer failed without being killed (see its error above)"
            ));
        }
        for j in start..next {
            let (k, v) = op(j);
            reference.insert(k, v);
        }
        kills += u32::from(killed);
        let mut s = open(dir.path(), variant);
        if recovers_by_set(variant) {
            // No explicit recovery: a SET of a key of its own must recover first.
            let (pk, pv) = (format!("probe:{kill_at}").into_bytes(), b"p".to_vec());
            s.set(&pk, &pv)
                .map_err(|e| format!("kill at store {kill_at}: the next SET failed: {e}"))?;
            reference.insert(pk, pv);
        } else {
            s.recover()
                .map_err(|e| format!("kill at store {kill_at}: recovery failed: {e}"))?;
        }
        if killed && s.dead_holders().is_empty() {
            return Err(format!(
                "kill at store {kill_at}: the dead writer's lock was not reported cleared"
            ));
        }
        let report = s
            .check()
            .map_err(|e| format!("kill at store {kill_at}: checker: {e}"))?;
        let (fk, fv) = op(next);
        for (k, v) in &report.contents {
            let ok = reference.get(k) == Some(v) || (killed && *k == fk && *v == fv);
            if !ok {
                return Err(format!(
                    "kill at store {kill_at} (SETs {start}..{next} acknowledged, killed {killed}): {} = {:?}, acknowledged {:?}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v),
                    reference
                        .get(k)
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                ));
            }
        }
        if let Some(k) = reference.keys().find(|k| !report.contents.contains_key(*k)) {
            return Err(format!(
                "kill at store {kill_at}: acknowledged key {} lost",
                String::from_utf8_lossy(k)
            ));
        }
        if report.contents.get(&fk) == Some(&fv) && reference.get(&fk) != Some(&fv) {
            reference.insert(fk, fv);
        }
        start = next + 1;
    }
    Ok(kills)
}

fn role() {
    child::branch(|role| {
        let dir = std::env::var("KV_DIR").unwrap();
        let num = |v: &str| std::env::var(v).unwrap().parse::<u64>().unwrap();
        let variant = std::env::var("KV_VARIANT").unwrap();
        match role {
            "writer" => writer(
                Path::new(&dir),
                num("KV_START"),
                num("KV_KILL_AT"),
                &variant,
            ),
            _ => {
                let test = std::env::var("KV_TEST").unwrap();
                match (sweep(&test, &variant), variant.as_str()) {
                    (Ok(kills), "correct" | "correct-resident" | "correct-implicit") => assert!(
                        kills >= 30,
                        "only {kills} of 40 writers died at their store"
                    ),
                    (Ok(_), v) => panic!("the broken variant {v} was not caught"),
                    (Err(e), "correct" | "correct-resident" | "correct-implicit") => panic!("{e}"),
                    (Err(e), v) => eprintln!("caught {v} ({}): {e}", persist()),
                }
            }
        }
    });
}

/// Runs the sweep in a child (segments sit at fixed addresses the tests share), once
/// per persistence domain; returns both children's output.
fn run(test: &str, variant: &str) -> String {
    Persist::ALL
        .iter()
        .map(|p| run_in(test, variant, *p))
        .collect()
}

fn run_in(test: &str, variant: &str, persist: Persist) -> String {
    let out = child::command(test, "sweep")
        .env("KV_TEST", test)
        .env("KV_VARIANT", variant)
        .env("KV_PERSIST", persist.name())
        .env("KV_DIR", "-")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    eprintln!(
        "{}",
        text.lines()
            .filter(|l| l.contains("caught "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    text
}

/// The broken variant `v` was caught in both domains.
fn assert_caught(t: &str, v: &str) {
    for p in Persist::ALL {
        assert!(t.contains(&format!("caught {v} ({p})")), "{t}");
    }
}

#[test]
fn a_writer_killed_at_any_store_leaves_a_consistent_store_and_a_recoverable_lock() {
    role();
    run(
        "a_writer_killed_at_any_store_leaves_a_consistent_store_and_a_recoverable_lock",
        "correct",
    );
}

/// The same sweep with the `resident` mechanism (no protection change per switch):
/// the lock is still taken over from the killed writer and the store recovered.
#[test]
fn with_resident_switching_a_killed_writer_still_leaves_a_consistent_store() {
    role();
    run(
        "with_resident_switching_a_killed_writer_still_leaves_a_consistent_store",
        "correct-resident",
    );
}

#[test]
fn the_kill_test_catches_sets_stored_in_place_without_a_log() {
    role();
    let t = run(
        "the_kill_test_catches_sets_stored_in_place_without_a_log",
        "in-place",
    );
    assert_caught(&t, "in-place");
}

#[test]
fn the_kill_test_catches_a_recovery_that_skips_the_replay() {
    role();
    let t = run(
        "the_kill_test_catches_a_recovery_that_skips_the_replay",
        "recovery-skips-replay",
    );
    assert_caught(&t, "recovery-skips-replay");
}

/// The sweep with no explicit recovery after a kill: the next client's first SET
/// recovers the store by itself (what every SET does first).
#[test]
fn a_killed_writer_is_recovered_by_the_next_set() {
    role();
    run(
        "a_killed_writer_is_recovered_by_the_next_set",
        "correct-implicit",
    );
}

#[test]
fn the_kill_test_catches_sets_that_never_recover() {
    role();
    let t = run(
        "the_kill_test_catches_sets_that_never_recover",
        "never-recover",
    );
    assert_caught(&t, "never-recover");
}

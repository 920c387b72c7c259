//! `pmlab tx` end to end: crash exploration passes and catches a broken protocol; the
//! native bench reports its counters exactly and PMDK beside it; the kill test passes
//! and catches broken recoveries; bad pools are refused with a location and left
//! untouched.

use std::path::Path;
use std::process::Command;

const PMLAB: &str = env!("CARGO_BIN_EXE_pmlab");

fn pmlab(args: &[&str]) -> (bool, String) {
    pmlab_env(args, &[])
}

fn pmlab_env(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let quiet: &[&str] = if args[0] == "tx" {
        &["--no-progress"]
    } else {
        &[]
    };
    let out = Command::new(PMLAB)
        .args(args)
        .args(quiet)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// A tmpfs scratch directory (pools live where SCM would).
fn shm() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("pmlab-tx-cli-")
        .tempdir_in("/dev/shm")
        .unwrap()
}

#[test]
fn crashtest_passes_the_correct_protocols_and_fails_a_broken_one() {
    let (ok, out) = pmlab(&["tx", "crashtest", "--workload", "hashtable", "--txs", "10"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("hashtable") && out.contains("redo") && out.contains("undo"),
        "{out}"
    );
    let (ok, out) = pmlab(&[
        "tx",
        "crashtest",
        "--workload",
        "sps",
        "--fault",
        "skip-snapshot-flush",
    ]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("first failure: sps undo") && out.contains("crash images that fail"),
        "{out}"
    );
    let (ok, out) = pmlab(&["tx", "crashtest", "--fault", "skip-everything"]);
    assert!(
        !ok && out.contains("--fault \"skip-everything\": not one of"),
        "{out}"
    );
}

fn bench_json(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut args = vec![
        "tx",
        "bench",
        "--workload",
        "sps",
        "--elements",
        "2000",
        "--ops",
        "3000",
        "--reps",
        "2",
        "--json",
        "--dir",
    ];
    args.push(dir.to_str().unwrap());
    args.extend_from_slice(extra);
    pmlab_env(&args, env)
}

fn rows(out: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v.as_array().unwrap().clone()
}

/// SPS's counters per transaction are the protocols' own: redo flushes the log's two
/// lines and the two entries' lines under 2 fences; undo logs both entries under one
/// fence, then data and commit mark: 3 fences. (A swap of an entry with itself writes
/// one line less, so the flush averages fall a little below 4 and 5.)
#[test]
fn bench_reports_each_protocols_exact_fence_count() {
    let dir = shm();
    let (ok, out) = bench_json(dir.path(), &[], &[]);
    assert!(ok, "{out}");
    let rows = rows(&out);
    assert_eq!(rows.len(), 2);
    for r in &rows {
        for field in [
            "workload",
            "protocol",
            "tx_per_s",
            "flushes_per_tx",
            "fences_per_tx",
            "log_bytes_per_tx",
        ] {
            assert!(r.get(field).is_some(), "{field} missing: {r}");
        }
        assert!(r["tx_per_s"].as_f64().unwrap() > 0.0);
        assert_eq!(r["checked"].as_str().unwrap(), "redo: ok; undo: ok");
        let (flushes, fences) = (
            r["flushes_per_tx"].as_f64().unwrap(),
            r["fences_per_tx"].as_f64().unwrap(),
        );
        match r["protocol"].as_str().unwrap() {
            "redo" => assert!(fences == 2.0 && flushes > 3.9 && flushes <= 4.0, "{r}"),
            "undo" => assert!(fences == 3.0 && flushes > 4.9 && flushes <= 5.0, "{r}"),
            p => panic!("protocol {p}"),
        }
    }
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "scratch pools left behind"
    );
}

/// With PMDK installed (CI installs libpmemobj-dev), its rate is measured in the same
/// run and PMDK flushes with CPU instructions; without it, the error says so.
#[test]
fn bench_runs_pmdk_beside_pmlab_or_says_it_is_missing() {
    let dir = shm();
    let (ok, out) = bench_json(dir.path(), &["--protocol", "redo", "--vs-pmdk"], &[]);
    if pmlab_txcheck::pmdk::Pmdk::load().is_ok() {
        assert!(ok, "{out}");
        let r = &rows(&out)[0];
        assert!(r["pmdk_tx_per_s"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["pmdk_is_pmem"], serde_json::Value::Bool(true), "{r}");
        assert!(r["checked"].as_str().unwrap().contains("pmdk: ok"), "{r}");
    } else {
        assert!(!ok && out.contains("libpmemobj-dev"), "{out}");
    }
    let env = [("PMLAB_PMDK_LIB", "/nonexistent/libpmemobj.so.1")];
    let (ok, out) = bench_json(dir.path(), &["--protocol", "redo", "--vs-pmdk"], &env);
    assert!(
        !ok && out.contains("PMDK's libpmemobj is not installed") && out.contains("libpmemobj-dev"),
        "{out}"
    );
    let (ok, out) = pmlab(&[
        "tx",
        "bench",
        "--workload",
        "rbtree",
        "--vs-pmdk",
        "--elements",
        "100",
    ]);
    assert!(!ok && out.contains("--vs-pmdk compares SPS only"), "{out}");
}

fn stress(args: &[&str]) -> (bool, String) {
    let dir = shm();
    let mut a = vec!["tx", "stress", "--dir", dir.path().to_str().unwrap()];
    a.extend_from_slice(args);
    pmlab(&a)
}

#[test]
fn a_few_kills_recover_to_the_acknowledged_transactions() {
    let (ok, out) = stress(&["--workload", "sps", "--elements", "20000", "--kills", "4"]);
    assert!(ok && out.contains("4 kills: every recovered pool"), "{out}");
    let (ok, out) = stress(&[
        "--workload",
        "hashtable",
        "--protocol",
        "undo",
        "--elements",
        "5000",
        "--kills",
        "4",
    ]);
    assert!(ok && out.contains("4 kills: every recovered pool"), "{out}");
}

/// A recovery that skips its replay (redo) or its rollback (undo) leaves a half-done
/// transaction that the kill test finds (the B+-tree's transactions store many
/// ranges, so most self-kills land inside one).
#[test]
fn the_kill_test_catches_recoveries_that_skip_a_step() {
    for (protocol, fault) in [
        ("redo", "recovery-skips-replay"),
        ("undo", "recovery-skips-rollback"),
    ] {
        let (ok, out) = stress(&[
            "--workload",
            "bptree",
            "--elements",
            "5000",
            "--protocol",
            protocol,
            "--fault",
            fault,
            "--kills",
            "10",
        ]);
        assert!(
            !ok && out.contains("violation: round"),
            "{protocol} {fault}: {out}"
        );
    }
}

/// A region that is not a pool, a pool of another workload or protocol or size, a
/// corrupt log, a file that is not a region: each refused with its field, non-zero,
/// and the valid pool's bytes unchanged.
#[test]
fn bad_pools_are_refused_by_field_and_left_untouched() {
    let dir = shm();
    let d = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let bench = |region: &str, extra: &[&str]| {
        let mut a = vec![
            "tx", "bench", "--region", region, "--ops", "100", "--reps", "1",
        ];
        a.extend_from_slice(extra);
        pmlab(&a)
    };
    let (ok, out) = pmlab(&["scm", "create", &d("plain"), "--size", "1M"]);
    assert!(ok, "{out}");
    let (ok, out) = bench(&d("plain"), &[]);
    assert!(
        !ok && out.contains("field `magic` at byte offset 0") && out.contains("not a tx pool"),
        "{out}"
    );

    let (ok, out) = bench(&d("pool"), &["--elements", "1000"]);
    assert!(ok, "{out}");
    let made = std::fs::read(d("pool")).unwrap();
    let refusals: [(&[&str], &str); 3] = [
        (
            &["--elements", "1000", "--workload", "btree"],
            "field `layout` at byte offset 32",
        ),
        (
            &["--elements", "1000", "--protocol", "undo"],
            "field `protocol` at byte offset 16",
        ),
        (&["--elements", "4000"], "made for 1000 elements, not 4000"),
    ];
    for (extra, want) in refusals {
        let (ok, out) = bench(&d("pool"), extra);
        assert!(!ok && out.contains(want), "{extra:?}: {out}");
        assert!(
            std::fs::read(d("pool")).unwrap() == made,
            "{extra:?} changed the pool"
        );
    }

    // The redo log's body length (region header page, pool header page, then +16).
    let mut bad = made.clone();
    bad[8192 + 16..8192 + 24].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(d("bad"), &bad).unwrap();
    let (ok, out) = bench(&d("bad"), &["--elements", "1000"]);
    assert!(
        !ok && out.contains("corrupt: field `body_len` at byte offset 16"),
        "{out}"
    );
    assert!(
        std::fs::read(d("bad")).unwrap() == bad,
        "the corrupt pool was written to"
    );

    std::fs::write(d("junk"), vec![0x5a; 65536]).unwrap();
    let (ok, out) = bench(&d("junk"), &[]);
    assert!(!ok && out.contains("not a pmlab region"), "{out}");
    let (ok, out) = bench(&d("pool"), &["--elements", "1000"]);
    assert!(ok, "the valid pool still runs: {out}");
}

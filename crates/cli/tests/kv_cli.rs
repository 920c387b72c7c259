//! `pmlab kv` end to end: create, set, get, check across processes; a segment of
//! another format and a client without write permission refused with clear errors and
//! non-zero exits, nothing stored lost; the benchmark's JSON beside the real Redis.

use std::path::Path;
use std::process::{Command, Output};

fn pmlab(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .arg("kv")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn registry() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("pmlab-kv-cli")
        .tempdir_in("/dev/shm")
        .unwrap();
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    d
}

#[test]
fn set_get_check_across_processes_and_a_foreign_segment_is_refused() {
    let d = registry();
    assert!(
        pmlab(d.path(), &["create", "s", "--size", "8MiB"])
            .status
            .success()
    );
    assert!(
        pmlab(d.path(), &["set", "--store", "s", "hello", "world"])
            .status
            .success()
    );
    let g = pmlab(d.path(), &["get", "--store", "s", "hello"]);
    assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), "world");
    let g = pmlab(d.path(), &["get", "--store", "s", "nope"]);
    assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), "(nil)");
    let c = pmlab(d.path(), &["check", "--store", "s"]);
    assert!(
        c.status.success() && text(&c).contains("consistent: 1 keys"),
        "{}",
        text(&c)
    );
    // A segment with a store's names that holds another format.
    let vas = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_pmlab"))
            .arg("vas")
            .arg("--dir")
            .arg(d.path())
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
    };
    vas(&["create", "seg", "kv.other", "--size", "8MiB"]);
    vas(&["create", "vas", "kv.other.r"]);
    vas(&["attach", "kv.other.r", "kv.other", "--access", "ro"]);
    vas(&["create", "vas", "kv.other.w"]);
    vas(&["attach", "kv.other.w", "kv.other", "--access", "rw"]);
    for args in [
        &["get", "--store", "other", "k"][..],
        &["set", "--store", "other", "k", "v"],
    ] {
        let o = pmlab(d.path(), args);
        assert!(!o.status.success(), "{}", text(&o));
        assert!(
            text(&o).contains("byte 0 (magic)") && text(&o).contains("not a pmlab key-value store"),
            "{}",
            text(&o)
        );
    }
    let o = pmlab(d.path(), &["get", "--store", "absent", "k"]);
    assert!(
        !o.status.success() && text(&o).contains("kv.absent"),
        "{}",
        text(&o)
    );
    // Nothing stored was lost.
    let g = pmlab(d.path(), &["get", "--store", "s", "hello"]);
    assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), "world");
}

/// A second uid may read a store made with mode 644 but holds no writable mapping of
/// it: its SET is refused by the kernel, with a clear error and a non-zero exit.
#[test]
fn a_client_without_write_permission_is_refused_and_nothing_is_lost() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: cannot switch uid, skipped");
        return;
    }
    let d = registry();
    assert!(
        pmlab(
            d.path(),
            &["create", "s", "--size", "8MiB", "--mode", "644"]
        )
        .status
        .success()
    );
    assert!(
        pmlab(d.path(), &["set", "--store", "s", "k", "v1"])
            .status
            .success()
    );
    // A world-executable copy of pmlab (the build may sit below a 0700 directory).
    let bin = tempfile::Builder::new()
        .prefix("pmlab-kv-bin")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(
        bin.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let exe = bin.path().join("pmlab");
    // A hard link holds no open descriptor that a concurrent fork could inherit
    // (a copy's write descriptor makes execve fail with ETXTBSY until it closes).
    if std::fs::hard_link(env!("CARGO_BIN_EXE_pmlab"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_pmlab"), &exe).unwrap();
    }
    let as_nobody = |args: &[&str]| {
        use std::os::unix::process::CommandExt;
        let mut tries = 0;
        loop {
            let r = Command::new(&exe)
                .arg("kv")
                .arg("--dir")
                .arg(d.path())
                .args(args)
                .uid(65534)
                .gid(65534)
                .current_dir("/")
                .output();
            match r {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                r => break r.unwrap(),
            }
        }
    };
    let o = as_nobody(&["set", "--store", "s", "k", "v2"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("write access denied"), "{}", text(&o));
    let o = as_nobody(&["get", "--store", "s", "k"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "v1");
    // The same with the resident mechanism: the kernel still decides at attach.
    let o = as_nobody(&["--mechanism", "resident", "set", "--store", "s", "k", "v3"]);
    assert!(text(&o).contains("write access denied"), "{}", text(&o));
    let o = as_nobody(&["--mechanism", "resident", "get", "--store", "s", "k"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "v1",
        "{}",
        text(&o)
    );
}

/// `pmlab kv stress`: random-time kills of writers, the store checked after each;
/// the deliberately broken variant with no log is caught.
#[test]
fn the_random_kill_stress_passes_and_catches_sets_without_a_log() {
    let d = registry();
    let stress = |variant: &str, kills: &str| {
        pmlab(
            d.path(),
            &[
                "--mechanism",
                "resident",
                "stress",
                "--kills",
                kills,
                "--seed",
                "3",
                "--variant",
                variant,
                "--no-progress",
            ],
        )
    };
    let o = stress("correct", "12");
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("12 writers SIGKILLed"), "{}", text(&o));
    // SETs with no log break the store when a kill lands inside one of their few
    // unlogged steps (caught at kills 10, 17 and 52 in three runs seen): 400 kills
    // leave a miss no real chance; the run stops at the first catch. `never-recover`
    // needs a kill between a commit and the end of its apply, rarer at random times;
    // `crates/kvjmp/tests/kill.rs` kills at every store and catches it there.
    let o = stress("in-place", "400");
    assert!(!o.status.success(), "in-place was not caught: {}", text(&o));
    assert!(text(&o).contains("kill "), "{}", text(&o));
    eprintln!("caught in-place: {}", text(&o));
}

#[test]
fn the_benchmark_reports_pmlab_redis_and_redis_per_core_as_json() {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .args([
            "kv",
            "bench",
            "--clients",
            "1,2",
            "--requests",
            "2000",
            "--reps",
            "1",
            "--sweep",
            "50",
            "--vs-redis",
            "--json",
            "--no-progress",
            "--out",
        ])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    // Both persistence domains of the store, each beside the Redis of its guarantee.
    for system in [
        "pmlab",
        "pmlab-process",
        "redis",
        "redis-aof-always",
        "redis-per-core",
    ] {
        for clients in [1, 2] {
            for (op, pct) in [("GET", 0), ("SET", 100)] {
                assert!(
                    rows.iter().any(|r| r["system"] == system
                        && r["clients"] == clients
                        && r["op"] == op
                        && r["set_pct"] == pct
                        && r["req_per_s"].as_f64().unwrap() > 0.0),
                    "{system} {clients} {op}: {rows:?}"
                );
            }
        }
    }
    // Every row is in the issue's schema: op GET or SET, and a mixed point is one
    // row of each (for the store, once per mechanism that ran: mprotect and resident
    // here, pkeys only where the CPU has it).
    assert!(
        rows.iter().all(|r| r["op"] == "GET" || r["op"] == "SET"),
        "{rows:?}"
    );
    let mechs = if pmlab_vas::native::pku_support().ospke {
        &["mprotect", "resident", "pkeys"][..]
    } else {
        &["mprotect", "resident"][..]
    };
    for (m, system) in mechs
        .iter()
        .flat_map(|m| ["pmlab", "pmlab-process"].map(|s| (m, s)))
    {
        for op in ["GET", "SET"] {
            assert!(
                rows.iter().any(|r| r["system"] == system
                    && r["mechanism"] == *m
                    && r["op"] == op
                    && r["set_pct"] == 50
                    && r["req_per_s"].as_f64().unwrap() > 0.0),
                "{system} {m} {op} 50%: {rows:?}"
            );
        }
    }
    assert!(
        rows.iter()
            .filter(|r| r["system"] != "pmlab" && r["system"] != "pmlab-process")
            .all(|r| r["mechanism"].is_null())
    );
    assert!(!rows.iter().any(|r| r["mechanism"] == "pkeys") || mechs.len() == 3);
    assert!(text(&o).contains("resident: no system call per switch"));
    assert!(text(&o).contains("redis-aof-always"), "{}", text(&o));
    for f in [
        "kv.json",
        "kv.csv",
        "fig10a-get.svg",
        "fig10b-set.svg",
        "fig10c-sweep.svg",
    ] {
        assert!(out.path().join(f).exists(), "{f}");
    }
}

/// A SET in the process domain is found by a later process in the power domain and
/// the other way round (one store format, one transaction), and an unknown domain is
/// an error naming the flag.
#[test]
fn sets_in_both_persistence_domains_share_one_store_and_a_bad_domain_is_refused() {
    let d = registry();
    assert!(
        pmlab(d.path(), &["create", "s", "--size", "8MiB"])
            .status
            .success()
    );
    for (persist, key) in [("process", "p"), ("power", "w")] {
        let o = pmlab(
            d.path(),
            &["--persist", persist, "set", "--store", "s", key, persist],
        );
        assert!(o.status.success(), "{}", text(&o));
    }
    for (persist, key, want) in [("power", "p", "process"), ("process", "w", "power")] {
        let g = pmlab(
            d.path(),
            &["--persist", persist, "get", "--store", "s", key],
        );
        assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), want);
    }
    let c = pmlab(d.path(), &["check", "--store", "s"]);
    assert!(text(&c).contains("consistent: 2 keys"), "{}", text(&c));
    let bad = pmlab(
        d.path(),
        &["--persist", "disk", "set", "--store", "s", "k", "v"],
    );
    assert!(!bad.status.success());
    assert!(text(&bad).contains("--persist: \"disk\""), "{}", text(&bad));
}

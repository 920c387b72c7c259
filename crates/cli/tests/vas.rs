//! `pmlab vas` end to end: create, attach, list, inspect, remove; bad input is a
//! located error with a non-zero exit and loses nothing; the kill test runs a few kills.

use std::process::{Command, Output};

fn pmlab(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .arg("vas")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("pmlab runs")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fails(o: &Output, needle: &str) {
    assert!(
        !o.status.success(),
        "should fail: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains(needle), "{e:?} lacks {needle:?}");
}

#[test]
fn create_list_inspect_remove_and_bad_input() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let dir = d.path().join("reg");
    ok(&pmlab(&dir, &["create", "vas", "v0", "--mode", "640"]));
    let out = ok(&pmlab(&dir, &["create", "seg", "s0", "--size", "64KiB"]));
    assert!(out.contains("at 0x"), "{out}");
    ok(&pmlab(&dir, &["attach", "v0", "s0", "--access", "ro"]));
    let list = ok(&pmlab(&dir, &["list"]));
    assert!(list.contains("s0:ro") && list.contains("640"), "{list}");
    let seg = ok(&pmlab(&dir, &["inspect", "s0"]));
    assert!(
        seg.contains("lock: free") && seg.contains("\"size\": 65536"),
        "{seg}"
    );
    ok(&pmlab(&dir, &["check"]));
    // Bad input: errors name what is wrong, exit non-zero, lose nothing.
    fails(&pmlab(&dir, &["inspect", "nope"]), "no segment nope");
    fails(
        &pmlab(&dir, &["create", "seg", "s1", "--size", "1000"]),
        "multiple of the",
    );
    fails(&pmlab(&dir, &["remove", "seg", "s0"]), "still in VAS v0");
    std::fs::write(
        dir.join("vas/broken.toml"),
        "format = \"pmlab-vas 1\"\nid = 3\nname = [\n",
    )
    .unwrap();
    fails(&pmlab(&dir, &["inspect", "broken"]), "line");
    fails(&pmlab(&dir, &["check"]), "not consistent");
    std::fs::remove_file(dir.join("vas/broken.toml")).unwrap();
    fails(
        &pmlab(&d.path().join("not-a-registry"), &["list"]),
        "no registry",
    );
    assert!(
        ok(&pmlab(&dir, &["list"])).contains("s0:ro"),
        "nothing lost"
    );
    ok(&pmlab(&dir, &["detach", "v0", "s0"]));
    ok(&pmlab(&dir, &["remove", "seg", "s0"]));
    ok(&pmlab(&dir, &["remove", "vas", "v0"]));
    let list = ok(&pmlab(&dir, &["list"]));
    assert!(!list.contains("v0") && !list.contains("s0 "), "{list}");
}

/// A few kills (the README names the long run): every lock recovered, registry clean.
#[test]
fn the_kill_test_recovers_every_lock() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let out = ok(&Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .args(["vas", "--dir"])
        .arg(d.path().join("reg"))
        .args(["stress", "--kills", "6", "--workers", "3", "--seed", "7"])
        .output()
        .unwrap());
    assert!(
        out.contains("6 kills") && out.contains("0 problems, 0 dead holders"),
        "{out}"
    );
}

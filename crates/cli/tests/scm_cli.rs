//! `pmlab scm create | info | check` from the outside.

use std::path::PathBuf;
use std::process::{Command, Output};

fn pmlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .args(args)
        .output()
        .expect("pmlab runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A fresh path in a scratch directory under /dev/shm (tmpfs); the directory goes away
/// with the returned guard, however the test ends.
fn shm_path(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("pmlab-scm-cli-")
        .tempdir_in("/dev/shm")
        .expect("a scratch directory in /dev/shm");
    let p = dir.path().join(name);
    (dir, p)
}

#[test]
fn create_info_check_on_tmpfs() {
    let (_dir, p) = shm_path("ok");
    let ps = p.to_str().unwrap();
    let o = pmlab(&["scm", "create", ps, "--size", "64M"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 64 << 20);
    let o = pmlab(&["scm", "info", ps]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("medium        tmpfs"), "{t}");
    assert!(t.contains("region size   67108864 bytes"), "{t}");
    assert!(
        t.contains("persist mode  clwb") || t.contains("persist mode  clflush"),
        "{t}"
    );
    let o = pmlab(&["scm", "check", ps]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains(": ok"));
    // Creating over an existing region is refused.
    let o = pmlab(&["scm", "create", ps, "--size", "64M", "--file"]);
    assert!(!o.status.success());
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn check_names_the_corrupted_field() {
    let (_dir, p) = shm_path("bad");
    let ps = p.to_str().unwrap();
    assert!(
        pmlab(&["scm", "create", ps, "--size", "1M"])
            .status
            .success()
    );
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[8] = 2; // the layout version
    std::fs::write(&p, &bytes).unwrap();
    let o = pmlab(&["scm", "check", ps]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("`version` at byte offset 8"), "{t}");
    bytes[8] = 1;
    bytes[40] ^= 0xff; // creation time: only the checksum can tell
    std::fs::write(&p, &bytes).unwrap();
    let t = text(&pmlab(&["scm", "check", ps]));
    assert!(t.contains("`checksum` at byte offset 60"), "{t}");
    std::fs::write(&p, b"#!/bin/sh\necho not a region\n").unwrap();
    let o = pmlab(&["scm", "info", ps]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("shorter than the 64-byte header"),
        "{}",
        text(&o)
    );
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn memfd_and_bad_sizes() {
    let o = pmlab(&["scm", "create", "scratch", "--size", "2M", "--memfd"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("memfd:scratch") && t.contains("verified"), "{t}");
    let o = pmlab(&["scm", "create", "x", "--size", "12Q", "--memfd"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("unknown unit"));
    let o = pmlab(&["scm", "create", "x", "--size", "5000", "--memfd"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("smaller than the minimum"),
        "{}",
        text(&o)
    );
}

#[test]
fn page_cache_file_reports_msync() {
    // The target directory's scratch space is on the build's disk (the page cache).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let p = dir.path().join("r.scm");
    let o = pmlab(&["scm", "create", p.to_str().unwrap(), "--size", "1M"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    if t.contains("medium        page-cache") {
        assert!(t.contains("persist mode  msync"), "{t}");
    }
}

#[test]
fn missing_region_names_the_path() {
    let o = pmlab(&["scm", "check", "/nonexistent/pmlab.scm"]);
    assert_eq!(o.status.code(), Some(1));
    let t = text(&o);
    assert!(
        t.contains("region /nonexistent/pmlab.scm: open failed"),
        "{t}"
    );
}

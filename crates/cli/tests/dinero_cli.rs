//! End-to-end tests of `pmlab dinero`: the built binary, a trace on standard input,
//! Dinero IV's report on standard output.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn pmlab_dinero(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .arg("dinero")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pmlab");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        // The process may exit before reading everything (bad flags); ignore EPIPE.
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for pmlab");
    writer.join().expect("writer thread");
    out
}

/// The six columns (Total, Instrn, Data, Read, Write, Misc) of a report row.
fn row(report: &str, label: &str) -> Vec<f64> {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no row {label} in\n{report}"));
    line[line.find(label).unwrap() + label.len()..]
        .split_whitespace()
        .map(|v| v.parse().expect("number"))
        .collect()
}

/// A 64-byte direct-mapped cache of 16-byte blocks (4 sets), counted by hand:
/// `r 0` miss; `r 4` hit; `w 10` miss (partial write: fetch), dirty; `r 40` miss evicts
/// block 0; `r 0` miss evicts 0x40; `w 50` miss evicts dirty 0x10 (write-back), fetch;
/// `i 1e` size 4 spans 0x10 and 0x20: two misses, the first evicting dirty 0x50; `m 20`
/// hit; `w 30` size 16 covers its block: miss without fetch, dirty; the end-of-run
/// copy-back writes 0x30 back.
#[test]
fn small_trace_counted_by_hand() {
    let trace = b"r 0 4\nr 4 4\nw 10 4\nr 40 4\nr 0 4\nw 50 4\ni 1e 4\nm 20 1\nw 30 10\n";
    let out = pmlab_dinero(&["-l1-usize", "64", "-l1-ubsize", "16"], trace);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = String::from_utf8(out.stdout).expect("utf-8");
    assert!(report.starts_with("---Dinero IV cache simulator, version 8\n"));
    assert!(report.contains("\n-l1-usize 64\n-l1-ubsize 16\n-l1-usbsize 16\n-l1-uassoc 1\n"));
    assert!(report.contains("\nl1-ucache\n"));
    // Total, Instrn, Data, Read, Write, Misc.
    assert_eq!(
        row(&report, "Demand Fetches"),
        [10.0, 2.0, 8.0, 4.0, 3.0, 1.0]
    );
    assert_eq!(
        row(&report, "Demand Misses"),
        [8.0, 2.0, 6.0, 3.0, 3.0, 0.0]
    );
    assert_eq!(row(&report, "Multi-block refs"), [1.0]);
    assert_eq!(row(&report, "Bytes From Memory"), [112.0]);
    assert_eq!(row(&report, "Bytes To Memory"), [48.0]);
    assert!(report.ends_with("---Execution complete.\n"));
}

/// One full validation case through the binary: byte-for-byte Dinero IV's output.
#[test]
fn validation_case_byte_for_byte() {
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/validation/dinero");
    let configs = std::fs::read_to_string(dir.join("configs.txt")).expect("configs.txt");
    // Decompressed (and re-written as extended din) by the trace crate.
    let trace = {
        let path = dir.join("traces/sort.din.xz");
        let mut src = pmlab_trace::open_trace(path.to_str().expect("utf-8"), None).expect("trace");
        let refs = pmlab_trace::read_all(&mut *src).expect("read trace");
        let mut w = pmlab_trace::DinWriter::new(Vec::new());
        w.write_refs(&refs).expect("write din");
        w.into_inner().expect("din text")
    };
    for name in ["kh-split-l2", "ccc-split", "wt-nwa"] {
        let flags = configs
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix('\t')))
            .expect("config");
        let mut args: Vec<&str> = flags.split_whitespace().collect();
        args.extend(["-informat", "D"]);
        let out = pmlab_dinero(&args, &trace);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = std::fs::read_to_string(dir.join(format!("expected/sort.{name}.out")))
            .expect("expected");
        assert_eq!(
            String::from_utf8(out.stdout).expect("utf-8"),
            expected,
            "sort.{name}"
        );
    }
}

/// Unsupported or malformed flags: non-zero exit and a message naming the flag or field.
#[test]
fn bad_flags_are_errors_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["-l1-usize", "32k", "-l1-ubsize", "32", "-bogus"],
            "-bogus",
        ),
        (&["-l1-usize", "32k", "-l1-ubsize", "24"], "-l1-ubsize"),
        (&["-l1-usize", "3k", "-l1-ubsize", "32"], "size"),
        (
            &["-l1-usize", "1k", "-l1-ubsize", "32", "-l1-uassoc", "64"],
            "associativity",
        ),
        (
            &["-l1-usize", "32k", "-l1-ubsize", "32", "-l1-ufetch", "a"],
            "-l1-ufetch",
        ),
        (
            &["-l1-usize", "32k", "-l1-ubsize", "32", "-l1-usbsize", "16"],
            "-l1-usbsize",
        ),
        (
            &[
                "-l1-usize",
                "32k",
                "-l1-ubsize",
                "32",
                "-on-trigger",
                "0x400",
            ],
            "-on-trigger",
        ),
        (
            &["-l1-usize", "32k", "-l1-ubsize", "32", "-maxcount"],
            "-maxcount",
        ),
        (
            &["-l1-usize", "32k", "-l1-ubsize", "32", "-l1-urepl", "x"],
            "-l1-urepl",
        ),
        (&["-l1-usize", "32k"], "block size"),
        (&["-l1-isize", "8k", "-l1-ibsize", "32"], "split level"),
        (
            &[
                "-l1-usize",
                "32k",
                "-l1-ubsize",
                "32",
                "-l2-isize",
                "64k",
                "-l2-ibsize",
                "32",
            ],
            "level 2",
        ),
        (
            &["-l1-usize", "32k", "-l1-ubsize", "32", "-informat", "q"],
            "-informat",
        ),
    ];
    for (args, needle) in cases {
        let out = pmlab_dinero(args, b"r 0 4\n");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            err.contains(needle),
            "{args:?}: error {err:?} should name {needle}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A malformed trace line is an error naming the line.
#[test]
fn bad_trace_names_the_line() {
    let out = pmlab_dinero(&["-l1-usize", "1k", "-l1-ubsize", "32"], b"r 0 4\nq 10 4\n");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":2"), "{err}");
}

#[test]
fn help_lists_the_flags() {
    let out = pmlab_dinero(&["-help"], b"");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in ["-lN-Tsize", "-lN-Trepl", "-maxcount", "-informat"] {
        assert!(text.contains(flag), "{flag} missing from help");
    }
}

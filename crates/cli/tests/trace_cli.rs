//! End-to-end tests of `pmlab trace` through the built binary.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn pmlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .args(args)
        .output()
        .expect("run pmlab")
}

fn pmlab_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pmlab");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

const DIN: &str = "i 400000 4\nr 7ff000 8\ni 400004 4\nw 7ff008 8\ni 401000 2\nm 10000 1\n";

#[test]
fn convert_round_trips_din_through_compressed_binary() {
    let dir = tempfile::tempdir().unwrap();
    let din = path(dir.path(), "a.din");
    std::fs::write(&din, DIN).unwrap();
    let bin = path(dir.path(), "a.bin.zst");
    let out = pmlab(&["trace", "convert", &din, &bin]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let raw = std::fs::read(&bin).unwrap();
    assert_eq!(&raw[..4], &[0x28, 0xb5, 0x2f, 0xfd], "zstd output");
    let back = path(dir.path(), "b.din");
    let out = pmlab(&["trace", "convert", &bin, &back]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&back).unwrap(), DIN);
}

#[test]
fn convert_streams_stdin_to_stdout() {
    let out = pmlab_stdin(
        &["trace", "convert", "-", "-", "--from", "D", "--to", "bin"],
        DIN.as_bytes(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout.len(), 16 + 6 * 16);
    assert_eq!(&out.stdout[..8], b"PMLTRACE");
    let back = pmlab_stdin(&["trace", "convert", "-", "-", "--to", "D"], &out.stdout);
    assert!(back.status.success(), "{}", text(&back.stderr));
    assert_eq!(text(&back.stdout), DIN);
}

#[test]
fn info_counts_kinds_pages_and_range() {
    let out = pmlab_stdin(&["trace", "info", "-"], DIN.as_bytes());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("references     6"), "{s}");
    assert!(s.contains("instr        3 "), "{s}");
    assert!(s.contains("misc         1 "), "{s}");
    // Pages 0x400, 0x401, 0x7ff, 0x10.
    assert!(s.contains("footprint      4 distinct"), "{s}");
    assert!(s.contains("0x10000 .. 0x7ff00f"), "{s}");
}

#[test]
fn malformed_input_fails_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = path(dir.path(), "bad.din");
    std::fs::write(&bad, "r 10 4\nr 10 4\nr 1z0 4\n").unwrap();
    let out = pmlab(&["trace", "info", &bad]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("bad.din:3: address"), "{err}");
    std::fs::write(&bad, "r 10 4\nc 10 4\n").unwrap();
    let err = text(&pmlab(&["trace", "info", &bad]).stderr);
    assert!(
        err.contains("bad.din:2: access type") && err.contains("copy-back"),
        "{err}"
    );
    std::fs::write(&bad, "r 10 0\n").unwrap();
    let err = text(&pmlab(&["trace", "info", &bad]).stderr);
    assert!(err.contains("bad.din:1: size"), "{err}");
    // A binary trace cut inside a record.
    let bin = path(dir.path(), "cut.bin");
    let full = pmlab_stdin(
        &["trace", "convert", "-", "-", "--to", "bin"],
        DIN.as_bytes(),
    )
    .stdout;
    std::fs::write(&bin, &full[..full.len() - 5]).unwrap();
    let out = pmlab(&["trace", "info", &bin]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("cut.bin: byte offset 96: record: truncated"),
        "{err}"
    );
    let out = pmlab(&["trace", "info", "/nonexistent.din"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("/nonexistent.din"));
}

#[test]
fn interleave_assigns_pids_and_reports_ends() {
    let dir = tempfile::tempdir().unwrap();
    let a = path(dir.path(), "a.din");
    let b = path(dir.path(), "b.din");
    std::fs::write(&a, "i 0 4\ni 4 4\ni 8 4\n").unwrap();
    std::fs::write(&b, "i 100 4\nr 200 4\ni 104 4\ni 108 4\ni 10c 4\ni 110 4\n").unwrap();
    let out_path = path(dir.path(), "m.bin");
    let out = pmlab(&[
        "trace",
        "interleave",
        "--switch",
        "2",
        "--asids",
        "5,9",
        &a,
        &b,
        "-o",
        &out_path,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("asid 5 ended after reference 6"), "{err}");
    assert!(err.contains("asid 9 ended after reference 9"), "{err}");
    let bytes = std::fs::read(&out_path).unwrap();
    let asids: Vec<u16> = bytes[16..]
        .chunks(16)
        .map(|r| u16::from_le_bytes([r[12], r[13]]))
        .collect();
    assert_eq!(asids, vec![5, 5, 9, 9, 9, 5, 9, 9, 9]);
}

#[test]
fn record_captures_a_program_or_explains_valgrind_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = path(dir.path(), "true.bin.zst");
    let out = pmlab(&[
        "trace",
        "record",
        "--max-refs",
        "5000",
        "--skip-refs",
        "100",
        "-o",
        &out_path,
        "--",
        "true",
    ]);
    let have_valgrind = Command::new("valgrind").arg("--version").output().is_ok();
    if !have_valgrind {
        assert!(!out.status.success());
        assert!(text(&out.stderr).contains("apt-get install valgrind"));
        return;
    }
    assert!(out.status.success(), "{}", text(&out.stderr));
    let info = text(&pmlab(&["trace", "info", &out_path]).stdout);
    assert!(info.contains("references     5000"), "{info}");
}

//! `pmlab bench` end to end on a small trace: every case is measured and the JSON
//! carries positive rates (no timing thresholds: rates depend on the machine).

use std::process::Command;

#[test]
fn bench_measures_every_case_and_writes_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("small.din");
    let mut text = String::new();
    for i in 0..20_000u64 {
        let kind = ["i", "r", "w"][(i % 3) as usize];
        text.push_str(&format!("{kind} {:x} 4\n", (i * 2654435761) % (1 << 22)));
    }
    std::fs::write(&trace, text).expect("write trace");
    let json = dir.path().join("bench.json");
    let out = Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .args(["bench", "--reps", "1", "--trace"])
        .arg(&trace)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run pmlab bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("one pass vs nine separate passes"),
        "{table}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid JSON");
    assert_eq!(doc["references"], 20_000);
    let cases = doc["cases"].as_array().expect("cases");
    let names: Vec<&str> = cases.iter().map(|c| c["case"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["dm32k", "kh-l1-l2", "kh-nine-one-pass", "kh-nine-separate"]
    );
    for c in cases {
        assert!(c["pmlab_binary_refs_per_s"].as_f64().unwrap() > 0.0);
        assert!(c["pmlab_din_refs_per_s"].as_f64().unwrap() > 0.0);
        assert!(c["dinero_refs_per_s"].is_null(), "no --dinero given");
    }
}

#[test]
fn bench_reports_a_missing_trace() {
    let out = Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .args(["bench", "--reps", "1", "--trace", "/nonexistent/trace.din"])
        .output()
        .expect("run pmlab bench");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/trace.din"));
}

/// With no `--trace`, an installed binary runs the trace it carries: a copy of the
/// binary alone in an empty directory, run from there, needs nothing beside it.
#[test]
fn bench_runs_its_built_in_trace_from_an_installed_binary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = dir.path().join("pmlab");
    std::fs::copy(env!("CARGO_BIN_EXE_pmlab"), &exe).expect("copy the binary");
    let out = Command::new(&exe)
        .current_dir(dir.path())
        .args([
            "bench", "--reps", "1", "--limit", "20000", "--json", "b.json",
        ])
        .output()
        .expect("run pmlab bench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("built-in sort.din.xz") && err.contains("(20000 references)"),
        "{err}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("b.json")).expect("json"))
            .expect("valid JSON");
    assert_eq!(doc["references"], 20_000);
}

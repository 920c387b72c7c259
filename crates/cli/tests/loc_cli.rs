//! `pmlab reproduce loc`'s command line: the sensitivity study runs instead of the
//! figures, so the figures' own switches are refused beside it, with an error naming
//! them and a non-zero exit.

use std::process::Command;

const PMLAB: &str = env!("CARGO_BIN_EXE_pmlab");

#[test]
fn the_sensitivity_study_refuses_the_figures_switches() {
    let out_dir = tempfile::tempdir().unwrap();
    for switch in ["--crash", "--no-crash", "--no-readings", "--no-overlapped"] {
        let out = Command::new(PMLAB)
            .args(["reproduce", "loc", "--sensitivity", switch, "--out"])
            .arg(out_dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{switch}: {err}");
        assert!(err.contains("cannot be used with"), "{switch}: {err}");
        assert!(err.contains(switch), "{switch}: {err}");
    }
    assert_eq!(
        std::fs::read_dir(out_dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

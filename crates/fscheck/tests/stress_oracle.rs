//! A short `pmlab fs stress` run with its fsync oracle: ten SIGKILLs of the service or a
//! client, each followed by recovery, fsck and the check of every acknowledged fsync.
//!
//! The driver needs executables to kill; a test cannot build the `pmlab` binary, so it
//! re-runs this test binary, whose `stress_child` test runs the role it is given in the
//! environment (and does nothing in an ordinary test run).

use pmlab_fscheck::stress::{self, Config, Launcher, Role};

#[test]
fn stress_child() {
    if let Some(role) = Role::from_env() {
        let code = match stress::run_role(&role) {
            Ok(()) => 0,
            Err(_) => 1,
        };
        // Never return into the test harness: the child is only this role.
        std::process::exit(code);
    }
}

#[test]
fn ten_kills_keep_every_fsync_promise() {
    let scratch = tempfile::tempdir().unwrap();
    let volume = scratch.path().join("vol");
    let cfg = Config {
        volume: volume.clone(),
        kills: 10,
        // Three clients, so that their lease traffic (revocations shipping journals
        // while the others work) is part of what every kill interrupts.
        clients: 3,
        seed: 7,
        launcher: Launcher::TestBinary {
            exe: std::env::current_exe().unwrap(),
            test: "stress_child".into(),
        },
        scm_model: Default::default(),
    };
    let rounds = stress::run(&cfg, |r| {
        eprintln!(
            "round {} killed {} after {} ms: {} acks, {} paths checked",
            r.round, r.killed, r.ran_ms, r.acks, r.checked
        )
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rounds.len(), 10);
    // The oracle must have had promises to check, or the run proves nothing.
    let acks: usize = rounds.iter().map(|r| r.acks).sum();
    assert!(acks > 0, "no fsync was acknowledged in ten rounds");
    assert!(rounds.iter().any(|r| r.checked > 0));
}

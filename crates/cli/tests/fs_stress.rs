//! A short `pmlab fs stress` run with its fsync oracle: ten SIGKILLs of the service or a
//! client, each followed by recovery, fsck and the check of every acknowledged fsync.
//! The processes it kills are the real `pmlab fs serve` and `pmlab fs stress-worker`.

use pmlab_fscheck::stress::{self, Config};

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
        pmlab: env!("CARGO_BIN_EXE_pmlab").into(),
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

//! libFS remembers which objects its leases cover, so that an operation does not walk
//! the tree up for every check. A lease taken back must end that memory at once: a
//! client that still thought itself covered would record a write that its own check,
//! or the service, then refuses.

mod support;

use pmlab_fs::pxfs::{Fd, OpenFlags, Pxfs};
use pmlab_fs::service::Config;
use support::users::Rig;

/// A service, two clients A and B, and file `/d/f` that A created (its descriptor).
fn two_clients_and_a_file() -> (Rig, Pxfs, Pxfs, Fd) {
    let rig = Rig::new(0o777, Config::default());
    let (a, b) = (
        Pxfs::mount(&rig.sock).unwrap(),
        Pxfs::mount(&rig.sock).unwrap(),
    );
    a.mkdir("/d", 0o755).unwrap();
    let fa = a.create("/d/f", 0o644).unwrap();
    (rig, a, b, fa)
}

/// Opening for writing.
fn rw() -> OpenFlags {
    OpenFlags {
        write: true,
        ..Default::default()
    }
}

#[test]
fn a_write_after_its_lease_was_taken_back_asks_for_the_lease_again() {
    let (mut rig, a, b, fa) = two_clients_and_a_file();
    a.pwrite(fa, 0, b"a-00").unwrap();
    a.fsync(fa).unwrap();
    for round in 1..=20 {
        // B's write takes back whatever lease A's writes were covered by (in round
        // 1 A's own; later B's read at the end of the round took it already).
        assert!(!a.client().leases().is_empty() || round > 1);
        let fb = b.open("/d/f", rw()).unwrap();
        b.pwrite(fb, 0, b"b-xx").unwrap();
        b.fsync(fb).unwrap();
        b.close(fb).unwrap();
        assert!(
            a.client().leases().is_empty(),
            "round {round}: A still holds {:?}",
            a.client().leases()
        );
        // A writes again through the descriptor it kept, past the end (the file's
        // size is metadata, recorded and checked): it must ask for the lease again,
        // not write on the strength of a cover it no longer has.
        let mine = format!("a-{round:02}");
        let at = 4 * round as u64;
        a.pwrite(fa, at, mine.as_bytes())
            .unwrap_or_else(|e| panic!("round {round}: A's write failed: {e}"));
        a.fsync(fa)
            .unwrap_or_else(|e| panic!("round {round}: A's fsync failed: {e}"));
        let mut got = [0u8; 4];
        let fb = b.open("/d/f", OpenFlags::default()).unwrap();
        b.pread(fb, at, &mut got).unwrap();
        b.close(fb).unwrap();
        assert_eq!(&got, mine.as_bytes(), "round {round}: A's write is lost");
    }
    a.close(fa).unwrap();
    drop((a, b));
    rig.svc.take().unwrap().stop().unwrap();
}

/// libFS's local check carries the objects it found covered from one recorded step to
/// the next, so that an append walks its file's ancestry once. A lease taken back must
/// end that too: a step recorded without the lease (here straight through the state,
/// past the lease requests every operation makes first) must be refused by the local
/// check, not left for the service to refuse after the application was told it
/// succeeded.
#[test]
fn the_local_check_forgets_what_it_found_covered_when_a_lease_is_taken_back() {
    use pmlab_fs::journal::Op;
    let (mut rig, a, b, fa) = two_clients_and_a_file();
    // Two appends: the second's check finds the file among the carried cover.
    a.pwrite(fa, 0, b"a-00").unwrap();
    a.pwrite(fa, 4, b"a-01").unwrap();
    a.fsync(fa).unwrap();
    let ino = a.client().resolve("/d/f").unwrap();
    // An append recorded in the same overlay, as a step of its own: the carried cover
    // is what the local check holds now.
    a.pwrite(fa, 8, b"a-02").unwrap();
    let fb = b.open("/d/f", rw()).unwrap();
    b.pwrite(fb, 0, b"b-xx").unwrap();
    b.fsync(fb).unwrap();
    assert!(
        a.client().leases().is_empty(),
        "B's write left A holding {:?}",
        a.client().leases()
    );
    let r = a
        .client()
        .state()
        .record_all(vec![Op::SetSize { ino, size: 64 }]);
    let e = r.expect_err("A's check accepted a step with no lease covering the file");
    assert!(
        e.to_string().contains("lease"),
        "refused for another reason: {e}"
    );
    b.close(fb).unwrap();
    a.close(fa).unwrap();
    drop((a, b));
    rig.svc.take().unwrap().stop().unwrap();
}

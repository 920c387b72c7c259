//! `Client::revocations_answered` counts the revocations a client answered: the
//! benchmarks report it per iteration, so it must count what happened and nothing else.

use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::pxfs::Pxfs;
use pmlab_fs::service;

#[test]
fn a_client_counts_the_revocations_it_answered() {
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    let sock = tmp.path().join("sock");
    pmlab_fs::volume::create(&vol, &Default::default(), RootOwner::current_user(0o777)).unwrap();
    let svc = service::spawn(&vol, &sock, service::Config::default()).unwrap();
    let (a, b) = (Pxfs::mount(&sock).unwrap(), Pxfs::mount(&sock).unwrap());
    a.mkdir("/d", 0o755).unwrap();
    let fd = a.create("/d/f", 0o644).unwrap();
    a.write(fd, b"abc").unwrap();
    a.close(fd).unwrap();
    assert_eq!(a.client().revocations_answered(), 0);
    // A holds an exclusive lease covering /d/f; B's read of it takes that lease back.
    assert_eq!(b.stat("/d/f").unwrap().size, 3);
    let after_one = a.client().revocations_answered();
    assert!(after_one >= 1, "A answered {after_one} revocations");
    assert_eq!(b.client().revocations_answered(), 0);
    // Reading again under the lease B now holds takes nothing from anyone.
    assert_eq!(b.stat("/d/f").unwrap().size, 3);
    assert_eq!(a.client().revocations_answered(), after_one);
    drop((a, b));
    svc.stop().unwrap();
}

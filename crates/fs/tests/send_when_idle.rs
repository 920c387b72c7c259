//! libFS sends what it records at once when nothing of the client is in flight (the
//! service would otherwise sit idle until the next fsync), and holds it for a later
//! batch while a batch or a copy of file data is in flight.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pmlab_fs::layout::Params;
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::pxfs::Pxfs;
use pmlab_fs::service;

/// Operations recorded and not yet sent.
fn held(fs: &Pxfs) -> usize {
    fs.client().state().pending_ops().len()
}

#[test]
fn a_recorded_operation_is_sent_at_once_only_when_nothing_is_in_flight() {
    let tmp = tempfile::tempdir_in("/dev/shm").expect("/dev/shm is a tmpfs on Linux");
    let (vol, sock) = (tmp.path().join("vol"), tmp.path().join("sock"));
    let params = Params {
        domain_pages: 1024,
        ..Params::default()
    };
    pmlab_fs::volume::create(&vol, &params, RootOwner::current_user(0o777)).unwrap();
    let svc = service::spawn(&vol, &sock, service::Config::default()).unwrap();
    let fs = Pxfs::mount(&sock).unwrap();
    let fd = fs.create("/f", 0o644).unwrap();
    fs.write(fd, &[5u8; 8192]).unwrap();
    fs.close(fd).unwrap();
    fs.sync().unwrap();

    // Nothing in flight after the sync: the first operation goes at once.
    let sent = fs.client().requests_sent();
    fs.mkdir("/a", 0o755).unwrap();
    assert_eq!(
        held(&fs),
        0,
        "an operation recorded with nothing in flight waited for the next fsync"
    );
    assert!(fs.client().requests_sent() > sent, "no batch was sent");
    // Its batch has not been waited for: the next one is held for a later batch.
    fs.mkdir("/b", 0o755).unwrap();
    assert_eq!(held(&fs), 1, "an operation was sent with a batch in flight");
    fs.sync().unwrap();
    assert_eq!(held(&fs), 0);

    // A copy of file data in flight holds what is recorded too: a batch that freed the
    // copied pages would have to wait for the copy.
    let ino = fs.stat("/f").unwrap().ino;
    let d = fs.client().state().inode(ino).unwrap().domain;
    let copy = fs
        .client()
        .state()
        .begin_copy(d, false, usize::MAX)
        .unwrap()
        .expect("mapped");
    // Sending would wait for the copy, which this thread holds: the operation runs on
    // another thread, and the copy goes after a while however it went.
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            fs.mkdir("/c", 0o755).unwrap();
            done.store(true, Ordering::SeqCst);
        });
        let since = Instant::now();
        while !done.load(Ordering::SeqCst) && since.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let finished = done.load(Ordering::SeqCst);
        drop(copy);
        assert!(
            finished,
            "an operation recorded with a copy in flight waited for the copy"
        );
    });
    assert_eq!(held(&fs), 1, "an operation was sent with a copy in flight");
    fs.sync().unwrap();
    for dir in ["/a", "/b", "/c"] {
        assert!(fs.stat(dir).is_ok(), "{dir} was not applied");
    }
    drop(fs);
    svc.stop().unwrap();
}

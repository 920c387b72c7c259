//! An fsync waits for the service without holding libFS's state, so the other threads
//! of the process go on meanwhile and their operations ride the next batch.
//!
//! The service runs in a child process (this test re-executed in the `serve` role), so
//! that the test can stop it: with the service stopped, one thread's fsync cannot
//! come back, and another thread's write, which needs nothing of the service, must
//! still complete. With the state held across the round trip, it waits for the
//! service like the fsync. The same holds for a second fsync that finds its operations
//! already shipped by the first: it waits for the first's batch, without the state.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use pmlab_fs::layout::Params;
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::pxfs::{Fd, OpenFlags, Pxfs};
use pmlab_fs::service::{self, Config};
use pmlab_testkit::child;

const TEST: &str = "a_write_completes_while_another_threads_fsync_waits_for_the_service";

fn serve(_: &str) {
    let vol = std::env::var("PMLAB_FS_VOL").unwrap();
    let sock = std::env::var("PMLAB_FS_SOCK").unwrap();
    let _svc = service::spawn(Path::new(&vol), Path::new(&sock), Config::default()).unwrap();
    println!("MARK serving");
    loop {
        std::thread::park();
    }
}

/// The service process, killed (and resumed first, were it stopped) however the test
/// ends.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        signal(self.0.id(), libc::SIGCONT);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Stops or resumes the service process.
fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0);
}

/// Stops the service process and returns once every thread of it has stopped: kill(2)
/// returns before a thread running on another processor has taken the signal, and a
/// batch sent meanwhile could still be applied.
fn stop(pid: u32) {
    signal(pid, libc::SIGSTOP);
    let stopped = |stat: String| {
        // The state follows the command name's closing parenthesis.
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        matches!(state.and_then(|r| r.chars().next()), Some('T' | 't'))
    };
    let since = Instant::now();
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        let all = tasks
            .flatten()
            .all(|t| std::fs::read_to_string(t.path().join("stat")).is_ok_and(stopped));
        if all {
            return;
        }
        assert!(
            since.elapsed() < Duration::from_secs(5),
            "the service did not stop"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A volume served by a child process, and a mount of it with two files written and
/// synced: their leases are held and their pages mapped, so overwriting them needs
/// nothing of the service. Returns the files open for writing.
fn setup(test: &str) -> (tempfile::TempDir, Server, Pxfs, Fd, Fd) {
    let tmp = tempfile::tempdir_in("/dev/shm").unwrap();
    let (vol, sock) = (tmp.path().join("vol"), tmp.path().join("sock"));
    let params = Params {
        domain_pages: 1024,
        ..Params::default()
    };
    pmlab_fs::volume::create(&vol, &params, RootOwner::current_user(0o777)).unwrap();
    let svc = Server(
        child::command(test, "serve")
            .env("PMLAB_FS_VOL", &vol)
            .env("PMLAB_FS_SOCK", &sock)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let since = Instant::now();
    while !sock.exists() && since.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let fs = Pxfs::mount(&sock).unwrap();
    let rw = OpenFlags {
        write: true,
        ..Default::default()
    };
    for f in ["/a", "/b"] {
        let fd = fs.create(f, 0o644).unwrap();
        fs.write(fd, &[1u8; 8192]).unwrap();
        fs.fsync(fd).unwrap();
        fs.close(fd).unwrap();
    }
    let (a, b) = (fs.open("/a", rw).unwrap(), fs.open("/b", rw).unwrap());
    (tmp, svc, fs, a, b)
}

/// Overwrites `b` (which needs nothing of the service) on a thread of scope `s`, and
/// returns whether that completed within 5 s, with the thread to join once the service
/// runs again.
fn write_meanwhile<'s>(
    s: &'s Scope<'s, '_>,
    fs: &'s Pxfs,
    b: Fd,
) -> (bool, ScopedJoinHandle<'s, ()>) {
    let written = Arc::new(AtomicBool::new(false));
    let flag = written.clone();
    let writer = s.spawn(move || {
        fs.pwrite(b, 100, b"meanwhile").unwrap();
        flag.store(true, Ordering::SeqCst);
    });
    let since = Instant::now();
    while !written.load(Ordering::SeqCst) && since.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    (written.load(Ordering::SeqCst), writer)
}

#[test]
fn a_write_completes_while_another_threads_fsync_waits_for_the_service() {
    child::branch(serve);
    let (_tmp, svc, fs, a, b) = setup(TEST);
    // The service stops first: libFS sends what it records at once when nothing is in
    // flight, and the fsync must find that batch not yet applied.
    stop(svc.0.id());
    // A write that grows /a: a size change for the fsync to wait for.
    fs.pwrite(a, 8192, b"changed").unwrap();
    std::thread::scope(|s| {
        let syncer = s.spawn(|| fs.fsync(a));
        // Long enough for the fsync to have sent its batch and be waiting.
        std::thread::sleep(Duration::from_millis(200));
        let (during, writer) = write_meanwhile(s, &fs, b);
        let synced_early = syncer.is_finished();
        signal(svc.0.id(), libc::SIGCONT);
        writer.join().unwrap();
        let synced = syncer.join().unwrap();
        assert!(
            !synced_early,
            "the fsync came back with the service stopped: {synced:?}"
        );
        synced.unwrap();
        assert!(
            during,
            "a write that needs nothing of the service waited for another thread's fsync"
        );
    });
    fs.fsync(b).unwrap();
    let mut got = [0u8; 9];
    fs.pread(b, 100, &mut got).unwrap();
    assert_eq!(&got, b"meanwhile");
}

const FOLLOWER: &str = "an_fsync_whose_operations_another_fsync_shipped_waits_without_the_state";

#[test]
fn an_fsync_whose_operations_another_fsync_shipped_waits_without_the_state() {
    child::branch(serve);
    let (_tmp, svc, fs, a, b) = setup(FOLLOWER);
    // Stopped before the write is recorded (and sent at once), as above.
    stop(svc.0.id());
    fs.pwrite(a, 8192, b"changed").unwrap();
    std::thread::scope(|s| {
        let leader = s.spawn(|| fs.fsync(a));
        std::thread::sleep(Duration::from_millis(200));
        // Its operation is in the leader's batch: nothing of its own to send.
        let follower = s.spawn(|| fs.fsync(a));
        std::thread::sleep(Duration::from_millis(200));
        let (during, writer) = write_meanwhile(s, &fs, b);
        let (led_early, followed_early) = (leader.is_finished(), follower.is_finished());
        signal(svc.0.id(), libc::SIGCONT);
        writer.join().unwrap();
        let (led, followed) = (leader.join().unwrap(), follower.join().unwrap());
        assert!(
            !followed_early,
            "an fsync came back before the batch holding its operations was applied: \
             {followed:?} (the first: {led:?})"
        );
        assert!(
            !led_early,
            "the first fsync came back with the service stopped"
        );
        led.unwrap();
        followed.unwrap();
        assert!(
            during,
            "a write waited for an fsync that had nothing of its own to send"
        );
    });
}

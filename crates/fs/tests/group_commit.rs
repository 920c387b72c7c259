//! An fsync waits for the service without holding libFS's state, so the other threads
//! of the process go on meanwhile and their operations ride the next batch.
//!
//! The service runs in a child process (this test re-executed in the `serve` role), so
//! that the test can stop it: with the service stopped, one thread's fsync cannot
//! come back, and another thread's write, which needs nothing of the service, must
//! still complete. With the state held across the round trip, it waits for the
//! service like the fsync.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pmlab_fs::layout::Params;
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::pxfs::{OpenFlags, Pxfs};
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

#[test]
fn a_write_completes_while_another_threads_fsync_waits_for_the_service() {
    child::branch(serve);
    let tmp = tempfile::tempdir_in("/dev/shm").unwrap();
    let (vol, sock) = (tmp.path().join("vol"), tmp.path().join("sock"));
    let params = Params {
        domain_pages: 1024,
        ..Params::default()
    };
    pmlab_fs::volume::create(&vol, &params, RootOwner::current_user(0o777)).unwrap();
    let svc = Server(
        child::command(TEST, "serve")
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
    // Two files written and synced: their leases are held and their pages mapped, so
    // overwriting them needs nothing of the service.
    for f in ["/a", "/b"] {
        let fd = fs.create(f, 0o644).unwrap();
        fs.write(fd, &[1u8; 8192]).unwrap();
        fs.fsync(fd).unwrap();
        fs.close(fd).unwrap();
    }
    let (a, b) = (fs.open("/a", rw).unwrap(), fs.open("/b", rw).unwrap());
    // A write that grows /a: a size change for the fsync to ship.
    fs.pwrite(a, 8192, b"changed").unwrap();
    let written = AtomicBool::new(false);
    std::thread::scope(|s| {
        signal(svc.0.id(), libc::SIGSTOP);
        let syncer = s.spawn(|| fs.fsync(a));
        // Long enough for the fsync to have sent its batch and be waiting.
        std::thread::sleep(Duration::from_millis(200));
        let writer = s.spawn(|| {
            fs.pwrite(b, 100, b"meanwhile").unwrap();
            written.store(true, Ordering::SeqCst);
        });
        let since = Instant::now();
        while !written.load(Ordering::SeqCst) && since.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let during = written.load(Ordering::SeqCst);
        let synced_early = syncer.is_finished();
        signal(svc.0.id(), libc::SIGCONT);
        writer.join().unwrap();
        syncer.join().unwrap().unwrap();
        assert!(
            !synced_early,
            "the fsync came back with the service stopped"
        );
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

//! Open files are registered with the service lazily: opening and closing cost no
//! request, yet a file another client unlinks stays readable to its openers, and the
//! service frees it when the last of them closes it or dies.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use pmlab_fs::inode::Kind;
use pmlab_fs::layout::Params;
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::pxfs::{OpenFlags, Pxfs};
use pmlab_fs::service::{self, Config, Handle};
use pmlab_fs::view::PageSource;

use pmlab_testkit::child;

struct Rig {
    _tmp: tempfile::TempDir,
    vol: PathBuf,
    sock: PathBuf,
    svc: Option<Handle>,
}

fn rig() -> Rig {
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    let sock = tmp.path().join("sock");
    let p = Params {
        meta_pages: 2048,
        inodes: 31 * 64,
        log_pages: 200,
        max_domains: 8,
        domain_pages: 4096,
        kv_object_pages: 1,
        volume_id: 5,
    };
    let root = RootOwner {
        uid: 0,
        gid: 0,
        mode: 0o777,
    };
    pmlab_fs::volume::create(&vol, &p, root).unwrap();
    let cfg = Config::with_lease_timeout(Duration::from_secs(5));
    let svc = service::spawn(&vol, &sock, cfg).unwrap();
    Rig {
        _tmp: tmp,
        vol,
        sock,
        svc: Some(svc),
    }
}

impl Rig {
    fn stop_and_check(mut self) {
        self.svc.take().unwrap().stop().unwrap();
        let r = pmlab_fs::fsck::fsck_volume(&self.vol).unwrap();
        assert!(r.clean() && r.findings.is_empty(), "{:#?}", r.findings);
    }
}

/// Inode `ino` as it is on the media now (no cache, no lease: the test only watches).
fn kind_and_links(fs: &Pxfs, ino: u64) -> (Kind, u32) {
    let i = fs.client().state().with_view(|v| v.inode(ino)).unwrap();
    (i.kind, i.nlink)
}

/// Waits (boundedly) until the service has freed `ino`; false if it never did.
fn freed_soon(fs: &Pxfs, ino: u64) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        if kind_and_links(fs, ino).0 == Kind::Free {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn make_file(fs: &Pxfs, path: &str, fill: u8) -> u64 {
    let fd = fs.create(path, 0o666).unwrap();
    fs.write(fd, &vec![fill; 6000]).unwrap();
    let ino = fs.fstat(fd).unwrap().ino;
    fs.close(fd).unwrap();
    fs.sync().unwrap();
    ino
}

#[test]
fn opening_and_closing_a_file_sends_no_request() {
    let r = rig();
    {
        let a = Pxfs::mount(&r.sock).unwrap();
        a.mkdir("/d", 0o777).unwrap();
        make_file(&a, "/d/f", 1);
        // The first open takes the leases it needs; later ones reuse them.
        let fd = a.open("/d/f", OpenFlags::default()).unwrap();
        a.close(fd).unwrap();
        let before = a.client().requests_sent();
        let mut buf = [0u8; 4096];
        for _ in 0..50 {
            let fd = a.open("/d/f", OpenFlags::default()).unwrap();
            assert_eq!(a.pread(fd, 0, &mut buf).unwrap(), 4096);
            a.close(fd).unwrap();
        }
        assert_eq!(a.client().requests_sent(), before);
        assert!(a.client().state().registered_opens().is_empty());
    }
    r.stop_and_check();
}

#[test]
fn a_file_another_client_unlinks_stays_readable_and_is_freed_on_close() {
    let r = rig();
    {
        let a = Pxfs::mount(&r.sock).unwrap();
        let b = Pxfs::mount(&r.sock).unwrap();
        a.mkdir("/d", 0o777).unwrap();
        let ino = make_file(&a, "/d/f", 7);
        let fd = a.open("/d/f", OpenFlags::default()).unwrap();
        assert!(a.client().state().registered_opens().is_empty());
        // b's lease on /d makes the service revoke a's, and a registers its open file.
        b.unlink("/d/f").unwrap();
        b.sync().unwrap();
        assert_eq!(a.client().state().registered_opens(), vec![ino]);
        assert!(b.stat("/d/f").is_err());
        let mut buf = vec![0u8; 6000];
        assert_eq!(a.pread(fd, 0, &mut buf).unwrap(), 6000);
        assert!(buf.iter().all(|&x| x == 7));
        assert_eq!(a.fstat(fd).unwrap().nlink, 0);
        assert_eq!(kind_and_links(&b, ino), (Kind::File, 0));
        a.close(fd).unwrap();
        assert_eq!(kind_and_links(&b, ino).0, Kind::Free);
    }
    r.stop_and_check();
}

#[test]
fn a_file_its_opener_unlinks_stays_readable_until_closed() {
    let r = rig();
    {
        let a = Pxfs::mount(&r.sock).unwrap();
        let ino = make_file(&a, "/f", 3);
        let fd = a.open("/f", OpenFlags::default()).unwrap();
        a.unlink("/f").unwrap();
        // Shipping the unlink registers the open file first: it stays.
        a.sync().unwrap();
        assert_eq!(a.client().state().registered_opens(), vec![ino]);
        let mut buf = vec![0u8; 6000];
        assert_eq!(a.pread(fd, 0, &mut buf).unwrap(), 6000);
        assert!(buf.iter().all(|&x| x == 3));
        a.close(fd).unwrap();
        assert_eq!(kind_and_links(&a, ino).0, Kind::Free);
    }
    r.stop_and_check();
}

/// The body of a client process that opens a file and waits to be killed.
fn holder_process(sock: &str) {
    let fs = Pxfs::mount(Path::new(&sock)).unwrap();
    let fd = fs.open("/d/f", OpenFlags::default()).unwrap();
    let mut buf = [0u8; 16];
    fs.read(fd, &mut buf).unwrap();
    println!("MARK open");
    // Wait for the kill: the parent never writes to stdin, and closes it only by
    // dying, in which case the holder's end is the same as being killed.
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

#[test]
fn the_service_frees_an_unlinked_file_when_its_opener_dies() {
    child::branch(holder_process);
    let r = rig();
    let b = Pxfs::mount(&r.sock).unwrap();
    b.mkdir("/d", 0o777).unwrap();
    let ino = make_file(&b, "/d/f", 9);
    let sock = r.sock.to_str().unwrap();
    let mut child = child::command(
        "the_service_frees_an_unlinked_file_when_its_opener_dies",
        sock,
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("MARK open") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the holder ended early"
        );
    }
    b.unlink("/d/f").unwrap();
    b.sync().unwrap();
    // The holder registered its open file when it gave back its lease: an orphan.
    assert_eq!(kind_and_links(&b, ino), (Kind::File, 0));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(freed_soon(&b, ino), "inode {ino} was never freed");
    drop(b);
    r.stop_and_check();
}

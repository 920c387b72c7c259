//! A volume's files are the service's alone: created 0600 whatever the umask, refused
//! if another user could write them, and a client that may write a domain cannot kill
//! the readers of other users by cutting its data space short.

mod support;
use pmlab_testkit::child;
use support::raw::Raw;
use support::users::{Kid, Rig, mark, root_or_skip, sock, wait_line};

use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use pmlab_fs::proto::{Reply, Request};
use pmlab_fs::pxfs::{OpenFlags, Pxfs};

const UMASK_TEST: &str = "volume_files_are_0600_whatever_the_umask";

/// A process with umask 000 builds a volume and serves it; a client of another user
/// in the volume's group then tries to reopen its metadata descriptor read-write.
fn builder(dir: &str) {
    nix::sys::stat::umask(nix::sys::stat::Mode::empty());
    let dir = std::path::Path::new(dir);
    let vol = dir.join("vol");
    let sock = dir.join("sock");
    let owner = pmlab_fs::mkfs::RootOwner {
        uid: 0,
        gid: 0,
        mode: 0o777,
    };
    pmlab_fs::volume::create(&vol, &support::users::params(), owner).unwrap();
    let svc = pmlab_fs::service::spawn(&vol, &sock, Default::default()).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    // A domain, so that a data space exists too.
    let fs = Pxfs::mount(&sock).unwrap();
    let fd = fs.create("/f", 0o644).unwrap();
    fs.write(fd, b"x").unwrap();
    fs.close(fd).unwrap();
    fs.sync().unwrap();
    mark("serving");
    wait_line();
    drop(fs);
    svc.stop().unwrap();
}

/// A client in the volume's group (gid 0) but not its owner.
fn group_member() {
    let r = Raw::connect(&sock());
    let path = format!("/proc/self/fd/{}", r.meta.as_raw_fd());
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
    {
        Ok(_) => mark("reopened read-write"),
        Err(e) => mark(&format!("reopen refused {e}")),
    }
}

#[test]
fn volume_files_are_0600_whatever_the_umask() {
    child::branch(|role| match role.split_once(' ') {
        Some(("builder", dir)) => builder(dir),
        _ => group_member(),
    });
    if !root_or_skip(UMASK_TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let role = format!("builder {}", tmp.path().display());
    let mut b = Kid::spawn(UMASK_TEST, &role, 0, 0, &tmp.path().join("none"));
    b.expect("serving");
    let vol = tmp.path().join("vol");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&vol), 0o700, "the volume directory");
    for name in ["meta", "data.0"] {
        assert_eq!(mode(&vol.join(name)), 0o600, "{name} under umask 000");
    }
    let g = Kid::spawn(UMASK_TEST, "member", 2000, 0, &tmp.path().join("sock"));
    let (st, log) = g.finish();
    assert!(st.success() && log.contains("MARK reopen refused"), "{log}");
    b.say("stop");
    let (st, log) = b.finish();
    assert!(st.success(), "{log}");
    // The service refuses a volume another user could write, and says why.
    std::fs::set_permissions(vol.join("meta"), std::fs::Permissions::from_mode(0o660)).unwrap();
    let e = pmlab_fs::service::spawn(&vol, &tmp.path().join("sock2"), Default::default())
        .err()
        .expect("served a volume whose metadata its group may write");
    let e = e.to_string();
    assert!(
        e.contains("meta") && e.contains("mode 660") && e.contains("only writer"),
        "{e}"
    );
}

const CUT_TEST: &str = "a_writer_cutting_a_data_space_short_kills_no_reader";

/// The writer (owner of the domain): cuts the data space short through the read-write
/// descriptor the service hands it, again and again (the service puts the size back
/// within a tick), until told to stop.
fn cutter(domain: u16) {
    let mut r = Raw::connect(&sock());
    let (rep, fds) = r.call_fds(Request::MapDomain { domain }, &[]);
    assert!(matches!(rep, Reply::Domain { .. }), "{rep:?}");
    let f = std::fs::File::from(fds.into_iter().next().unwrap());
    f.set_len(8192).unwrap();
    mark("cut");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = f.set_len(8192);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    wait_line();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    t.join().unwrap();
}

/// The reader (another user, read-only): reads before and after the cut.
fn reader() {
    let fs = Pxfs::mount(&sock()).unwrap();
    let fd = fs.open("/w/f", OpenFlags::default()).unwrap();
    let mut b = vec![0u8; 65536];
    assert_eq!(fs.pread(fd, 0, &mut b).unwrap(), 65536);
    assert!(b.iter().all(|&x| x == 7));
    mark("read");
    assert_eq!(wait_line(), "read again");
    match fs.pread(fd, 0, &mut b) {
        Ok(n) => mark(&format!("survived read {n}")),
        Err(e) => mark(&format!("survived error {e}")),
    }
    // Mapped again after the service restored the size: reads work again.
    let t = std::time::Instant::now();
    loop {
        if fs.pread(fd, 0, &mut b).is_ok() {
            mark("reads again");
            break;
        }
        assert!(t.elapsed().as_secs() < 20, "no read ever worked again");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_writer_cutting_a_data_space_short_kills_no_reader() {
    child::branch(|role| match role.split_once(' ') {
        Some(("cutter", d)) => cutter(d.parse().unwrap()),
        _ => reader(),
    });
    if !root_or_skip(CUT_TEST) {
        return;
    }
    let rig = Rig::quick(0o755);
    let domain = {
        let fs = Pxfs::mount(&rig.sock).unwrap();
        fs.mkdir("/w", 0o755).unwrap();
        let fd = fs.create("/w/f", 0o644).unwrap();
        fs.write(fd, &[7u8; 65536]).unwrap();
        fs.close(fd).unwrap();
        fs.sync().unwrap();
        let ino = fs.stat("/w/f").unwrap().ino;
        fs.client().state().inode(ino).unwrap().domain
    };
    let mut rd = Kid::spawn(CUT_TEST, "reader", 1001, 1001, &rig.sock);
    rd.expect("read");
    let mut c = Kid::spawn(CUT_TEST, &format!("cutter {domain}"), 0, 0, &rig.sock);
    c.expect("cut");
    rd.say("read again");
    let got = rd.expect("survived");
    c.say("stop");
    let (st, log) = c.finish();
    assert!(st.success(), "{log}");
    let (st, log) = rd.finish();
    assert!(
        st.success() && log.contains("MARK reads again"),
        "the reader did not survive the cut: {st:?}\n{log}"
    );
    // The read that met the cut file failed as an I/O error (the SIGBUS was caught).
    assert!(got.starts_with("error") && got.contains("SIGBUS"), "{got}");
    let r = pmlab_fs::fsck::fsck_volume(&rig.vol).unwrap();
    assert!(r.clean(), "{:#?}", r.findings);
    rig.stop_and_check();
}

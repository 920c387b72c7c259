//! File permissions the kernel's file systems enforce and memory mappings alone cannot:
//! write-only files, and search and read bits of directories on lookups through the
//! service. Each check runs as another user ([`pmlab_testkit::child`]).

mod support;
use pmlab_testkit::child;
use support::raw::Raw;
use support::users::{Kid, Rig, mark, root_or_skip, sock};

use pmlab_fs::FsError;
use pmlab_fs::proto::{Reply, Request};
use pmlab_fs::pxfs::{OpenFlags, Pxfs};

const WO_TEST: &str = "a_write_only_file_is_written_through_the_service_and_never_readable";

/// The owner of a file it may only write (mode 0200): writes it, and cannot read it
/// back by any path, its data space's mapping included.
fn write_only_owner() {
    let fs = Pxfs::mount(&sock()).unwrap();
    let fd = fs.create("/wo", 0o200).unwrap();
    fs.write(fd, b"write-only data").unwrap();
    fs.fsync(fd).unwrap();
    fs.close(fd).unwrap();
    mark("written");
    match fs.open("/wo", OpenFlags::default()) {
        Err(FsError::Denied(_)) => mark("open-for-read denied"),
        other => mark(&format!("open-for-read allowed {:?}", other.map(|f| f.0))),
    }
    let ino = fs.stat("/wo").unwrap().ino;
    let d = fs.client().state().inode(ino).unwrap().domain;
    match fs.client().state().data(d) {
        Err(e) => mark(&format!("mapping refused {e}")),
        Ok(m) => mark(&format!("mapping granted writable={}", m.writable())),
    }
}

#[test]
fn a_write_only_file_is_written_through_the_service_and_never_readable() {
    child::branch(|_| write_only_owner());
    if !root_or_skip(WO_TEST) {
        return;
    }
    let rig = Rig::quick(0o777);
    let k = Kid::spawn(WO_TEST, "owner", 1000, 1000, &rig.sock);
    let (st, log) = k.finish();
    assert!(st.success() && log.contains("MARK written"), "{log}");
    assert!(log.contains("MARK open-for-read denied"), "{log}");
    assert!(
        log.contains("MARK mapping refused") && log.contains("write-only"),
        "a client that may only write a file was handed a mapping of its data: {log}"
    );
    let fs = Pxfs::mount(&rig.sock).unwrap();
    let fd = fs.open("/wo", OpenFlags::default()).unwrap();
    let mut b = [0u8; 32];
    let n = fs.read(fd, &mut b).unwrap();
    assert_eq!(&b[..n], b"write-only data");
    fs.close(fd).unwrap();
    drop(fs);
    rig.stop_and_check();
}

const SEARCH_TEST: &str = "search_and_read_bits_hold_on_lookups_through_the_service";

/// Another user than the directories' owner: looks names up below a directory it may
/// not search, and lists one it may search but not read; then asks the service
/// directly for leases on what lies below.
fn stranger(inos: &str) {
    let v: Vec<u64> = inos.split(' ').map(|x| x.parse().unwrap()).collect();
    let fs = Pxfs::mount(&sock()).unwrap();
    let show = |what: &str, r: pmlab_fs::Result<()>| match r {
        Ok(()) => mark(&format!("{what} allowed")),
        Err(e) => mark(&format!("{what} refused {e}")),
    };
    show("stat-below-unsearchable", fs.stat("/p/f").map(drop));
    show("stat-below-searchable", fs.stat("/s/g").map(drop));
    show("readdir-unreadable", fs.readdir("/s").map(drop));
    let mut r = Raw::connect(&sock());
    for (what, key) in [
        ("lease-below-unsearchable", v[0]),
        ("lease-on-unsearchable", v[1]),
    ] {
        match r.call(
            Request::Acquire {
                key,
                exclusive: false,
            },
            &[],
        ) {
            Reply::Granted { .. } => mark(&format!("{what} allowed")),
            Reply::Err(_, e) => mark(&format!("{what} refused {e}")),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn search_and_read_bits_hold_on_lookups_through_the_service() {
    child::branch(stranger);
    if !root_or_skip(SEARCH_TEST) {
        return;
    }
    let rig = Rig::quick(0o755);
    let inos = {
        let fs = Pxfs::mount(&rig.sock).unwrap();
        fs.mkdir("/p", 0o700).unwrap();
        fs.mkdir("/s", 0o711).unwrap();
        for f in ["/p/f", "/s/g"] {
            let fd = fs.create(f, 0o644).unwrap();
            fs.write(fd, b"x").unwrap();
            fs.close(fd).unwrap();
        }
        fs.sync().unwrap();
        format!(
            "{} {}",
            fs.stat("/p/f").unwrap().ino,
            fs.stat("/p").unwrap().ino
        )
    };
    let k = Kid::spawn(SEARCH_TEST, &inos, 1001, 1001, &rig.sock);
    let (st, log) = k.finish();
    assert!(st.success(), "{log}");
    for refused in [
        "stat-below-unsearchable refused",
        "readdir-unreadable refused",
        "lease-below-unsearchable refused",
        "lease-on-unsearchable refused",
    ] {
        assert!(log.contains(&format!("MARK {refused}")), "{refused}: {log}");
    }
    assert!(log.contains("MARK stat-below-searchable allowed"), "{log}");
    rig.stop_and_check();
}

//! Protection by the kernel: a client holds no writable mapping of anything it may not
//! write. Each check runs in a separate process (this test re-executed as an
//! unprivileged user, [`pmlab_testkit::child`]) and must die of SIGSEGV when it stores into
//! memory it may only read.

use pmlab_testkit::child;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use pmlab_fs::FsError;
use pmlab_fs::layout::Params;
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::pxfs::{OpenFlags, Pxfs};
use pmlab_fs::service::{self, Config};

const NOBODY: u32 = 65534;

const TEST: &str = "clients_fault_on_what_they_may_not_write";

/// Runs one role in a child process as `uid`; returns its status and output.
fn run_as(role: &str, sock: &Path, uid: u32) -> (std::process::ExitStatus, String) {
    let exe = child::ForeignExecutable::new().unwrap();
    let out = exe
        .command_as(TEST, role, uid, uid)
        .env("PMLAB_FS_SOCK", sock)
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The body of a child process: one attempt to touch what the client may not.
fn child_role(role: &str) {
    let sock = std::env::var("PMLAB_FS_SOCK").unwrap();
    let fs = Pxfs::mount(Path::new(&sock)).unwrap();
    let fd = fs.open("/public", OpenFlags::default()).unwrap();
    let mut b = [0u8; 6];
    fs.pread(fd, 0, &mut b).unwrap();
    assert_eq!(&b, b"public");
    println!("MARK read-ok");
    match role {
        "write-metadata" => {
            let p = fs.client().state().meta_map().as_ptr();
            // The descriptor is read-only: the kernel refuses to make the mapping writable.
            let r = unsafe { libc::mprotect(p.cast(), 4096, libc::PROT_READ | libc::PROT_WRITE) };
            assert_eq!(r, -1);
            println!("MARK mprotect-refused");
            unsafe { std::ptr::write_volatile(p.add(4096 * 3), 0xff) };
            println!("MARK wrote-metadata");
        }
        "write-data" => {
            let w = fs.open(
                "/public",
                OpenFlags {
                    write: true,
                    ..Default::default()
                },
            );
            assert!(matches!(w, Err(FsError::Denied(_))), "{:?}", w.err());
            println!("MARK open-denied");
            let st = fs.fstat(fd).unwrap();
            let mut s = fs.client().state();
            let i = s.inode(st.ino).unwrap();
            let page = s.page_of(st.ino, &i, 0).unwrap();
            let m = s.data(i.domain).unwrap();
            assert!(!m.writable());
            println!("MARK mapping-read-only");
            unsafe { std::ptr::write_volatile(m.as_ptr().add((page * 4096) as usize), b'X') };
            println!("MARK wrote-data");
        }
        "private" => {
            let r = fs.open("/private", OpenFlags::default());
            assert!(matches!(r, Err(FsError::Denied(_))), "{:?}", r.err());
            // Not even the library's raw path reaches the data: the service will not
            // hand over the domain's descriptor.
            let ino = fs.client().resolve("/private").unwrap();
            let d = fs.client().state().inode(ino).unwrap().domain;
            let e = fs
                .client()
                .state()
                .data(d)
                .err()
                .expect("mapped another user's private domain");
            assert!(e.to_string().contains("may not access"), "{e}");
            println!("MARK private-refused");
        }
        r => panic!("unknown role {r}"),
    }
}

#[test]
fn clients_fault_on_what_they_may_not_write() {
    child::branch(child_role);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let vol = tmp.path().join("vol");
    let sock = tmp.path().join("sock");
    let p = Params {
        meta_pages: 1024,
        inodes: 31 * 32,
        log_pages: 100,
        max_domains: 8,
        domain_pages: 1024,
        kv_object_pages: 1,
        volume_id: 5,
    };
    pmlab_fs::volume::create(
        &vol,
        &p,
        RootOwner {
            uid: 0,
            gid: 0,
            mode: 0o755,
        },
    )
    .unwrap();
    let svc = service::spawn(
        &vol,
        &sock,
        Config::with_lease_timeout(Duration::from_millis(500)),
    )
    .unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    {
        let fs = Pxfs::mount(&sock).unwrap();
        let fd = fs.create("/public", 0o644).unwrap();
        fs.write(fd, b"public data").unwrap();
        fs.close(fd).unwrap();
        let fd = fs.create("/private", 0o600).unwrap();
        fs.write(fd, b"secret").unwrap();
        fs.close(fd).unwrap();
        fs.sync().unwrap();
    }
    let before = std::fs::read(pmlab_fs::volume::meta_path(&vol)).unwrap();

    let (st, out) = run_as("write-metadata", &sock, NOBODY);
    assert!(
        out.contains("MARK mprotect-refused") && !out.contains("MARK wrote-metadata"),
        "{out}"
    );
    assert_eq!(st.signal(), Some(libc::SIGSEGV), "{out}");

    let (st, out) = run_as("write-data", &sock, NOBODY);
    assert!(
        out.contains("MARK mapping-read-only") && !out.contains("MARK wrote-data"),
        "{out}"
    );
    assert_eq!(st.signal(), Some(libc::SIGSEGV), "{out}");

    let (st, out) = run_as("private", &sock, NOBODY);
    assert!(
        st.success() && out.contains("MARK private-refused"),
        "{out}"
    );

    // Root's client may write the same data: the fault above is the permission, not a bug.
    let (st, out) = run_as("write-metadata", &sock, 0);
    assert_eq!(st.signal(), Some(libc::SIGSEGV), "{out}");

    // Stopping the service waits for it to finish with every connection.
    svc.stop().unwrap();
    assert!(std::fs::read(pmlab_fs::volume::meta_path(&vol)).unwrap() == before);
    let svc = service::spawn(&vol, &sock, Config::default()).unwrap();
    let fs = Pxfs::mount(&sock).unwrap();
    let fd = fs.open("/public", OpenFlags::default()).unwrap();
    let mut b = [0u8; 11];
    fs.pread(fd, 0, &mut b).unwrap();
    assert_eq!(&b, b"public data");
    drop(fs);
    svc.stop().unwrap();
    let r = pmlab_fs::fsck::fsck_volume(&vol).unwrap();
    assert!(r.clean() && r.findings.is_empty(), "{:#?}", r.findings);
}

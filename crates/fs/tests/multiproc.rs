//! Several client processes at once: each is this test re-executed in a client role
//! ([`pmlab_testkit::child`]), working on the volume through its own libFS connection.

use pmlab_testkit::child;

use std::path::Path;
use std::time::Duration;

use pmlab_fs::layout::Params;
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::pxfs::{OpenFlags, Pxfs};
use pmlab_fs::service::{self, Config};

const CLIENTS: usize = 4;
const FILES: usize = 20;

/// The body of client process `me`.
fn client_process(me: &str) {
    let sock = std::env::var("PMLAB_FS_SOCK").unwrap();
    let fs = Pxfs::mount(Path::new(&sock)).unwrap();
    let me: usize = me.parse().unwrap();
    fs.mkdir(&format!("/c{me}"), 0o755).unwrap();
    for k in 0..FILES {
        let fd = fs.create(&format!("/c{me}/f{k}"), 0o644).unwrap();
        fs.write(fd, format!("client {me} file {k}").as_bytes())
            .unwrap();
        fs.close(fd).unwrap();
        // Every client also appends to one shared directory.
        let fd = fs.create(&format!("/shared/c{me}-{k}"), 0o644).unwrap();
        fs.close(fd).unwrap();
    }
    fs.rename(&format!("/c{me}/f0"), &format!("/shared/moved-by-{me}"))
        .unwrap();
    fs.unlink(&format!("/c{me}/f1")).unwrap();
    fs.sync().unwrap();
    // Read what the other clients wrote, as far as they got.
    let mut seen = 0;
    for other in 0..CLIENTS {
        if let Ok(fd) = fs.open(&format!("/c{other}/f5"), OpenFlags::default()) {
            let mut b = [0u8; 64];
            let n = fs.read(fd, &mut b).unwrap();
            assert_eq!(&b[..n], format!("client {other} file 5").as_bytes());
            fs.close(fd).unwrap();
            seen += 1;
        }
    }
    println!("MARK done seen={seen}");
}

#[test]
fn concurrent_client_processes_see_one_file_system() {
    child::branch(client_process);
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    let sock = tmp.path().join("sock");
    let p = Params {
        meta_pages: 4096,
        inodes: 31 * 64,
        log_pages: 200,
        max_domains: 8,
        domain_pages: 2048,
        kv_object_pages: 1,
        volume_id: 9,
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
        Config::with_lease_timeout(Duration::from_secs(5)),
    )
    .unwrap();
    {
        let fs = Pxfs::mount(&sock).unwrap();
        fs.mkdir("/shared", 0o755).unwrap();
        fs.sync().unwrap();
    }
    let children: Vec<_> = (0..CLIENTS)
        .map(|i| {
            child::command(
                "concurrent_client_processes_see_one_file_system",
                &i.to_string(),
            )
            .env("PMLAB_FS_SOCK", &sock)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.contains("MARK done"), "{text}");
    }
    let fs = Pxfs::mount(&sock).unwrap();
    let shared = fs.readdir("/shared").unwrap();
    assert_eq!(shared.len(), CLIENTS * FILES + CLIENTS, "{shared:?}");
    for i in 0..CLIENTS {
        let names = fs.readdir(&format!("/c{i}")).unwrap();
        assert_eq!(names.len(), FILES - 2);
        let fd = fs
            .open(&format!("/shared/moved-by-{i}"), OpenFlags::default())
            .unwrap();
        let mut b = [0u8; 64];
        let n = fs.read(fd, &mut b).unwrap();
        assert_eq!(&b[..n], format!("client {i} file 0").as_bytes());
        fs.close(fd).unwrap();
    }
    drop(fs);
    svc.stop().unwrap();
    let r = pmlab_fs::fsck::fsck_volume(&vol).unwrap();
    assert!(r.clean() && r.findings.is_empty(), "{:#?}", r.findings);
    assert_eq!(
        r.summary.files as usize,
        CLIENTS * (FILES - 1) + CLIENTS * FILES
    );
}

//! Unwritten bytes of a file read as zeros although the service hands out data pages
//! without zeroing them: libFS zeroes holes and the bytes a file grows over.

use std::time::Duration;

use pmlab_fs::layout::Params;
use pmlab_fs::media::PAGE;
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::pxfs::Pxfs;
use pmlab_fs::service::{self, Config};

const DOMAIN_PAGES: u64 = 256;

fn params() -> Params {
    Params {
        meta_pages: 2048,
        inodes: 31 * 64,
        log_pages: 200,
        max_domains: 8,
        domain_pages: DOMAIN_PAGES,
        kv_object_pages: 2,
        volume_id: 11,
    }
}

/// The whole file, checked against what was written: `writes` bytes and zeros elsewhere.
fn expect(px: &Pxfs, fd: pmlab_fs::pxfs::Fd, size: u64, writes: &[(u64, u8)], what: &str) {
    let mut buf = vec![0xEEu8; size as usize + 16];
    let n = px.pread(fd, 0, &mut buf).unwrap();
    assert_eq!(n as u64, size, "{what}: size");
    for (i, &b) in buf[..n].iter().enumerate() {
        let want = writes
            .iter()
            .rev()
            .find(|(at, _)| *at == i as u64)
            .map_or(0, |w| w.1);
        assert_eq!(b, want, "{what}: byte {i}");
    }
}

#[test]
fn holes_and_growth_read_as_zeros_over_stale_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    let sock = tmp.path().join("sock");
    let owner = RootOwner {
        uid: 0,
        gid: 0,
        mode: 0o777,
    };
    pmlab_fs::volume::create(&vol, &params(), owner).unwrap();
    let svc = service::spawn(
        &vol,
        &sock,
        Config::with_lease_timeout(Duration::from_secs(2)),
    )
    .unwrap();
    let px = Pxfs::mount(&sock).unwrap();
    let fd = px.create("/f", 0o644).unwrap();
    // Old data everywhere in the (still empty) domain, as a writer of it may leave.
    {
        let mut s = px.client().state();
        let d = s.domain_for(0o644).unwrap();
        let m = s.data(d).unwrap();
        for p in 1..DOMAIN_PAGES {
            m.write_at(p * PAGE, &[0xAB; PAGE as usize]).unwrap();
        }
    }
    let mut w = Vec::new();
    // A write into the middle of a fresh page: the bytes before it are a hole.
    px.pwrite(fd, 100, b"x").unwrap();
    w.push((100, b'x'));
    expect(&px, fd, 101, &w, "write at 100");
    // Growing by truncate exposes the rest of the page holding the old end.
    px.truncate("/f", 3 * PAGE + 7).unwrap();
    expect(&px, fd, 3 * PAGE + 7, &w, "truncate up");
    // A write past the end leaves a gap behind it.
    px.pwrite(fd, 5 * PAGE + 9, b"y").unwrap();
    w.push((5 * PAGE + 9, b'y'));
    expect(&px, fd, 5 * PAGE + 10, &w, "write past the end");
    // A write into a hole below the end: the rest of its fresh page is a hole too.
    px.pwrite(fd, PAGE + 50, b"z").unwrap();
    w.push((PAGE + 50, b'z'));
    expect(&px, fd, 5 * PAGE + 10, &w, "write into a hole");
    // Shrinking and growing again: what was cut off does not come back.
    px.truncate("/f", 60).unwrap();
    px.truncate("/f", 2 * PAGE).unwrap();
    expect(&px, fd, 2 * PAGE, &[], "shrink then grow");
    // An append into the page holding the end, after the shrink.
    let fa = px
        .open(
            "/f",
            pmlab_fs::pxfs::OpenFlags {
                write: true,
                append: true,
                ..Default::default()
            },
        )
        .unwrap();
    px.truncate("/f", 30).unwrap();
    px.write(fa, b"q").unwrap();
    px.truncate("/f", 200).unwrap();
    expect(&px, fd, 200, &[(30, b'q')], "append then grow");
    px.sync().unwrap();
    drop(px);
    svc.stop().unwrap();
}

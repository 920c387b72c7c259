//! The service in-process on a socket in a temporary directory, with libFS clients.

mod support;
use support::raw::Raw;

use std::path::{Path, PathBuf};
use std::time::Duration;

use pmlab_fs::FsError;
use pmlab_fs::fsck::fsck_volume;
use pmlab_fs::inode::Kind;
use pmlab_fs::journal::{Op, encode_batch};
use pmlab_fs::kvfs::Kvfs;
use pmlab_fs::layout::Params;
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::proto::{Reply, Request};
use pmlab_fs::pxfs::{OpenFlags, Pxfs};
use pmlab_fs::service::{self, Config, Handle};

fn params() -> Params {
    Params {
        meta_pages: 2048,
        inodes: 31 * 64,
        log_pages: 200,
        max_domains: 8,
        domain_pages: 4096,
        kv_object_pages: 2,
        volume_id: 3,
    }
}

struct Rig {
    _tmp: tempfile::TempDir,
    vol: PathBuf,
    sock: PathBuf,
    svc: Option<Handle>,
}

fn rig(timeout_ms: u64) -> Rig {
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    let sock = tmp.path().join("sock");
    pmlab_fs::volume::create(
        &vol,
        &params(),
        RootOwner {
            uid: 0,
            gid: 0,
            mode: 0o777,
        },
    )
    .unwrap();
    let svc = service::spawn(
        &vol,
        &sock,
        Config::with_lease_timeout(Duration::from_millis(timeout_ms)),
    )
    .unwrap();
    Rig {
        _tmp: tmp,
        vol,
        sock,
        svc: Some(svc),
    }
}

impl Rig {
    /// Stops the service, which waits for it to finish with every connection.
    fn stop(&mut self) {
        if let Some(svc) = self.svc.take() {
            svc.stop().unwrap();
        }
    }

    fn stop_and_check(mut self) {
        self.stop();
        let r = fsck_volume(&self.vol).unwrap();
        assert!(r.clean() && r.findings.is_empty(), "{:#?}", r.findings);
    }
}

fn meta_bytes(vol: &Path) -> Vec<u8> {
    std::fs::read(pmlab_fs::volume::meta_path(vol)).unwrap()
}

#[test]
fn pxfs_namespace_and_data_round_trip() {
    let r = rig(2000);
    {
        let fs = Pxfs::mount(&r.sock).unwrap();
        fs.mkdir("/docs", 0o755).unwrap();
        assert!(matches!(fs.mkdir("/docs", 0o755), Err(FsError::Exists(_))));
        let fd = fs.create("/docs/a.txt", 0o644).unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(fs.write(fd, &data).unwrap(), data.len());
        fs.fsync(fd).unwrap();
        let mut back = vec![0u8; 12_000];
        assert_eq!(fs.pread(fd, 0, &mut back).unwrap(), 10_000);
        assert_eq!(&back[..10_000], &data[..]);
        fs.close(fd).unwrap();

        let fd = fs
            .open(
                "/docs/a.txt",
                OpenFlags {
                    write: true,
                    append: true,
                    ..Default::default()
                },
            )
            .unwrap();
        fs.write(fd, b"tail").unwrap();
        fs.close(fd).unwrap();
        assert_eq!(fs.stat("/docs/a.txt").unwrap().size, 10_004);

        fs.rename("/docs/a.txt", "/b.txt").unwrap();
        assert_eq!(
            fs.readdir("/").unwrap(),
            vec!["b.txt".to_string(), "docs".to_string()]
        );
        assert!(fs.readdir("/docs").unwrap().is_empty());
        assert!(matches!(fs.stat("/docs/a.txt"), Err(FsError::NotFound(_))));
        let fd = fs.open("/b.txt", OpenFlags::default()).unwrap();
        let mut b = vec![0u8; 4];
        assert_eq!(fs.pread(fd, 10_000, &mut b).unwrap(), 4);
        assert_eq!(&b, b"tail");
        fs.close(fd).unwrap();
        fs.rmdir("/docs").unwrap();
        fs.truncate("/b.txt", 5000).unwrap();
        assert_eq!(fs.stat("/b.txt").unwrap().size, 5000);
        fs.sync().unwrap();
    }
    r.stop_and_check();
}

#[test]
fn a_second_client_sees_the_first_ones_changes_through_revocation() {
    let r = rig(2000);
    {
        let a = Pxfs::mount(&r.sock).unwrap();
        let b = Pxfs::mount(&r.sock).unwrap();
        a.mkdir("/shared", 0o777).unwrap();
        let fd = a.create("/shared/f", 0o666).unwrap();
        a.write(fd, b"hello from a").unwrap();
        // No fsync: b's lease request makes the service revoke a's, and a ships.
        let g = b.open("/shared/f", OpenFlags::default()).unwrap();
        let mut buf = [0u8; 32];
        let n = b.read(g, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello from a");
        // And the other way round.
        let h = b.create("/shared/g", 0o666).unwrap();
        b.write(h, b"from b").unwrap();
        assert_eq!(a.readdir("/shared").unwrap(), vec!["f", "g"]);
        a.close(fd).unwrap();
        b.close(g).unwrap();
        b.close(h).unwrap();
    }
    r.stop_and_check();
}

/// Reads served from libFS's caches under the shared state (`client::shared`) see
/// another client's changes once it took the lease: a's second open and read of each
/// file come from its caches, then b rewrites one file, replaces the other by a
/// rename and puts a new KVFS value, and a's next reads show b's bytes.
#[test]
fn cached_reads_see_another_clients_changes_after_the_lease_moves() {
    let r = rig(2000);
    {
        let a = Pxfs::mount(&r.sock).unwrap();
        let read = |fs: &Pxfs, path: &str| {
            let fd = fs.open(path, OpenFlags::default()).unwrap();
            let mut buf = vec![0u8; 64];
            let n = fs.read(fd, &mut buf).unwrap();
            fs.close(fd).unwrap();
            buf.truncate(n);
            buf
        };
        for (path, bytes) in [("/f", b"first f"), ("/g", b"first g")] {
            let fd = a.create(path, 0o666).unwrap();
            a.write(fd, bytes).unwrap();
            a.close(fd).unwrap();
        }
        let kv_a = Kvfs::open(&r.sock, "/kv", 0o666).unwrap();
        kv_a.put("k", b"first k").unwrap();
        for _ in 0..2 {
            assert_eq!(read(&a, "/f"), b"first f");
            assert_eq!(read(&a, "/g"), b"first g");
            assert_eq!(kv_a.get("k").unwrap().unwrap(), b"first k");
            assert_eq!(a.stat("/g").unwrap().size, 7);
        }
        let old_g = a.stat("/g").unwrap().ino;
        let old_f = a.stat("/f").unwrap().mtime;
        let b = Pxfs::mount(&r.sock).unwrap();
        // Past the granule of an overwrite's timestamps (a millisecond).
        std::thread::sleep(std::time::Duration::from_millis(3));
        let fd = b
            .open(
                "/f",
                OpenFlags {
                    write: true,
                    ..Default::default()
                },
            )
            .unwrap();
        b.write(fd, b"second").unwrap();
        b.close(fd).unwrap();
        let fd = b.create("/h", 0o666).unwrap();
        b.write(fd, b"h renamed over g").unwrap();
        b.close(fd).unwrap();
        b.rename("/h", "/g").unwrap();
        let kv_b = Kvfs::open(&r.sock, "/kv", 0o666).unwrap();
        kv_b.put("k", b"second k").unwrap();
        b.sync().unwrap();
        kv_b.sync().unwrap();
        let nf = a.stat("/f").unwrap();
        assert!(
            nf.mtime > old_f,
            "a stat of /f after B wrote it: {old_f} then {nf:?}"
        );
        let g = a.stat("/g").unwrap();
        assert_eq!(
            (g.size, g.ino != old_g),
            (16, true),
            "a stat of /g after the rename"
        );
        assert_eq!(read(&a, "/f"), b"secondf");
        assert_eq!(read(&a, "/g"), b"h renamed over g");
        assert_eq!(kv_a.get("k").unwrap().unwrap(), b"second k");
    }
    r.stop_and_check();
}

#[test]
fn an_unlinked_file_stays_readable_while_open() {
    let r = rig(2000);
    {
        let a = Pxfs::mount(&r.sock).unwrap();
        let b = Pxfs::mount(&r.sock).unwrap();
        let fd = a.create("/tmpfile", 0o666).unwrap();
        a.write(fd, &vec![7u8; 9000]).unwrap();
        a.fsync(fd).unwrap();
        b.unlink("/tmpfile").unwrap();
        b.sync().unwrap();
        assert!(matches!(a.stat("/tmpfile"), Err(FsError::NotFound(_))));
        let mut buf = vec![0u8; 9000];
        assert_eq!(a.pread(fd, 0, &mut buf).unwrap(), 9000);
        assert!(buf.iter().all(|&x| x == 7));
        assert_eq!(a.fstat(fd).unwrap().nlink, 0);
        a.close(fd).unwrap();
    }
    r.stop_and_check();
}

#[test]
fn kvfs_put_get_erase() {
    let r = rig(2000);
    {
        let kv = Kvfs::open(&r.sock, "/kv", 0o644).unwrap();
        assert_eq!(kv.max_value(), 8192);
        for k in 0..50 {
            kv.put(&format!("key{k}"), format!("value number {k}").as_bytes())
                .unwrap();
        }
        kv.put("key7", b"replaced").unwrap();
        assert_eq!(kv.get("key7").unwrap().unwrap(), b"replaced");
        assert_eq!(kv.get("key42").unwrap().unwrap(), b"value number 42");
        assert_eq!(kv.get("nope").unwrap(), None);
        // One buffer reused across values of different lengths holds exactly each one.
        kv.put("long", &[9u8; 8000]).unwrap();
        let mut buf = vec![1u8; 100];
        assert!(kv.get_into("long", &mut buf).unwrap());
        assert_eq!(buf, vec![9u8; 8000]);
        assert!(kv.get_into("key7", &mut buf).unwrap());
        assert_eq!(buf, b"replaced");
        assert!(!kv.get_into("nope", &mut buf).unwrap());
        // A get into the caller's array fills what fits, leaves the rest of the array
        // alone and says how long the value is (here through libFS's state: this
        // volume's copies do not run outside it; `kvfs_threads` covers the caches).
        let mut short = [1u8; 100];
        assert_eq!(kv.get_to("long", &mut short).unwrap(), Some(8000));
        assert_eq!(short, [9u8; 100]);
        let mut wide = [1u8; 8192];
        assert_eq!(kv.get_to("key7", &mut wide).unwrap(), Some(8));
        assert_eq!(&wide[..8], b"replaced");
        assert!(wide[8..].iter().all(|&x| x == 1));
        assert_eq!(kv.get_to("nope", &mut wide).unwrap(), None);
        assert!(kv.erase("long").unwrap());
        assert!(kv.erase("key3").unwrap());
        assert!(!kv.erase("key3").unwrap());
        assert!(kv.put("big", &vec![0u8; 8193]).is_err());
        kv.sync().unwrap();
        // A second client, through PXFS, sees the same namespace.
        let px = Pxfs::mount(&r.sock).unwrap();
        assert_eq!(px.readdir("/kv").unwrap().len(), 49);
        assert_eq!(px.stat("/kv/key7").unwrap().kind, Kind::Kv);
    }
    r.stop_and_check();
}

/// Erased objects' extents, scattered over a nearly full domain, serve new puts: the
/// service grants extents that need not adjoin one another, and every value stays apart.
#[test]
fn kvfs_reuses_erased_extents_in_a_fragmented_domain() {
    let r = rig(2000);
    {
        // A one-page file of the same domain goes first and is removed after the erases,
        // so that the free pages no longer come in pairs that line up with the objects.
        let px = Pxfs::mount(&r.sock).unwrap();
        let fd = px.create("/one", 0o644).unwrap();
        px.write(fd, &[7u8; 4096]).unwrap();
        px.close(fd).unwrap();
        px.sync().unwrap();
        drop(px);
        let kv = Kvfs::open(&r.sock, "/kv", 0o644).unwrap();
        let value = |k: usize, tag: u8| vec![tag ^ k as u8; 5000 + k % 3000];
        // 1800 objects of 2 pages fill 3600 of the domain's 4095 data pages.
        for k in 0..1800 {
            kv.put(&format!("a{k}"), &value(k, 1)).unwrap();
        }
        kv.sync().unwrap();
        for k in (0..1800).step_by(2) {
            assert!(kv.erase(&format!("a{k}")).unwrap());
        }
        kv.sync().unwrap();
        let px = Pxfs::mount(&r.sock).unwrap();
        px.unlink("/one").unwrap();
        px.sync().unwrap();
        drop(px);
        // 900 new objects: at most 247 fit behind the old ones, the rest must take the
        // holes the erased ones left.
        for k in 0..900 {
            kv.put(&format!("b{k}"), &value(k, 2)).unwrap();
        }
        kv.sync().unwrap();
        for k in 0..1800 {
            let got = kv.get(&format!("a{k}")).unwrap();
            assert_eq!(got, (k % 2 == 1).then(|| value(k, 1)), "a{k}");
        }
        for k in 0..900 {
            assert_eq!(kv.get(&format!("b{k}")).unwrap(), Some(value(k, 2)), "b{k}");
        }
    }
    r.stop_and_check();
}

#[test]
fn forged_and_malformed_journals_change_nothing() {
    let r = rig(2000);
    {
        let fs = Pxfs::mount(&r.sock).unwrap();
        fs.mkdir("/d", 0o755).unwrap();
        fs.sync().unwrap();
    }
    let before = meta_bytes(&r.vol);
    let mut s = Raw::connect(&r.sock);
    // Without a lease, with an inode never reserved, with garbage bytes, with a flipped bit.
    let forged = encode_batch(&[Op::Create {
        parent: 1,
        name: "evil".into(),
        ino: 40,
        kind: Kind::Dir,
        mode: 0o777,
        domain: 0,
    }]);
    let Reply::Err(_, e) = s.call(Request::Ship, &forged) else {
        panic!("accepted a forged batch")
    };
    assert!(
        e.contains("operation 0 (create)") && e.contains("no lease"),
        "{e}"
    );
    let granted = s.call(
        Request::Acquire {
            key: 1,
            exclusive: true,
        },
        &[],
    );
    assert!(matches!(granted, Reply::Granted { .. }), "{granted:?}");
    let Reply::Err(_, e) = s.call(Request::Ship, &forged) else {
        panic!()
    };
    assert!(e.contains("not reserved"), "{e}");
    let Reply::Err(_, e) = s.call(Request::Ship, b"\x01\x02garbage") else {
        panic!()
    };
    assert!(
        e.contains("malformed journal") && e.contains("batch magic"),
        "{e}"
    );
    let mut flipped = forged.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let Reply::Err(_, e) = s.call(Request::Ship, &flipped) else {
        panic!()
    };
    assert!(e.contains("checksum"), "{e}");
    // Removing a non-empty directory, unlinking what is not there.
    let bad = encode_batch(&[Op::Unlink {
        parent: 1,
        name: "d".into(),
        ino: 2,
    }]);
    let Reply::Err(_, e) = s.call(Request::Ship, &bad) else {
        panic!()
    };
    assert!(e.contains("rmdir") || e.contains("not"), "{e}");
    drop(s);
    let mut r = r;
    r.stop();
    assert!(
        meta_bytes(&r.vol) == before,
        "a rejected batch changed the volume"
    );
    r.stop_and_check();
}

#[test]
fn a_client_that_stops_answering_loses_its_leases() {
    let r = rig(200);
    let mut s = Raw::connect(&r.sock);
    let granted = s.call(
        Request::Acquire {
            key: 1,
            exclusive: true,
        },
        &[],
    );
    assert!(matches!(granted, Reply::Granted { .. }), "{granted:?}");
    // The raw client never answers the revocation; after the timeout the service
    // disconnects it and grants the lease to the libFS client.
    {
        let fs = Pxfs::mount(&r.sock).unwrap();
        fs.mkdir("/x", 0o755).unwrap();
        fs.sync().unwrap();
        assert_eq!(fs.readdir("/").unwrap(), vec!["x"]);
    }
    // The service has closed the connection.
    assert_dropped(&s.s);
    r.stop_and_check();
}

/// A request larger than the connection's ring goes through in parts, and a client
/// that writes a ring index no ring can have is dropped, while the service goes on
/// serving others.
#[test]
fn rings_carry_large_frames_and_forged_indices_drop_only_their_client() {
    let r = rig(2000);
    let mut s = Raw::connect(&r.sock);
    let big = vec![0xa5u8; 3 * pmlab_fs::proto::ring::RING_BYTES + 123];
    let Reply::Err(_, e) = s.call(Request::Ship, &big) else {
        panic!("accepted a batch of garbage")
    };
    assert!(e.contains("malformed journal"), "{e}");
    let Reply::Err(_, e) = s.call(Request::Ship, b"\x01") else {
        panic!()
    };
    assert!(
        e.contains("malformed journal"),
        "the ring lost its place: {e}"
    );
    // A request head past what the ring holds; a reply tail past what the service
    // wrote (found when it next writes a reply).
    s.forge_control_word(0, u64::MAX / 2);
    assert_dropped(&s.s);
    let mut s = Raw::connect(&r.sock);
    s.forge_control_word(192, 1 << 40);
    s.send(Request::Ship, &[]);
    assert_dropped(&s.s);
    {
        let fs = Pxfs::mount(&r.sock).unwrap();
        fs.mkdir("/after", 0o755).unwrap();
        fs.sync().unwrap();
        assert_eq!(fs.readdir("/").unwrap(), vec!["after"]);
    }
    r.stop_and_check();
}

/// The service closes `s` within seconds: the end of the stream, or a reset if the
/// service closed it with a doorbell byte still unread.
fn assert_dropped(s: &std::os::unix::net::UnixStream) {
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut rest = Vec::new();
    let mut rd = s;
    let r = std::io::Read::read_to_end(&mut rd, &mut rest);
    assert!(
        r.is_ok()
            || r.as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the service kept the client: {r:?}"
    );
}

/// What a crashed service leaves behind: a committed transaction not yet applied in
/// place, and an unlinked file that was open. Starting the service repairs both.
#[test]
fn the_service_replays_its_log_and_reclaims_orphans_when_it_starts() {
    use pmlab_fs::apply::{Authority, apply_batch};
    use pmlab_fs::layout::Superblock;
    struct Everything;
    impl Authority for Everything {
        fn cred(&self) -> (u32, u32) {
            (0, 0)
        }
        fn holds_lease(&self, _: u64) -> bool {
            true
        }
        fn inode_reserved(&self, _: u64) -> bool {
            true
        }
        fn page_reserved(&self, _: u16, _: u64) -> bool {
            true
        }
        fn is_open(&self, _: u64) -> bool {
            true
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    let sock = tmp.path().join("sock");
    pmlab_fs::volume::create(
        &vol,
        &params(),
        RootOwner {
            uid: 0,
            gid: 0,
            mode: 0o755,
        },
    )
    .unwrap();
    {
        // A file, unlinked while "open": an orphan holding one data page.
        let svc = service::spawn(&vol, &sock, Config::default()).unwrap();
        let fs = Pxfs::mount(&sock).unwrap();
        let fd = fs.create("/orphan", 0o644).unwrap();
        fs.write(fd, b"data").unwrap();
        fs.close(fd).unwrap();
        fs.sync().unwrap();
        drop(fs);
        svc.stop().unwrap();
        let (_f, mut m) = pmlab_fs::volume::open_meta_rw(&vol).unwrap();
        let sb = Superblock::read(&mut m).unwrap();
        let out = apply_batch(
            &mut m,
            sb,
            &Everything,
            &[Op::Unlink {
                parent: 1,
                name: "orphan".into(),
                ino: 2,
            }],
        )
        .unwrap();
        pmlab_fs::redo::commit(&mut m, &sb, &out.changes).unwrap();
        // And a committed but unapplied mkdir.
        let out = apply_batch(
            &mut m,
            sb,
            &Everything,
            &[Op::Create {
                parent: 1,
                name: "logged".into(),
                ino: 3,
                kind: Kind::Dir,
                mode: 0o755,
                domain: 0,
            }],
        )
        .unwrap();
        pmlab_fs::redo::write_log(&mut m, &sb, 2, &out.changes).unwrap();
    }
    let r = fsck_volume(&vol).unwrap();
    let notes: Vec<String> = r.findings.iter().map(|f| f.to_string()).collect();
    assert!(r.clean() && notes.len() == 2, "{notes:#?}");
    assert!(
        notes.iter().any(|n| n.contains("committed transaction"))
            && notes.iter().any(|n| n.contains("inode 2"))
    );
    let svc = service::spawn(&vol, &sock, Config::default()).unwrap();
    {
        let fs = Pxfs::mount(&sock).unwrap();
        assert_eq!(fs.readdir("/").unwrap(), vec!["logged"]);
    }
    svc.stop().unwrap();
    let r = fsck_volume(&vol).unwrap();
    assert!(r.clean() && r.findings.is_empty(), "{:#?}", r.findings);
    assert_eq!(
        (r.summary.dirs, r.summary.files, r.summary.data_pages_used),
        (2, 0, 0)
    );
}

#[test]
fn kvfs_clients_lock_the_table_bucket_by_bucket() {
    let r = rig(2000);
    {
        let kv1 = Kvfs::open(&r.sock, "/kv", 0o644).unwrap();
        let kv2 = Kvfs::open(&r.sock, "/kv", 0o644).unwrap();
        let (a, b) = ("alpha", "beta");
        assert_ne!(kv1.lock_of(a), kv1.lock_of(b));
        kv1.put(a, b"one").unwrap();
        kv2.put(b, b"two").unwrap();
        // Different buckets: neither put took the other's lease away.
        assert!(kv1.client().leases().contains(&(kv1.lock_of(a), true)));
        assert!(kv2.client().leases().contains(&(kv2.lock_of(b), true)));
        // Reading a's value revokes only a's bucket from kv1, which ships its put first.
        assert_eq!(kv2.get(a).unwrap().unwrap(), b"one");
        assert!(!kv1.client().leases().contains(&(kv1.lock_of(a), true)));
        assert_eq!(kv1.get(b).unwrap().unwrap(), b"two");
    }
    r.stop_and_check();
}

/// Pages another client freed and the service then reserved to this one are free in
/// this client's own view too: libFS validates each operation against the mapping plus
/// the pages it changed since it last waited for the service, and that copy of the
/// domain's bitmap page may date from before the other client freed them.
#[test]
fn pages_freed_by_another_client_serve_this_one() {
    let r = rig(2000);
    {
        let kv1 = Kvfs::open(&r.sock, "/kv", 0o644).unwrap();
        let kv2 = Kvfs::open(&r.sock, "/kv", 0o644).unwrap();
        let value = |k: usize| vec![k as u8; 5000];
        // kv1's keys all fall in one bucket of the table and kv2's in others, so that
        // no lease moves between them (a revocation would make kv1 wait for the service
        // and drop its copy).
        let bucket = kv1.lock_of("a0");
        let mine: Vec<String> = (0..100_000)
            .map(|k| format!("a{k}"))
            .filter(|k| kv1.lock_of(k) == bucket)
            .take(200)
            .collect();
        kv1.put(&mine[0], &value(0)).unwrap();
        kv1.sync().unwrap();
        // kv2 fills what kv1 has not reserved.
        let mut theirs = Vec::new();
        for k in 0.. {
            let key = format!("b{k}");
            if kv2.lock_of(&key) == bucket {
                continue;
            }
            match kv2.put(&key, &value(k)) {
                Ok(()) => theirs.push(key),
                Err(FsError::NoSpace(_)) => break,
                Err(e) => panic!("put {key}: {e}"),
            }
        }
        kv2.sync().unwrap();
        // kv1 changes the bitmap page (its copy shows kv2's pages taken) ...
        kv1.put(&mine[1], &value(1)).unwrap();
        // ... kv2 frees them, and kv1 goes on until the service hands it those.
        for key in &theirs {
            assert!(kv2.erase(key).unwrap());
        }
        kv2.sync().unwrap();
        for (k, key) in mine.iter().enumerate().skip(2) {
            kv1.put(key, &value(k))
                .unwrap_or_else(|e| panic!("put {key} ({k}): {e}"));
        }
        kv1.sync().unwrap();
        for (k, key) in mine.iter().enumerate() {
            assert_eq!(kv2.get(key).unwrap(), Some(value(k)), "{key}");
        }
    }
    r.stop_and_check();
}

/// A client dates what it changes with its own clock only within the window behind
/// the service's: a stamp in the future is the service's time, one too old is the
/// window's edge, and one inside the window is taken as it is.
#[test]
fn a_client_dates_its_changes_only_within_the_stamp_window() {
    use pmlab_fs::apply::MAX_STAMP_AGE_NS;
    use pmlab_fs::mkfs::now_ns;
    let r = rig(2000);
    let mut s = Raw::connect(&r.sock);
    let lease = Request::Acquire {
        key: 1,
        exclusive: true,
    };
    let granted = s.call(lease, &[]);
    assert!(matches!(granted, Reply::Granted { .. }), "{granted:?}");
    let reserve = Request::Reserve {
        inodes: 3,
        domain: 0,
        pages: 0,
        extent: 1,
    };
    let Reply::Reserved { inodes, .. } = s.call(reserve, &[]) else {
        panic!("no inodes reserved")
    };
    // Directories: their data lie in no domain, so none needs to be asked for.
    let create = |name: &str, ino: u64| Op::Create {
        parent: 1,
        name: name.into(),
        ino,
        kind: Kind::Dir,
        mode: 0o755,
        domain: 0,
    };
    let before = now_ns();
    let honest = before - MAX_STAMP_AGE_NS / 2;
    let batch = encode_batch(&[
        Op::Stamp { now: u64::MAX },
        create("future", inodes[0]),
        Op::Stamp { now: 1 },
        create("ancient", inodes[1]),
        Op::Stamp { now: honest },
        create("honest", inodes[2]),
    ]);
    let shipped = s.call(Request::Ship, &batch);
    let after = now_ns();
    assert!(matches!(shipped, Reply::Shipped { .. }), "{shipped:?}");
    drop(s);
    let fs = Pxfs::mount(&r.sock).unwrap();
    let mtime = |path: &str| fs.stat(path).unwrap().mtime;
    let future = mtime("/future");
    assert!(
        (before..=after).contains(&future),
        "a stamp in the future was taken: {future} outside {before}..={after}"
    );
    let ancient = mtime("/ancient");
    let edge = before - MAX_STAMP_AGE_NS..=after - MAX_STAMP_AGE_NS;
    assert!(
        edge.contains(&ancient),
        "a stamp older than the window was taken: {ancient} outside {edge:?}"
    );
    assert_eq!(mtime("/honest"), honest, "a stamp inside the window");
    assert_eq!(mtime("/"), honest, "the directory's stamp");
    drop(fs);
    r.stop_and_check();
}

/// An fsync leaves what libFS cached of the inodes it changed in its cache: the
/// service stamps them with the time libFS's check did, so the inode-table pages it
/// writes are the ones libFS holds, and none is read from the mapping again.
#[test]
fn an_fsync_keeps_the_inodes_it_wrote_cached() {
    let r = rig(2000);
    let fs = Pxfs::mount(&r.sock).unwrap();
    let fd = fs.create("/f", 0o644).unwrap();
    fs.write(fd, b"kept").unwrap();
    // Before the fsync: a read of the mapping after it would cache what it read.
    let ino = fs.stat("/f").unwrap().ino;
    fs.fsync(fd).unwrap();
    let cached = fs.client().state_shared().cached_inode(ino);
    let mapped = fs
        .client()
        .state_shared()
        .inode_within(ino, pmlab_fs::client::Reach::Mapping);
    assert!(
        cached.is_some(),
        "the fsync took the file's inode out of the cache"
    );
    assert_eq!(
        cached, mapped,
        "the cached inode is not the one the service wrote"
    );
    let root = fs.client().state_shared().cached_inode(1);
    assert!(
        root.is_some(),
        "the fsync took the directory's inode out of the cache"
    );
    fs.close(fd).unwrap();
    drop(fs);
    r.stop_and_check();
}

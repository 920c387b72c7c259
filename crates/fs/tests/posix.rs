//! POSIX pieces users reach for at once: chmod and chown (which move a file's data
//! between permission domains), hard links, timestamps, and rename over an existing
//! file as one step.

mod support;
use pmlab_testkit::child;
use support::users::{Kid, Rig, mark, root_or_skip, sock};

use pmlab_fs::FsError;
use pmlab_fs::inode::Kind;
use pmlab_fs::journal::Op;
use pmlab_fs::pxfs::{OpenFlags, Pxfs};

fn read_all(fs: &Pxfs, path: &str) -> pmlab_fs::Result<Vec<u8>> {
    let fd = fs.open(path, OpenFlags::default())?;
    let mut b = vec![0u8; 1 << 16];
    let n = fs.pread(fd, 0, &mut b)?;
    fs.close(fd)?;
    b.truncate(n);
    Ok(b)
}

fn domain_of(fs: &Pxfs, path: &str) -> u16 {
    let ino = fs.stat(path).unwrap().ino;
    fs.client().state().inode(ino).unwrap().domain
}

const CHMOD_TEST: &str = "chmod_and_chown_move_a_file_between_domains";

/// Another user: tries to read, write and chmod `/f`.
fn other_user() {
    let fs = Pxfs::mount(&sock()).unwrap();
    match read_all(&fs, "/f") {
        Ok(b) => mark(&format!("read {}", b.len())),
        Err(e) => mark(&format!("read-refused {e}")),
    }
    let w = fs.open(
        "/f",
        OpenFlags {
            write: true,
            append: true,
            ..Default::default()
        },
    );
    match w.and_then(|fd| fs.write(fd, b"+").and_then(|_| fs.close(fd))) {
        Ok(()) => mark("write ok"),
        Err(e) => mark(&format!("write-refused {e}")),
    }
    match fs.chmod("/f", 0o666) {
        Ok(()) => mark("chmod ok"),
        Err(e) => mark(&format!("chmod-refused {e}")),
    }
    // A hostile client skips libFS's own permission check and reads the first data
    // page through whatever mapping of the file's domain the service hands it: only
    // the kernel's protection of the domain stands in the way.
    match raw_first_byte(&fs, "/f") {
        Ok(b) => mark(&format!("raw-read {b}")),
        Err(e) => mark(&format!("raw-read-refused {e}")),
    }
}

/// The first byte of `path`'s data, read straight from its domain's data space.
fn raw_first_byte(fs: &Pxfs, path: &str) -> pmlab_fs::Result<u8> {
    let ino = fs.client().resolve(path)?;
    let mut s = fs.client().state();
    let i = s.inode(ino)?;
    let p = s.page_of(ino, &i, 0)?;
    let mut b = [0u8; 1];
    s.read_data(i.domain, p * pmlab_fs::media::PAGE, &mut b)?;
    Ok(b[0])
}

fn as_user(uid: u32, sock: &std::path::Path) -> String {
    let (st, log) = Kid::spawn(CHMOD_TEST, "other", uid, uid, sock).finish();
    assert!(st.success(), "{log}");
    log
}

#[test]
fn chmod_and_chown_move_a_file_between_domains() {
    child::branch(|_| other_user());
    if !root_or_skip(CHMOD_TEST) {
        return;
    }
    let rig = Rig::quick(0o755);
    let fs = Pxfs::mount(&rig.sock).unwrap();
    let data: Vec<u8> = (0..3 * 4096 + 100).map(|i| (i % 251) as u8).collect();
    let fd = fs.create("/f", 0o644).unwrap();
    fs.write(fd, &data).unwrap();
    fs.close(fd).unwrap();
    fs.sync().unwrap();
    let d0 = domain_of(&fs, "/f");
    let log = as_user(1001, &rig.sock);
    assert!(
        log.contains(&format!("MARK read {}", data.len())) && log.contains("write-refused"),
        "{log}"
    );
    assert!(
        log.contains("MARK chmod-refused"),
        "only the owner may chmod: {log}"
    );

    assert!(
        log.contains(&format!("MARK raw-read {}", data[0])),
        "another user may map a 0644 file's domain: {log}"
    );

    fs.chmod("/f", 0o600).unwrap();
    let st = fs.stat("/f").unwrap();
    assert_eq!(st.mode, 0o600);
    let log = as_user(1001, &rig.sock);
    assert!(
        log.contains("MARK read-refused"),
        "a 0600 file read by another user: {log}"
    );
    assert!(
        log.contains("MARK raw-read-refused"),
        "another user still maps a 0600 file's data through its old domain: {log}"
    );
    assert_ne!(
        domain_of(&fs, "/f"),
        d0,
        "the data stayed in the 0644 domain"
    );
    assert!(read_all(&fs, "/f").unwrap() == data, "chmod lost the data");

    fs.chown("/f", Some(1001), Some(1001)).unwrap();
    let st = fs.stat("/f").unwrap();
    assert_eq!((st.uid, st.gid, st.mode), (1001, 1001, 0o600));
    let log = as_user(1001, &rig.sock);
    assert!(
        log.contains(&format!("MARK read {}", data.len()))
            && log.contains("MARK write ok")
            && log.contains("MARK chmod ok"),
        "the new owner may read, write and chmod its file: {log}"
    );
    // Now 0666: another user may write it, but still not chmod it.
    let log = as_user(1002, &rig.sock);
    assert!(
        log.contains("MARK write ok") && log.contains("MARK chmod-refused"),
        "{log}"
    );
    let mut want = data.clone();
    want.extend_from_slice(b"++");
    let got = read_all(&fs, "/f").unwrap();
    assert!(
        got == want,
        "{} bytes read back, {} written",
        got.len(),
        want.len()
    );
    assert_eq!(fs.stat("/f").unwrap().mode, 0o666);
    drop(fs);
    rig.stop_and_check();
}

#[test]
fn link_adds_a_name_and_unlink_takes_one() {
    let rig = Rig::quick(0o777);
    let fs = Pxfs::mount(&rig.sock).unwrap();
    fs.mkdir("/d", 0o755).unwrap();
    let fd = fs.create("/f", 0o644).unwrap();
    fs.write(fd, b"one file").unwrap();
    fs.close(fd).unwrap();
    fs.link("/f", "/d/h").unwrap();
    assert_eq!(fs.stat("/f").unwrap().nlink, 2);
    assert_eq!(fs.stat("/f").unwrap().ino, fs.stat("/d/h").unwrap().ino);
    assert!(matches!(fs.link("/f", "/d/h"), Err(FsError::Exists(_))));
    assert!(matches!(fs.link("/d", "/e"), Err(FsError::WrongKind(_))));
    fs.unlink("/f").unwrap();
    fs.sync().unwrap();
    assert_eq!(read_all(&fs, "/d/h").unwrap(), b"one file");
    assert_eq!(fs.stat("/d/h").unwrap().nlink, 1);
    drop(fs);
    rig.stop_and_check();
}

#[test]
fn timestamps_follow_changes() {
    let rig = Rig::quick(0o777);
    let fs = Pxfs::mount(&rig.sock).unwrap();
    let pause = || std::thread::sleep(std::time::Duration::from_millis(3));
    let fd = fs.create("/t", 0o644).unwrap();
    fs.fsync(fd).unwrap();
    let s0 = fs.stat("/t").unwrap();
    let now = pmlab_fs::mkfs::now_ns();
    assert!(
        s0.mtime > 0 && s0.mtime == s0.ctime && s0.mtime <= now,
        "{s0:?}"
    );
    let root0 = fs.stat("/").unwrap();
    pause();
    fs.write(fd, b"later").unwrap();
    fs.fsync(fd).unwrap();
    let s1 = fs.stat("/t").unwrap();
    assert!(
        s1.mtime > s0.mtime && s1.ctime > s0.ctime,
        "{s0:?} then {s1:?}"
    );
    // An overwrite in place (no new page, no new size) stamps the file too.
    pause();
    fs.pwrite(fd, 0, b"LATER").unwrap();
    fs.fsync(fd).unwrap();
    let s1 = {
        let s = fs.stat("/t").unwrap();
        assert!(
            s.size == s1.size && s.mtime > s1.mtime && s.ctime > s1.ctime,
            "an overwrite in place: {s1:?} then {s:?}"
        );
        s
    };
    pause();
    fs.chmod("/t", 0o600).unwrap();
    let s2 = fs.stat("/t").unwrap();
    assert!(
        s2.mtime == s1.mtime && s2.ctime > s1.ctime,
        "{s1:?} then {s2:?}"
    );
    fs.set_mtime("/t", 1_000_000_000).unwrap();
    assert_eq!(fs.stat("/t").unwrap().mtime, 1_000_000_000);
    pause();
    let fd2 = fs.create("/u", 0o644).unwrap();
    fs.fsync(fd2).unwrap();
    let root1 = fs.stat("/").unwrap();
    assert!(
        root1.mtime > root0.mtime,
        "a create did not touch its directory's mtime"
    );
    fs.close(fd).unwrap();
    fs.close(fd2).unwrap();
    drop(fs);
    rig.stop_and_check();
}

#[test]
fn rename_over_an_existing_file_is_one_operation() {
    let rig = Rig::quick(0o777);
    let fs = Pxfs::mount(&rig.sock).unwrap();
    for (p, v) in [("/old", "old contents"), ("/new", "new contents")] {
        let fd = fs.create(p, 0o644).unwrap();
        fs.write(fd, v.as_bytes()).unwrap();
        fs.close(fd).unwrap();
    }
    fs.sync().unwrap();
    let old = fs.stat("/old").unwrap().ino;
    let reader = fs.open("/old", OpenFlags::default()).unwrap();
    let new = fs.stat("/new").unwrap().ino;
    // Sent at once (nothing is in flight after the sync), so the rename that follows
    // waits in the journal, where the test reads its records.
    fs.mkdir("/in-flight", 0o755).unwrap();
    fs.rename("/new", "/old").unwrap();
    // The crash test: libFS ships its journal whenever a lease is revoked, so a crash
    // may leave any prefix of the records on the volume. Each prefix, applied by the
    // service's own validator to the volume as it is, must leave /old naming the old
    // file or the new one, and /new naming the new file only while /old names the old.
    {
        let ops = fs.client().state().pending_ops().to_vec();
        for k in 0..=ops.len() {
            let names = names_after(&rig.vol, &ops[..k], &["old", "new"]);
            assert!(
                names == [Some(old), Some(new)] || names == [Some(new), None],
                "a crash after record {k} of {} leaves /old -> {:?}, /new -> {:?} \
                 (old file {old}, new file {new}): {ops:?}",
                ops.len(),
                names[0],
                names[1],
            );
        }
    }
    // One record after its stamp: no batch boundary can fall between the target's
    // removal and the move.
    {
        let s = fs.client().state();
        let ops = s.pending_ops();
        assert_eq!(ops.len(), 2, "{ops:?}");
        assert!(matches!(&ops[0], Op::Stamp { .. }), "{ops:?}");
        assert!(
            matches!(&ops[1], Op::Rename { replace, .. } if *replace == old),
            "{ops:?}"
        );
    }
    fs.sync().unwrap();
    assert_eq!(read_all(&fs, "/old").unwrap(), b"new contents");
    assert!(fs.stat("/new").is_err());
    // The replaced file, still open, reads as it was; it goes when closed.
    let mut b = [0u8; 32];
    let n = fs.pread(reader, 0, &mut b).unwrap();
    assert_eq!(&b[..n], b"old contents");
    fs.close(reader).unwrap();
    let kind = fs
        .client()
        .state()
        .with_view(|v| pmlab_fs::view::PageSource::inode(v, old))
        .unwrap()
        .kind;
    assert_eq!(kind, Kind::Free);
    drop(fs);
    rig.stop_and_check();
}

/// What `names` in the root directory name once `ops` are applied, as the service
/// would apply them, to the volume at `vol` as it is now (nothing is written).
fn names_after(vol: &std::path::Path, ops: &[Op], names: &[&str]) -> Vec<Option<u64>> {
    use pmlab_fs::view::PageSource;
    let (_f, mut meta) = pmlab_fs::volume::open_meta_ro(vol).unwrap();
    let sb = pmlab_fs::layout::Superblock::read(&mut meta).unwrap();
    let out = pmlab_fs::apply::apply_batch(&mut meta, sb, &pmlab_fs::apply::AllRights, ops)
        .unwrap_or_else(|r| panic!("a prefix of the journal is rejected: {r}"));
    let mut over = pmlab_fs::overlay::Overlay::new(&mut meta, &out.changes);
    let mut v = pmlab_fs::view::MediaView::with_sb(&mut over, sb);
    let root = v.inode(pmlab_fs::layout::ROOT_INO).unwrap();
    names
        .iter()
        .map(|n| pmlab_fs::dir::lookup(&mut v, root.root, n).unwrap())
        .collect()
}

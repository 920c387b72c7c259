//! Threads of one process sharing one mount read and write file data outside libFS's
//! state lock (`client::copies`); no page may change files under a copy in flight.
//!
//! Four threads share a volume whose one domain is small, so that pages freed by a
//! truncate or an unlink come back from the service to the next reservation within a
//! few rounds. Three threads each keep files of their own, written, overwritten,
//! grown, shrunk and removed in seeded rounds (xoshiro256++), and read each one back
//! against their own copy of what it must hold, byte for byte. Two of them also write
//! large runs into one shared file, and the fourth thread reads it, cuts it short
//! and syncs all the time, freeing its pages while copies into and out of them may be
//! in flight. Every 8-byte word written anywhere names its file (and the shared file
//! its writer), so a read of the shared file may show any of its writers' bytes or
//! zeros (a word torn between them where a read races a write), and a private file
//! exactly its own bytes: a word of another file in either is a page that changed
//! hands under a copy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pmlab_fs::journal::Op;
use pmlab_fs::layout::Params;
use pmlab_fs::pxfs::{OpenFlags, Pxfs};
use pmlab_fs::service;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

mod support;

const ROUNDS: usize = 1000;
const PRIVATE_THREADS: u32 = 3;
/// Largest private write, and largest run into the shared file.
const MAX_WRITE: usize = 96 * 1024;
const SHARED_RUN: usize = 256 * 1024;

fn params() -> Params {
    Params {
        meta_pages: 4096,
        inodes: 31 * 64,
        log_pages: 400,
        max_domains: 8,
        // 16 MiB: the private files and the shared file's runs fill it several times
        // over in a run, so freed pages are handed out again soon; and an eighth of it
        // (a client's reservation limit) holds the pages of every thread's write in
        // flight at once.
        domain_pages: 4096,
        kv_object_pages: 2,
        volume_id: 12,
    }
}

/// Bytes whose 8-byte words all name `tag` (and their place, so runs differ).
fn words(tag: u32, start: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    let mut w = start / 8;
    while v.len() < len {
        v.extend_from_slice(&((u64::from(tag) << 32) | (w & 0xffff_ffff)).to_le_bytes());
        w += 1;
    }
    v.truncate(len);
    v
}

fn private_tag(thread: u32, file: u32) -> u32 {
    0x1000 + thread * 16 + file
}

const SHARED_TAGS: [u32; 2] = [0xA001, 0xA002];

/// One private file's life: writes at random places, sizes changed, read back whole.
fn private_thread(fs: &Pxfs, t: u32, stop: &AtomicBool) -> Result<(), String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(u64::from(t) + 1);
    let dir = format!("/p{t}");
    fs.mkdir(&dir, 0o755).map_err(|e| e.to_string())?;
    let mut files: Vec<Option<Vec<u8>>> = vec![None; 4];
    for round in 0..ROUNDS {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let f = rng.gen_range(0..files.len());
        let path = format!("{dir}/f{f}");
        let tag = private_tag(t, f as u32);
        let fd = match &files[f] {
            Some(_) => fs.open(
                &path,
                OpenFlags {
                    write: true,
                    ..Default::default()
                },
            ),
            None => fs.create(&path, 0o644),
        }
        .map_err(|e| format!("{path}: {e}"))?;
        let mine = files[f].get_or_insert_with(Vec::new);
        match rng.gen_range(0..10) {
            0..=5 => {
                let off = rng.gen_range(0..=mine.len() + 4096) as u64;
                let len = rng.gen_range(1..=MAX_WRITE);
                let data = words(tag, off, len);
                fs.pwrite(fd, off, &data)
                    .map_err(|e| format!("{path}: write: {e}"))?;
                let end = off as usize + len;
                if mine.len() < end {
                    mine.resize(end, 0);
                }
                mine[off as usize..end].copy_from_slice(&data);
            }
            6 | 7 => {
                let size = rng.gen_range(0..=mine.len());
                fs.truncate(&path, size as u64)
                    .map_err(|e| format!("{path}: truncate: {e}"))?;
                mine.truncate(size);
            }
            8 => fs.fsync(fd).map_err(|e| format!("{path}: fsync: {e}"))?,
            _ => {}
        }
        let mut got = vec![0u8; mine.len() + 100];
        let n = fs
            .pread(fd, 0, &mut got)
            .map_err(|e| format!("{path}: read: {e}"))?;
        fs.close(fd).map_err(|e| e.to_string())?;
        if got[..n] != mine[..] {
            let at = (0..n.min(mine.len()))
                .find(|&i| got[i] != mine[i])
                .unwrap_or(n);
            return Err(format!(
                "round {round}: {path} read back {n} bytes, first differing at byte {at} (of {})",
                mine.len()
            ));
        }
        if rng.gen_range(0..8) == 0 {
            fs.unlink(&path)
                .map_err(|e| format!("{path}: unlink: {e}"))?;
            fs.sync().map_err(|e| e.to_string())?;
            files[f] = None;
        }
    }
    Ok(())
}

/// Checks that every word of `bytes` (read at `off` of the shared file) is a writer's
/// or zero, byte by byte: a read that races a write or a cut of the same bytes may see
/// a word half written, as on any file system (memory copies are not 8-byte atomic:
/// words such as 0x0000_a000_xxxx_xxxx, a writer's 0xa001 over zeros, were seen), but
/// every byte of it is a shared writer's byte for that place or zero. A word of a
/// private file has bytes no shared writer writes there (its tag's 0x10).
fn shared_words_ok(bytes: &[u8], off: u64) -> Result<(), String> {
    for (k, w) in bytes.chunks_exact(8).enumerate() {
        let at = off + 8 * k as u64;
        let writers: Vec<[u8; 8]> = SHARED_TAGS
            .iter()
            .map(|&t| words(t, at, 8).try_into().unwrap())
            .collect();
        let byte_ok = |(i, &b): (usize, &u8)| b == 0 || writers.iter().any(|x| x[i] == b);
        if !w.iter().enumerate().all(byte_ok) {
            let word = u64::from_le_bytes(w.try_into().unwrap());
            return Err(format!(
                "the shared file holds a word no writer wrote there ({word:#018x}, tag {:#x}) \
                 at byte {at}",
                word >> 32
            ));
        }
    }
    Ok(())
}

/// Writes runs into the shared file at word-aligned places, reading each back.
fn shared_writer(fs: &Pxfs, tag: u32, stop: &AtomicBool) -> Result<(), String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(u64::from(tag));
    let fd = fs
        .open(
            "/shared",
            OpenFlags {
                write: true,
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; SHARED_RUN];
    while !stop.load(Ordering::Relaxed) {
        let off = rng.gen_range(0..64u64) * 4096 + 8 * rng.gen_range(0..64u64);
        let data = words(tag, off, rng.gen_range(1..=SHARED_RUN / 8) * 8);
        fs.pwrite(fd, off, &data)
            .map_err(|e| format!("shared write: {e}"))?;
        let n = fs
            .pread(fd, off, &mut buf)
            .map_err(|e| format!("shared read: {e}"))?;
        shared_words_ok(&buf[..n / 8 * 8], off)?;
    }
    fs.close(fd).map_err(|e| e.to_string())
}

/// Reads the shared file whole, cuts it short and syncs, again and again.
fn shared_cutter(fs: &Pxfs, stop: &AtomicBool) -> Result<(), String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
    let mut buf = vec![0u8; 64 * 4096 + SHARED_RUN];
    while !stop.load(Ordering::Relaxed) {
        let fd = fs
            .open("/shared", OpenFlags::default())
            .map_err(|e| e.to_string())?;
        let n = fs
            .pread(fd, 0, &mut buf)
            .map_err(|e| format!("shared read: {e}"))?;
        fs.close(fd).map_err(|e| e.to_string())?;
        shared_words_ok(&buf[..n / 8 * 8], 0)?;
        let size = rng.gen_range(0..4u64) * 4096;
        fs.truncate("/shared", size)
            .map_err(|e| format!("shared truncate: {e}"))?;
        fs.sync().map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[test]
fn threads_sharing_a_mount_never_see_a_page_change_files_under_a_copy() {
    let (tmp, svc) = serve();
    let sock = tmp.path().join("sock");
    let fs = Pxfs::mount(&sock).unwrap();
    let fd = fs.create("/shared", 0o644).unwrap();
    fs.close(fd).unwrap();
    let stop = AtomicBool::new(false);
    let fail = |r: Result<(), String>| {
        if let Err(e) = &r {
            // Printed at once: the other threads may take a while to stop.
            eprintln!("{e}");
            stop.store(true, Ordering::Relaxed);
        }
        r
    };
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let (fs, stop) = (&fs, &stop);
        let shared: Vec<_> = SHARED_TAGS
            .iter()
            .map(|&tag| s.spawn(move || fail(shared_writer(fs, tag, stop))))
            .collect();
        let cutter = s.spawn(move || fail(shared_cutter(fs, stop)));
        let private: Vec<_> = (0..PRIVATE_THREADS)
            .map(|t| s.spawn(move || fail(private_thread(fs, t, stop))))
            .collect();
        // A thread that panics is an error too, and stops the others like one.
        let joined = |h: std::thread::ScopedJoinHandle<'_, Result<(), String>>| {
            h.join()
                .unwrap_or_else(|_| Err("a thread panicked (see above)".into()))
        };
        let mut out: Vec<_> = private.into_iter().map(joined).collect();
        stop.store(true, Ordering::Relaxed);
        out.extend(shared.into_iter().map(joined));
        out.push(joined(cutter));
        out
    });
    drop(fs);
    svc.stop().unwrap();
    let errors: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// A fresh volume of this test's geometry on tmpfs, served on its `sock`.
fn serve() -> (tempfile::TempDir, service::Handle) {
    support::shm::serve(&params())
}

/// A mount with `/f` of `pages` pages written and synced; the file's domain.
fn mount_with_file(sock: &std::path::Path, pages: usize) -> (Pxfs, u16) {
    let fs = Pxfs::mount(sock).unwrap();
    let fd = fs.create("/f", 0o644).unwrap();
    fs.write(fd, &words(7, 0, pages * 4096)).unwrap();
    fs.close(fd).unwrap();
    fs.sync().unwrap();
    let ino = fs.stat("/f").unwrap().ino;
    let d = fs.client().state().inode(ino).unwrap().domain;
    (fs, d)
}

/// How long a test waits for an operation that must not finish while something is
/// held: long enough for one the code under test does not hold back to go through;
/// the correct code never finishes here, however long the wait.
const NEVER: Duration = Duration::from_millis(300);

/// The gate itself, deterministically: with a copy of a file's pages in flight, a
/// batch that frees them is not sent, and the lease is not given to another client,
/// until the copy ends.
#[test]
fn requests_that_free_pages_wait_for_the_copies_in_flight() {
    let (tmp, svc) = serve();
    let sock = tmp.path().join("sock");
    let (fs, d) = mount_with_file(&sock, 8);
    // A truncate that frees the pages, then the sync that would ship it.
    let copy = held_copy(&fs, d);
    fs.truncate("/f", 0).unwrap();
    let early = finishes_while_held(copy, NEVER, || fs.sync().unwrap());
    assert!(
        !early,
        "the batch freeing /f's pages was sent with a copy of them in flight"
    );
    // Another client taking the file's lease (a revocation of this client's).
    let fd = fs
        .open(
            "/f",
            OpenFlags {
                write: true,
                ..Default::default()
            },
        )
        .unwrap();
    fs.write(fd, &words(8, 0, 4 * 4096)).unwrap();
    fs.close(fd).unwrap();
    let other = Pxfs::mount(&sock).unwrap();
    let copy = held_copy(&fs, d);
    let early = finishes_while_held(copy, NEVER, || {
        let fd = other
            .open(
                "/f",
                OpenFlags {
                    write: true,
                    ..Default::default()
                },
            )
            .unwrap();
        other.close(fd).unwrap();
    });
    assert!(
        !early,
        "the lease on /f went to another client with a copy of its pages in flight"
    );
    drop((fs, other));
    svc.stop().unwrap();
}

/// libFS sends what it records at once when nothing of the client is in flight (the
/// service would otherwise sit idle until the next fsync), and holds it for a later
/// batch while a batch or a copy of file data is in flight: a batch that freed the
/// copied pages would have to wait for the copy.
#[test]
fn a_recorded_operation_is_sent_at_once_only_when_nothing_is_in_flight() {
    let (tmp, svc) = serve();
    let (fs, d) = mount_with_file(&tmp.path().join("sock"), 2);
    let held = || {
        let s = fs.client().state();
        let ops = s.pending_ops().iter();
        ops.filter(|op| !matches!(op, Op::Stamp { .. })).count()
    };
    // Nothing in flight after the sync: the first operation goes at once.
    let sent = fs.client().requests_sent();
    fs.mkdir("/a", 0o755).unwrap();
    assert_eq!(
        held(),
        0,
        "an operation recorded with nothing in flight waited for the next fsync"
    );
    assert!(fs.client().requests_sent() > sent, "no batch was sent");
    // Its batch has not been waited for: the next one is held for a later batch.
    fs.mkdir("/b", 0o755).unwrap();
    assert_eq!(held(), 1, "an operation was sent with a batch in flight");
    fs.sync().unwrap();
    assert_eq!(held(), 0);
    // Sending now would wait for the copy, which this thread holds.
    let copy = held_copy(&fs, d);
    let finished = finishes_while_held(copy, Duration::from_secs(2), || {
        fs.mkdir("/c", 0o755).unwrap()
    });
    assert!(
        finished,
        "an operation recorded with a copy in flight waited for the copy"
    );
    assert_eq!(held(), 1, "an operation was sent with a copy in flight");
    fs.sync().unwrap();
    for dir in ["/a", "/b", "/c"] {
        assert!(fs.stat(dir).is_ok(), "{dir} was not applied");
    }
    drop(fs);
    svc.stop().unwrap();
}

/// A copy of domain `d`'s data in flight, held by the caller until dropped.
fn held_copy(fs: &Pxfs, d: u16) -> pmlab_fs::client::Copy {
    fs.client()
        .state()
        .begin_copy(d, false, usize::MAX)
        .unwrap()
        .expect("mapped")
}

/// Whether `f`, run on another thread while this one holds `held`, finishes within
/// `patience`; `held` goes afterwards either way, so that `f` ends.
fn finishes_while_held<T>(held: T, patience: Duration, f: impl FnOnce() + Send) -> bool {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            f();
            done.store(true, Ordering::SeqCst);
        });
        let until = std::time::Instant::now() + patience;
        while !done.load(Ordering::SeqCst) && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        let finished = done.load(Ordering::SeqCst);
        drop(held);
        h.join().unwrap();
        finished
    })
}

/// Opens, reads and closes `/f` whole; its bytes.
fn read_whole(fs: &Pxfs) -> Vec<u8> {
    let fd = fs.open("/f", OpenFlags::default()).unwrap();
    let mut buf = vec![0u8; 64 * 4096];
    let n = fs.read(fd, &mut buf).unwrap();
    fs.close(fd).unwrap();
    buf.truncate(n);
    buf
}

/// Opens, reads, stats and closes of files whose leases, names, inodes and pages libFS has
/// cached take its state shared (`client::shared`), as KVFS gets do: with one thread
/// holding the state shared, another thread's cached read runs to the end. A write
/// needs the state alone and waits.
#[test]
fn cached_reads_share_the_state_and_writes_wait_for_it() {
    let (tmp, svc) = serve();
    let sock = tmp.path().join("sock");
    let (fs, _) = mount_with_file(&sock, 8);
    let want = words(7, 0, 8 * 4096);
    assert_eq!(read_whole(&fs), want, "the first read fills the caches");
    // A bound on liveness, not a timing: a cached read finishes in microseconds, and
    // one that needs the state alone waits for `held` however long this waits.
    let live = Duration::from_secs(20);
    let held = fs.client().state_shared();
    let read = finishes_while_held(held, live, || assert_eq!(read_whole(&fs), want));
    assert!(
        read,
        "a cached read waited for a thread holding the state shared"
    );
    let held = fs.client().state_shared();
    let stat = finishes_while_held(held, live, || {
        assert_eq!(fs.stat("/f").unwrap().size, want.len() as u64)
    });
    assert!(
        stat,
        "a cached stat waited for a thread holding the state shared"
    );

    let kv = pmlab_fs::kvfs::Kvfs::open(&sock, "/kv", 0o644).unwrap();
    kv.put("k", b"value").unwrap();
    assert_eq!(kv.get("k").unwrap().unwrap(), b"value");
    let held = kv.client().state_shared();
    let got = finishes_while_held(held, live, || {
        assert_eq!(kv.get("k").unwrap().unwrap(), b"value")
    });
    assert!(
        got,
        "a cached KVFS get waited for a thread holding the state shared"
    );

    let held = fs.client().state_shared();
    let wrote = finishes_while_held(held, NEVER, || {
        let fd = fs.create("/g", 0o644).unwrap();
        fs.write(fd, b"x").unwrap();
        fs.close(fd).unwrap();
    });
    assert!(
        !wrote,
        "a create ran while another thread held the state shared"
    );
    drop((fs, kv));
    svc.stop().unwrap();
}

/// Creates each of `paths` holding `data`, syncs, and takes the files' inodes out of
/// libFS's cache, while their names stay cached (as a file another client wrote, or
/// one whose inode-table page the cache let go, is found).
fn write_and_sync(fs: &Pxfs, paths: &[&str], data: &[u8]) {
    for path in paths {
        let fd = fs.create(path, 0o644).unwrap();
        fs.write(fd, data).unwrap();
        fs.close(fd).unwrap();
    }
    fs.sync().unwrap();
    for path in paths {
        let ino = fs.stat(path).unwrap().ino;
        fs.client().state().forget_cached_inode(ino);
    }
}

/// A first open and read of a file whose inode and page map libFS has not cached run
/// under the state shared, reading the mapping, while another thread holds the state:
/// taking the state alone to fill the caches would wait for every reader of the
/// process first (webserver x100's first opens of its files did).
#[test]
fn first_reads_read_the_mapping_while_another_thread_holds_the_state() {
    let (tmp, svc) = serve();
    let sock = tmp.path().join("sock");
    let fs = Pxfs::mount(&sock).unwrap();
    let want = words(9, 0, 8 * 4096);
    fs.mkdir("/d", 0o755).unwrap();
    write_and_sync(&fs, &["/d/f", "/d/g"], &want);
    // A look at /d/g finds the directory's lease covering its names, as a web
    // server's reads find it covering a file's neighbours.
    fs.stat("/d/g").unwrap();
    let ino = {
        let s = fs.client().state_shared();
        let d = s
            .cached_lookup(pmlab_fs::layout::ROOT_INO, "d")
            .expect("name cached");
        let ino = s.cached_lookup(d, "f").expect("name cached");
        // What makes this test about the mapping.
        assert_eq!(s.cached_inode(ino), None, "the inode is still cached");
        ino
    };
    let live = Duration::from_secs(20);
    let held = fs.client().state_shared();
    let read = finishes_while_held(held, live, || {
        let fd = fs.open("/d/f", OpenFlags::default()).unwrap();
        let mut buf = vec![0u8; 16 * 4096];
        let n = fs.read(fd, &mut buf).unwrap();
        fs.close(fd).unwrap();
        assert_eq!(&buf[..n], &want[..]);
    });
    assert!(
        read,
        "a first read waited for a thread holding the state shared"
    );
    let held = fs.client().state_shared();
    let stat = finishes_while_held(held, live, || {
        assert_eq!(fs.stat("/d/f").unwrap().size, want.len() as u64)
    });
    assert!(
        stat,
        "a first stat waited for a thread holding the state shared"
    );
    assert_eq!(
        fs.client().state_shared().cached_inode(ino),
        None,
        "what was read while the state was held went into the caches"
    );
    drop(fs);
    svc.stop().unwrap();
}

/// What a reader found in the mapping under the shared state is cached afterwards only
/// if nothing the cache saw in between touched it: a hold of the state that changed
/// nothing, or a write of another file, leaves it to be cached (before, any exclusive
/// hold kept it out); a write of the file itself, which rewrote its inode, or a clear
/// of the caches (a lease given back) does not.
#[test]
fn reads_from_the_mapping_are_cached_only_if_nothing_changed_them_since() {
    use pmlab_fs::client::Reach;
    let (tmp, svc) = serve();
    let fs = Pxfs::mount(&tmp.path().join("sock")).unwrap();
    write_and_sync(&fs, &["/f", "/g"], &words(9, 0, 4096));
    let ino = fs.stat("/f").unwrap().ino;
    let cached = || fs.client().state_shared().cached_inode(ino);
    // f's inode from the mapping, after the caches were emptied, and the tick it is
    // as of.
    let read = || {
        fs.client().state().forget_cached();
        let s = fs.client().state_shared();
        assert_eq!(s.cached_inode(ino), None, "the inode is still cached");
        let inode = s.inode_within(ino, Reach::Mapping).expect("in the mapping");
        (inode, s.cache_tick())
    };
    let append = |path: &str| {
        let flags = OpenFlags {
            write: true,
            append: true,
            ..Default::default()
        };
        let fd = fs.open(path, flags).unwrap();
        fs.write(fd, &words(9, 0, 100)).unwrap();
        fs.close(fd).unwrap();
    };

    let (inode, tick) = read();
    drop(fs.client().state());
    append("/g");
    fs.client()
        .remember(tick, &[(ino, inode)], Some((ino, 0, &[77])));
    assert_eq!(cached(), Some(inode), "an untouched read was not cached");
    let s = fs.client().state_shared();
    assert_eq!(
        s.cached_pages(ino, &inode, 0, 0),
        Some(vec![77]),
        "nor its pages"
    );
    drop(s);

    let (inode, tick) = read();
    append("/f");
    let now = fs.client().state().inode(ino).unwrap();
    assert_ne!(now, inode, "the append left the inode as it was");
    fs.client().remember(tick, &[(ino, inode)], None);
    assert_eq!(
        cached(),
        Some(now),
        "a read older than the write was cached"
    );

    let (inode, tick) = read();
    fs.client().state().forget_cached();
    fs.client().remember(tick, &[(ino, inode)], None);
    assert_eq!(cached(), None, "a read older than a clear was cached");
    drop(fs);
    svc.stop().unwrap();
}

/// A create, and an unlink, whose leases are held take the state alone once each: the
/// walk to the directory and the change are one hold, which the process's other
/// threads wait for (fileserver x50's creates took it three times, once each for the
/// walk, the create and the new file's lease; its unlinks twice). Counted with the
/// state's own count of exclusive holds.
#[test]
fn a_create_and_an_unlink_hold_the_state_once_each() {
    let (tmp, svc) = serve();
    let fs = Pxfs::mount(&tmp.path().join("sock")).unwrap();
    fs.mkdir("/d", 0o755).unwrap();
    // The first create and unlink in /d take the leases the ones after find held.
    write_and_sync(&fs, &["/d/warm"], b"w");
    fs.unlink("/d/warm").unwrap();
    let holds = || fs.client().state_shared().holds();
    for round in 0..3 {
        let path = format!("/d/f{round}");
        let before = holds();
        let fd = fs.create(&path, 0o644).unwrap();
        let taken = holds().wrapping_sub(before);
        assert_eq!(
            taken, 1,
            "create {round} held the state alone {taken} times"
        );
        fs.close(fd).unwrap();
        let before = holds();
        fs.unlink(&path).unwrap();
        let taken = holds().wrapping_sub(before);
        assert_eq!(
            taken, 1,
            "unlink {round} held the state alone {taken} times"
        );
    }
    fs.sync().unwrap();
    assert!(fs.stat("/d/f0").is_err(), "an unlinked name is still there");
    drop(fs);
    svc.stop().unwrap();
}

//! Regions on tmpfs, on the page cache and in memfds: create, reopen, validate, persist.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use pmlab_native::{
    CpuPersistFeatures, Medium, PersistMode, ReadOnlyRegion, Region, RegionError, RegionSource,
};
use pmlab_spine::{FlushKind, Memory, PersistCounters};

const MIB: u64 = 1 << 20;

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").expect("/dev/shm is a tmpfs on Linux")
}

fn header_field(e: &RegionError) -> Option<(u64, &'static str)> {
    match e {
        RegionError::Header { offset, field, .. } => Some((*offset, *field)),
        _ => None,
    }
}

#[test]
fn memfd_round_trip_and_counters() {
    let mut r = Region::create_memfd("t", MIB).unwrap();
    assert_eq!(r.medium(), Medium::Tmpfs);
    assert_eq!(r.persist_mode(), CpuPersistFeatures::detect().best_mode());
    assert_eq!(r.size(), MIB - 4096);
    r.write_u64(100, 0xfeed).unwrap();
    r.persist(60, 8).unwrap();
    r.flush(0, 4096, FlushKind::Clflush).unwrap();
    r.fence();
    assert_eq!(
        r.persist_counters(),
        PersistCounters {
            flushes: 2 + 64,
            fences: 2
        }
    );
    assert!(r.write(MIB - 4096 - 4, &[0; 8]).is_err());

    let fd = r.try_clone_fd().unwrap();
    let mut again = Region::from_fd(fd).unwrap();
    assert_eq!(again.read_u64(100).unwrap(), 0xfeed);
    // Both mappings see each other's stores: it is one shared object.
    again.write_u64(200, 7).unwrap();
    assert_eq!(r.read_u64(200).unwrap(), 7);
    assert_eq!(r.data()[100], 0xed);
}

#[test]
fn tmpfs_file_reopens_with_its_data() {
    let dir = shm_dir();
    let path = dir.path().join("r.scm");
    {
        let mut r = Region::create_file(&path, 2 * MIB).unwrap();
        assert_eq!(r.medium(), Medium::Tmpfs);
        r.data_mut()[..5].copy_from_slice(b"hello");
        r.persist(0, 5).unwrap();
    }
    let mut r = Region::open(&path).unwrap();
    let mut b = [0u8; 5];
    r.read(0, &mut b).unwrap();
    assert_eq!(&b, b"hello");
    assert_eq!(r.header().region_size, 2 * MIB);
    assert!(matches!(
        Region::create_file(&path, 2 * MIB),
        Err(RegionError::Io { op: "create", .. })
    ));
}

#[test]
fn page_cache_file_uses_msync() {
    // The target directory's scratch space is on the build's disk, so its files live in
    // the page cache; the source tree is never written.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("r.scm");
    let mut r = Region::create_file(&path, MIB).unwrap();
    if r.medium() != Medium::PageCache {
        eprintln!(
            "skipped: {} is on {:?}, not a disk-backed file system",
            env!("CARGO_TARGET_TMPDIR"),
            r.medium()
        );
        return;
    }
    assert_eq!(r.persist_mode(), PersistMode::Msync);
    r.write_u64(8, 42).unwrap();
    r.persist(8, 8).unwrap();
    assert_eq!(
        r.persist_counters(),
        PersistCounters {
            flushes: 1,
            fences: 1
        }
    );
    let e = r.set_persist_mode(PersistMode::Clflush).unwrap_err();
    assert!(e.to_string().contains("only msync"), "{e}");
    drop(r);
    assert_eq!(Region::open(&path).unwrap().read_u64(8).unwrap(), 42);
}

fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn corrupted_and_foreign_regions_are_refused_with_a_location() {
    let dir = shm_dir();
    let path = dir.path().join("r.scm");
    drop(Region::create_file(&path, MIB).unwrap());

    patch(&path, 20, &[0xff]);
    let e = Region::open(&path).unwrap_err();
    assert_eq!(header_field(&e), Some((60, "checksum")), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    assert!(e.to_string().contains("region_size"), "{e}");
    assert_eq!(
        header_field(&ReadOnlyRegion::open(&path).unwrap_err()),
        Some((60, "checksum"))
    );

    let foreign = dir.path().join("foreign");
    std::fs::write(&foreign, vec![b'x'; 8192]).unwrap();
    let e = Region::open(&foreign).unwrap_err();
    assert_eq!(header_field(&e), Some((0, "magic")), "{e}");

    let tiny = dir.path().join("tiny");
    std::fs::write(&tiny, b"PMLAB").unwrap();
    assert!(matches!(
        Region::open(&tiny),
        Err(RegionError::BadSize { size: 5, .. })
    ));

    let grown = dir.path().join("grown");
    drop(Region::create_file(&grown, MIB).unwrap());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&grown)
        .unwrap()
        .set_len(2 * MIB)
        .unwrap();
    let e = Region::open(&grown).unwrap_err();
    assert_eq!(header_field(&e), Some((16, "region_size")), "{e}");

    let e = Region::create_memfd("odd", MIB + 1).unwrap_err();
    assert!(matches!(e, RegionError::BadSize { .. }), "{e}");
}

/// The permissions column of the /proc/self/maps line that starts at `addr`.
fn mapping_perms(addr: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let start = format!("{addr:x}-");
    let line = maps
        .lines()
        .find(|l| l.starts_with(&start))
        .expect("mapping listed");
    line.split_whitespace().nth(1).unwrap().to_string()
}

#[test]
fn read_only_region_holds_no_writable_mapping() {
    let mut r = Region::create_memfd("ro", MIB).unwrap();
    r.write_u64(0, 99).unwrap();
    let ro = ReadOnlyRegion::from_fd(r.read_only_fd().unwrap()).unwrap();
    assert_eq!(ro.read_u64(0).unwrap(), 99);
    assert!(ro.info().persist_mode.is_none());
    let base = ro.data().as_ptr() as usize - pmlab_native::DATA_OFFSET as usize;
    assert_eq!(mapping_perms(base), "r--s");
    let rw_base = r.data().as_ptr() as usize - pmlab_native::DATA_OFFSET as usize;
    assert_eq!(mapping_perms(rw_base), "rw-s");
    // A read-only descriptor cannot be mapped writable.
    assert!(Region::from_fd(r.read_only_fd().unwrap()).is_err());
}

#[test]
fn sealed_memfd_refuses_new_writable_mappings() {
    let mut r = Region::create_memfd("sealed", MIB).unwrap();
    r.seal_future_writes().unwrap();
    r.write_u64(0, 5).unwrap(); // the existing writable mapping keeps working
    let e = Region::from_fd(r.try_clone_fd().unwrap()).unwrap_err();
    assert!(matches!(e, RegionError::Io { op: "mmap", .. }), "{e}");
    let ro = ReadOnlyRegion::from_fd(r.try_clone_fd().unwrap()).unwrap();
    assert_eq!(ro.read_u64(0).unwrap(), 5);
    assert!(matches!(ro.source(), RegionSource::Fd(_)));
}

#[test]
fn persist_modes_can_be_switched_only_to_supported_ones() {
    let cpu = CpuPersistFeatures::detect();
    let mut r = Region::create_memfd("modes", MIB).unwrap();
    for m in PersistMode::ALL {
        let res = r.set_persist_mode(m);
        assert_eq!(res.is_ok(), cpu.supports(m), "{m}: {res:?}");
        if res.is_ok() {
            r.write_u64(64, m as u64).unwrap();
            r.persist(64, 8).unwrap();
            assert_eq!(r.persist_mode(), m);
        }
    }
}

/// Streaming writes store exactly the bytes an ordinary write does, at every alignment
/// of either end, count one flush per line they span, and need only a fence: in the
/// CPU flush mode (non-temporal stores for whole lines on x86_64) and in the fallback
/// (`Portable`: an ordinary store and a flush).
#[test]
fn streaming_writes_store_the_same_bytes_in_every_mode() {
    let modes = [
        CpuPersistFeatures::detect().best_mode(),
        PersistMode::Portable,
    ];
    for mode in modes {
        let mut r = Region::create_memfd("s", MIB).unwrap();
        r.set_persist_mode(mode).unwrap();
        let mut expect = vec![0u8; 3 * 4096];
        let mut seed = 1u64;
        for (at, len) in [
            (0, 4096),
            (1, 63),
            (63, 2),
            (64, 64),
            (5, 4000),
            (100, 8000),
            (4095, 1),
        ] {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 56) as u8
                })
                .collect();
            let before = r.persist_counters();
            r.write_streaming(at, &data).unwrap();
            let spanned = (at + len as u64).div_ceil(64) - at / 64;
            assert_eq!(
                r.persist_counters().flushes - before.flushes,
                spanned,
                "{mode:?}: lines of a write of {len} bytes at {at}"
            );
            r.fence();
            expect[at as usize..at as usize + len].copy_from_slice(&data);
            let mut got = vec![0u8; expect.len()];
            r.read(0, &mut got).unwrap();
            assert!(
                got == expect,
                "{mode:?}: bytes after a write of {len} bytes at {at}"
            );
        }
        assert!(r.write_streaming(MIB - 4096 - 4, &[0; 8]).is_err());
    }
    println!(
        "streaming path: {}",
        if pmlab_native::stream_available() {
            "non-temporal stores (x86_64)"
        } else {
            "ordinary stores and flushes"
        }
    );
}

/// Threads copying into disjoint ranges of one region through a shared reference at
/// once store exactly their bytes, each made durable by its own fence; in a mode that
/// needs the region's state to persist (`Portable`) the shared copy stores nothing
/// and says so, so that the caller takes the `&mut` path.
#[test]
fn shared_streaming_writes_from_several_threads_store_their_bytes() {
    let mut r = Region::create_memfd("s", MIB).unwrap();
    r.set_persist_mode(CpuPersistFeatures::detect().best_mode())
        .unwrap();
    // Odd offsets and lengths, so that heads, bodies and tails of lines all occur, and
    // neighbours share lines only where their ranges touch: none do here.
    let ranges: Vec<(u64, usize)> = (0..8)
        .map(|t| (t * 20_000 + 3 + t, 9_000 + 7 * t as usize))
        .collect();
    std::thread::scope(|s| {
        for (t, &(at, len)) in ranges.iter().enumerate() {
            let r = &r;
            s.spawn(move || {
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + t) as u8).collect();
                // SAFETY: the threads' ranges are disjoint, and nothing else touches
                // the region while they run.
                assert!(unsafe { r.write_streaming_shared(at, &data) }.unwrap());
                r.fence_shared();
            });
        }
    });
    for (t, &(at, len)) in ranges.iter().enumerate() {
        let mut got = vec![0u8; len];
        r.read(at, &mut got).unwrap();
        let want: Vec<u8> = (0..len).map(|i| (i * 7 + t) as u8).collect();
        assert!(got == want, "thread {t}'s bytes at {at}");
        let mut gap = [0xffu8; 3];
        r.read(at - 3, &mut gap).unwrap();
        assert_eq!(gap, [0, 0, 0], "bytes before thread {t}'s range");
    }
    // SAFETY: no other access to the region meanwhile.
    assert!(unsafe { r.write_streaming_shared(MIB - 4096 - 4, &[0; 8]) }.is_err());
    r.set_persist_mode(PersistMode::Portable).unwrap();
    // SAFETY: as above.
    assert!(!unsafe { r.write_streaming_shared(0, &[1; 100]) }.unwrap());
    let mut got = [0xffu8; 1];
    r.read(0, &mut got).unwrap();
    assert_eq!(got, [0], "a refused shared copy stores nothing");
}

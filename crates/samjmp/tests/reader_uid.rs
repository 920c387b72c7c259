//! A process of another uid (65534) on alignments loaded with mode 644: the kernel
//! refuses it the writable VAS; through the reader VAS it counts (flagstat) and
//! selects (view) what the owner does, and the segment's mapping in it is not
//! writable, in its page tables' view (`/proc/self/maps`) and in fact (a store to it
//! is killed with SIGSEGV). The same for the mmap version's region file (mode 644): the
//! kernel refuses it a writable open, and the read-only mapping it falls back to
//! serves flagstat and view and takes no store.

use std::path::{Path, PathBuf};

use pmlab_samjmp::arena::{Addressing, Arena};
use pmlab_samjmp::index::{parse_region, select};
use pmlab_samjmp::ops::{Target, load_into};
use pmlab_samjmp::store::{RegionFile, VasStore};
use pmlab_samjmp::{SamError, flagstat};
use pmlab_testkit::child;
use pmlab_vas::{Mode, VasError};

const TEST: &str = "a_reader_uid_gets_results_but_no_writable_mapping";
const REGION_TEST: &str = "a_reader_uid_of_a_region_file_gets_results_but_no_writable_mapping";

fn registry() -> PathBuf {
    PathBuf::from(std::env::var("SAM_REG").expect("SAM_REG"))
}

/// The counts and the selection of `seq1:100-900`, as the reader sees them.
fn read(st: &VasStore) -> (u64, usize) {
    read_arena(&st.arena)
}

fn read_arena<A: Addressing>(arena: &Arena<A>) -> (u64, usize) {
    let names = arena.ref_names().unwrap();
    let sel = select(arena, parse_region("seq1:100-900", &names).unwrap()).unwrap();
    (flagstat::counts(arena).unwrap().total[0], sel.len())
}

fn want() -> (u64, usize) {
    let w: Vec<u64> = std::env::var("SAM_WANT")
        .unwrap()
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    (w[0], w[1] as usize)
}

fn region_path() -> PathBuf {
    PathBuf::from(std::env::var("SAM_REGION").expect("SAM_REGION"))
}

/// The permissions `/proc/self/maps` shows for the mapping at `base`.
fn perms_at(base: u64) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| l.starts_with(&format!("{base:x}-")))
        .unwrap_or_else(|| panic!("no mapping at {base:#x}"));
    line.split_whitespace().nth(1).unwrap().to_string()
}

fn child_role(role: &str) {
    match role {
        "writer" => match VasStore::open(&registry(), "s", true) {
            Err(SamError::Vas(VasError::PermissionDenied { .. })) => {}
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("65534 got the writable VAS"),
        },
        "reader" => {
            let st = VasStore::open(&registry(), "s", false).unwrap();
            assert!(!st.writable());
            let (n, m) = read(&st);
            assert_eq!((n, m), want());
            let perms = perms_at(st.arena.base() as u64);
            assert!(!perms.contains('w'), "mapping is {perms}");
            eprintln!("reader: mapping {perms}, {n} records, {m} selected");
        }
        "store" => {
            let st = VasStore::open(&registry(), "s", false).unwrap();
            // SAFETY: none: this store must be refused by the MMU (SIGSEGV).
            unsafe { std::ptr::write_volatile(st.arena.base().add(4096), 1u8) };
            panic!("a store into a read-only mapping succeeded");
        }
        "region-writer" => match RegionFile::open(&region_path()) {
            Err(SamError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::PermissionDenied => {}
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("65534 opened the region file for writing"),
        },
        "region-reader" => {
            let rf = RegionFile::open_read_only(&region_path()).unwrap();
            assert!(!rf.writable());
            assert_eq!(read_arena(&rf.arena), want());
            let perms = perms_at(rf.arena.base() as u64);
            assert!(!perms.contains('w'), "mapping is {perms}");
            eprintln!("region reader: mapping {perms}");
        }
        "region-store" => {
            let rf = RegionFile::open_read_only(&region_path()).unwrap();
            // SAFETY: none: this store must be refused by the MMU (SIGSEGV).
            unsafe { std::ptr::write_volatile(rf.arena.base().add(4096), 1u8) };
            panic!("a store into a read-only mapping succeeded");
        }
        r => panic!("unknown role {r}"),
    }
}

/// A scratch directory in /dev/shm that the other uid may enter.
fn open_dir(prefix: &str) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/dev/shm")
        .unwrap();
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    d
}

#[test]
fn a_reader_uid_gets_results_but_no_writable_mapping() {
    child::branch(child_role);
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: cannot switch uid, skipped");
        return;
    }
    let d = open_dir("pmlab-sam-reader");
    let reg = d.path().join("reg");
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sam/ex1.bam");
    let target = Target::Vas {
        dir: reg.clone(),
        name: "s".into(),
    };
    load_into(&target, &input, None, Mode(0o644), false).unwrap();
    {
        let mut st = VasStore::open(&reg, "s", true).unwrap();
        pmlab_samjmp::sort::sort(&mut st.arena, false).unwrap();
        pmlab_samjmp::index::index(&mut st.arena).unwrap();
    }
    let want = read(&VasStore::open(&reg, "s", true).unwrap());
    let exe = child::ForeignExecutable::new().unwrap();
    let run = |role: &str| {
        exe.command_as(TEST, role, 65534, 65534)
            .env("SAM_REG", &reg)
            .env("SAM_WANT", format!("{},{}", want.0, want.1))
            .output()
            .unwrap()
    };
    for role in ["writer", "reader"] {
        let o = run(role);
        assert!(o.status.success(), "{role}: {o:?}");
    }
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(run("store").status.signal(), Some(libc::SIGSEGV));
}

#[test]
fn a_reader_uid_of_a_region_file_gets_results_but_no_writable_mapping() {
    child::branch(child_role);
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: cannot switch uid, skipped");
        return;
    }
    let d = open_dir("pmlab-sam-region-reader");
    let region = d.path().join("s.region");
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sam/ex1.bam");
    load_into(
        &Target::Region(region.clone()),
        &input,
        None,
        Mode(0o644),
        false,
    )
    .unwrap();
    std::fs::set_permissions(&region, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let want = {
        let mut rf = RegionFile::open(&region).unwrap();
        pmlab_samjmp::sort::sort(&mut rf.arena, false).unwrap();
        pmlab_samjmp::index::index(&mut rf.arena).unwrap();
        read_arena(&rf.arena)
    };
    let exe = child::ForeignExecutable::new().unwrap();
    let run = |role: &str| {
        exe.command_as(REGION_TEST, role, 65534, 65534)
            .env("SAM_REGION", &region)
            .env("SAM_WANT", format!("{},{}", want.0, want.1))
            .output()
            .unwrap()
    };
    for role in ["region-writer", "region-reader"] {
        let o = run(role);
        assert!(o.status.success(), "{role}: {o:?}");
    }
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(run("region-store").status.signal(), Some(libc::SIGSEGV));
}

//! A second uid (65534) against alignments loaded with mode 644: it may not load into
//! the VAS nor publish to it (sort, index; error, non-zero exit, the segment's bytes
//! unchanged), and it may run flagstat and view, which print what the owner's runs
//! print, through the read-only reader VAS (`crates/samjmp/tests/reader_uid.rs` checks
//! that such a process holds no writable mapping). The same for the mmap version's
//! region file of mode 644: flagstat and view through a read-only mapping, a clear
//! error for load, sort and index.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

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

/// Runs `pmlab sam ARGS --vas s --dir REG` as `uid` (0: this process's).
fn sam(exe: &Path, reg: &Path, uid: u32, args: &[&str]) -> Output {
    let reg = reg.to_str().unwrap();
    let mut all = args.to_vec();
    all.extend(["--vas", "s", "--dir", reg]);
    sam_as(exe, uid, &all)
}

/// A world-executable link to (or copy of) pmlab in a directory of its own: the build
/// may sit below a 0700 directory the other uid cannot enter.
fn world_executable() -> (tempfile::TempDir, PathBuf) {
    let bin = open_dir("pmlab-sam-bin");
    let exe = bin.path().join("pmlab");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_pmlab"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_pmlab"), &exe).unwrap();
    }
    (bin, exe)
}

#[test]
fn a_uid_without_write_permission_reads_but_cannot_load_or_publish() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: cannot switch uid, skipped");
        return;
    }
    let d = open_dir("pmlab-sam-uid");
    let reg = d.path().join("reg");
    let (_bin, exe) = world_executable();
    let input: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sam/ex1.bam");
    let input = input.to_str().unwrap();
    let owner = |args: &[&str]| {
        let o = sam(&exe, &reg, 0, args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        o.stdout
    };
    owner(&["load", "--no-progress", "--mode", "644", input]);
    owner(&["sort"]);
    owner(&["index"]);
    let flagstat = owner(&["flagstat"]);
    let view = owner(&["view", "seq1:100-900"]);
    let seg = reg.join("seg/s.seg");
    let before = std::fs::read(&seg).unwrap();

    for args in [
        &["load", "--no-progress", input][..],
        &["sort"],
        &["sort", "-n"],
        &["index"],
    ] {
        let o = sam(&exe, &reg, 65534, args);
        assert!(!o.status.success(), "{args:?} as 65534: {}", text(&o));
        assert!(
            text(&o).to_lowercase().contains("denied"),
            "{args:?}: {}",
            text(&o)
        );
        eprintln!("65534 {args:?}: {}", text(&o).trim());
    }
    let o = sam(&exe, &reg, 65534, &["flagstat"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(o.stdout, flagstat);
    let o = sam(&exe, &reg, 65534, &["view", "seq1:100-900"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(o.stdout, view);
    assert!(
        std::fs::read(&seg).unwrap() == before,
        "the segment changed"
    );
    // The owner still finds everything as it was.
    owner(&["check"]);
    assert_eq!(owner(&["flagstat"]), flagstat);
}

/// Runs `pmlab sam ARGS` as `uid` (0: this process's).
fn sam_as(exe: &Path, uid: u32, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut tries = 0;
    loop {
        let mut c = Command::new(exe);
        c.arg("sam").args(args).current_dir("/");
        if uid != 0 {
            c.uid(uid).gid(uid);
        }
        match c.output() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.unwrap(),
        }
    }
}

#[test]
fn a_uid_without_write_permission_reads_a_region_file_but_cannot_load_or_publish() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: cannot switch uid, skipped");
        return;
    }
    let d = open_dir("pmlab-sam-uid-region");
    let region = d.path().join("s.region");
    let r = region.to_str().unwrap();
    let (_bin, exe) = world_executable();
    // The other uid must reach the input itself (a clone may sit below a directory
    // only its owner can enter), so it gets a readable copy beside the region file.
    let input: PathBuf = d.path().join("ex1.bam");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sam/ex1.bam"),
        &input,
    )
    .unwrap();
    std::fs::set_permissions(&input, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let input = input.to_str().unwrap();
    let owner = |args: &[&str]| {
        let o = sam_as(&exe, 0, args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        o.stdout
    };
    owner(&["load", "--no-progress", input, "--region", r]);
    std::fs::set_permissions(&region, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    owner(&["sort", "--region", r]);
    owner(&["index", "--region", r]);
    let flagstat = owner(&["flagstat", "--region", r]);
    let view = owner(&["view", "--region", r, "seq1:100-900"]);
    let before = std::fs::read(&region).unwrap();
    let other = d.path().join("other.region");
    for (args, says) in [
        (
            &["load", "--no-progress", input, "--region", r][..],
            "exists already",
        ),
        (
            &[
                "load",
                "--no-progress",
                input,
                "--region",
                other.to_str().unwrap(),
            ],
            "denied",
        ),
        (&["sort", "--region", r], "denied"),
        (&["sort", "-n", "--region", r], "denied"),
        (&["index", "--region", r], "denied"),
    ] {
        let o = sam_as(&exe, 65534, args);
        assert!(!o.status.success(), "{args:?} as 65534: {}", text(&o));
        assert!(
            text(&o).to_lowercase().contains(says),
            "{args:?}: {}",
            text(&o)
        );
        eprintln!("65534 {args:?}: {}", text(&o).trim());
    }
    assert!(!other.exists());
    let o = sam_as(&exe, 65534, &["flagstat", "--region", r]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(o.stdout, flagstat);
    let o = sam_as(&exe, 65534, &["view", "--region", r, "seq1:100-900"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(o.stdout, view);
    assert!(
        std::fs::read(&region).unwrap() == before,
        "the region file changed"
    );
    owner(&["check", "--region", r]);
    assert_eq!(owner(&["flagstat", "--region", r]), flagstat);
}

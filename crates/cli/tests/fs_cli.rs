//! `pmlab fs` end to end: the real binary builds, checks and serves volumes, and a
//! client in this process works against the served volume.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PMLAB: &str = env!("CARGO_BIN_EXE_pmlab");

fn pmlab(args: &[&str]) -> (bool, String) {
    let out = Command::new(PMLAB).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn mkfs(vol: &Path) {
    let (ok, out) = pmlab(&[
        "fs",
        "mkfs",
        vol.to_str().unwrap(),
        "--meta-pages",
        "1024",
        "--inodes",
        "992",
        "--domain-pages",
        "1024",
    ]);
    assert!(ok, "{out}");
}

#[test]
fn mkfs_then_fsck_is_clean_and_damage_is_reported_with_its_place() {
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    mkfs(&vol);
    let (ok, out) = pmlab(&["fs", "fsck", vol.to_str().unwrap()]);
    assert!(
        ok && out.contains("clean") && out.contains("1 directories"),
        "{out}"
    );

    // mkfs refuses to overwrite.
    let (ok, out) = pmlab(&["fs", "mkfs", vol.to_str().unwrap()]);
    assert!(!ok && out.contains("exists"), "{out}");

    // A foreign directory is refused.
    let (ok, out) = pmlab(&["fs", "fsck", tmp.path().to_str().unwrap()]);
    assert!(!ok && out.contains("no metadata space"), "{out}");

    let meta = vol.join("meta");
    let mut b = std::fs::read(&meta).unwrap();
    // The space's pages follow the region header page.
    let h = pmlab_fs::map::SPACE_HEADER_BYTES as usize;
    // A damaged region header: not a volume at all.
    b[20] ^= 0xff;
    std::fs::write(&meta, &b).unwrap();
    let (ok, out) = pmlab(&["fs", "fsck", vol.to_str().unwrap()]);
    assert!(
        !ok && out.contains("region") && out.contains("checksum"),
        "{out}"
    );
    b[20] ^= 0xff;
    // A damaged superblock: refused outright.
    b[h + 20] ^= 0xff;
    std::fs::write(&meta, &b).unwrap();
    let (ok, out) = pmlab(&["fs", "fsck", vol.to_str().unwrap()]);
    assert!(
        !ok && out.contains("superblock") && out.contains("checksum"),
        "{out}"
    );
    b[h + 20] ^= 0xff;
    // Damage the domain table (page 1): an error naming page 1.
    b[h + 4096 + 7] ^= 0x10;
    std::fs::write(&meta, &b).unwrap();
    let (ok, out) = pmlab(&["fs", "fsck", vol.to_str().unwrap()]);
    assert!(
        !ok && out.contains("page 1 (byte 0x1000)") && out.contains("domain table"),
        "{out}"
    );
}

#[test]
fn serve_runs_as_a_separate_process_and_stops_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    let sock = tmp.path().join("sock");
    mkfs(&vol);
    let mut svc = Command::new(PMLAB)
        .args([
            "fs",
            "serve",
            vol.to_str().unwrap(),
            "--socket",
            sock.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the service did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    {
        let fs = pmlab_fs::pxfs::Pxfs::mount(&sock).unwrap();
        fs.mkdir("/a", 0o755).unwrap();
        let fd = fs.create("/a/hello", 0o644).unwrap();
        fs.write(fd, b"hello, aerie").unwrap();
        fs.fsync(fd).unwrap();
        fs.close(fd).unwrap();
    }
    // A second service on the same socket is refused while the first runs.
    let (ok, out) = pmlab(&[
        "fs",
        "serve",
        vol.to_str().unwrap(),
        "--socket",
        sock.to_str().unwrap(),
    ]);
    assert!(!ok && out.contains("already listens"), "{out}");
    let status = Command::new("kill")
        .args(["-TERM", &svc.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let st = svc.wait().unwrap();
    assert!(st.success(), "{st:?}");
    assert!(!sock.exists());
    let (ok, out) = pmlab(&["fs", "fsck", vol.to_str().unwrap()]);
    assert!(
        ok && out.contains("1 files") && out.contains("2 directories"),
        "{out}"
    );
}

#[test]
fn stress_kills_clients_and_the_service_and_the_volume_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    let (ok, out) = pmlab(&[
        "fs",
        "stress",
        vol.to_str().unwrap(),
        "--kills",
        "2",
        "--clients",
        "2",
        "--seed",
        "5",
    ]);
    assert!(
        ok && out.contains("2 kills in") && out.contains("volume clean and all"),
        "{out}"
    );
    assert!(out.contains("service") && out.contains("client"), "{out}");
}

#[test]
fn crashtest_passes_the_correct_commit_and_fails_a_broken_one() {
    let (ok, out) = pmlab(&["fs", "crashtest", "--batches", "3", "--seed", "2"]);
    assert!(ok && out.contains("no failures"), "{out}");
    assert!(out.contains("per commit: 2.0 fences"), "{out}");
    let (ok, out) = pmlab(&[
        "fs",
        "crashtest",
        "--batches",
        "3",
        "--fault",
        "skip-log-fence",
    ]);
    assert!(!ok && out.contains("crash images failed"), "{out}");
    assert!(out.contains("protocol skip-log-fence"), "{out}");
    let (ok, out) = pmlab(&["fs", "crashtest", "--fault", "skip-nothing"]);
    assert!(!ok && out.contains("is not one of"), "{out}");
}

//! Two `pmlab sam load` of one name at once, in both versions: the first is held open
//! inside its window (`PMLAB_SAM_PAUSE_MS`: a VAS load after its first object, a
//! region-file load before the file is put in place) while the second runs. Exactly
//! one must succeed, the other must fail saying the name exists, and what is stored
//! must check out in full and count what the file counts.
//!
//! The broken variants must be caught: `create-unlocked` (a VAS load that does not
//! hold the name's creation lock, so the second load takes the first one's half-made
//! objects for a dead load's and replaces them) and `rename-over` (a region file
//! renamed into place over the other load's).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn pmlab(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pmlab"));
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().expect("run pmlab")
}

fn run(args: &[&str]) -> Output {
    pmlab(args, &[]).wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Waits until `ready` holds (the first load reached its window), at most 20 s.
fn wait_for(ready: impl Fn() -> bool) {
    let t = Instant::now();
    while !ready() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the first load never got there"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Two loads at `place` (`--vas s --dir REG` or `--region FILE`), the first paused
/// until `in_window` holds; then the checks. `Err` says what went wrong.
fn race(place: &[&str], in_window: impl Fn() -> bool, broken: &str) -> Result<(), String> {
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sam/ex1.bam");
    let input = input.to_str().unwrap();
    let mut load = vec!["sam", "load", "--no-progress", input];
    load.extend_from_slice(place);
    let env = [("PMLAB_SAM_BROKEN", broken)];
    let first = pmlab(&load, &[env[0], ("PMLAB_SAM_PAUSE_MS", "700")]);
    wait_for(in_window);
    let second = pmlab(&load, &env);
    let outs = [
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    ];
    let won: Vec<_> = outs.iter().filter(|o| o.status.success()).collect();
    let lost: Vec<_> = outs.iter().filter(|o| !o.status.success()).collect();
    if won.len() != 1 {
        return Err(format!(
            "{} loads succeeded: {:?}",
            won.len(),
            outs.iter().map(text).collect::<Vec<_>>()
        ));
    }
    if !text(lost[0]).contains("exists already") {
        return Err(format!(
            "the other load failed otherwise: {}",
            text(lost[0])
        ));
    }
    let mut check = vec!["sam", "check"];
    check.extend_from_slice(place);
    let c = run(&check);
    if !c.status.success() {
        return Err(format!("check after the race: {}", text(&c)));
    }
    let mut flagstat = vec!["sam", "flagstat"];
    flagstat.extend_from_slice(place);
    let f = run(&flagstat);
    let want = run(&["sam", "flagstat", input]);
    if !f.status.success() || f.stdout != want.stdout {
        return Err(format!("flagstat after the race: {}", text(&f)));
    }
    Ok(())
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("pmlab-sam-race")
        .tempdir_in("/dev/shm")
        .unwrap()
}

fn vas_race(broken: &str) -> Result<(), String> {
    let d = scratch();
    let reg = d.path().join("reg");
    let marker = reg.join("vas/s.r.toml");
    race(
        &["--vas", "s", "--dir", reg.to_str().unwrap()],
        || marker.exists(),
        broken,
    )
}

fn region_race(broken: &str) -> Result<(), String> {
    let d = scratch();
    let file: PathBuf = d.path().join("s.region");
    let dir = d.path().to_path_buf();
    // The first load's file under its temporary name: the second starts while the
    // first loads or waits (the pause) to put its file in place.
    let loading = move || {
        std::fs::read_dir(&dir).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".loading.")
        })
    };
    race(&["--region", file.to_str().unwrap()], loading, broken)
}

#[test]
fn two_loads_of_one_vas_at_once_leave_one_whole_store() {
    vas_race("").unwrap();
}

#[test]
fn two_loads_of_one_region_file_at_once_leave_one_whole_file() {
    region_race("").unwrap();
}

#[test]
fn the_race_catches_a_load_without_the_creation_lock() {
    let e = vas_race("create-unlocked").expect_err("create-unlocked was not caught");
    eprintln!("create-unlocked caught: {e}");
}

#[test]
fn the_race_catches_a_region_file_renamed_over_another() {
    let e = region_race("rename-over").expect_err("rename-over was not caught");
    eprintln!("rename-over caught: {e}");
}

//! `pmlab sam` end to end, each operation its own process, against the real samtools
//! (1.16, Debian's `samtools` package): flagstat prints exactly what `samtools
//! flagstat` prints, sort orders are `samtools sort`'s (and `-n`'s), and region views
//! are `samtools view` on the sorted, indexed BAM, for both the VAS version and the
//! mmap version, on the real files in `data/sam/` and on a generated data set. Bad
//! input is a located error with a non-zero exit, and loses nothing.
//!
//! samtools is required: without it these tests fail (they never skip).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/sam")
        .join(name)
}

fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run {cmd} ({e}): these tests need samtools (apt-get install samtools)")
    })
}

fn ok(o: Output, what: &str) -> Vec<u8> {
    assert!(
        o.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

fn pmlab<S: AsRef<str>>(args: &[S]) -> Output {
    let args: Vec<&str> = args.iter().map(|s| s.as_ref()).collect();
    run(env!("CARGO_BIN_EXE_pmlab"), &args)
}

fn samtools(args: &[&str]) -> Vec<u8> {
    ok(run("samtools", args), &format!("samtools {args:?}"))
}

fn records_only(sam: Vec<u8>) -> Vec<u8> {
    sam.split_inclusive(|&b| b == b'\n')
        .filter(|l| !l.starts_with(b"@"))
        .flatten()
        .copied()
        .collect()
}

/// Regions to query: every reference whole, and around the middle record of each.
fn regions(sorted_sam: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(sorted_sam);
    let mut by_ref: Vec<(String, Vec<u64>)> = Vec::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        if f.len() < 4 || f[2] == "*" {
            continue;
        }
        let pos: u64 = f[3].parse().unwrap();
        match by_ref.iter_mut().find(|(n, _)| n == f[2]) {
            Some((_, v)) => v.push(pos),
            None => by_ref.push((f[2].to_string(), vec![pos])),
        }
    }
    let mut out = Vec::new();
    for (name, pos) in by_ref {
        let mid = pos[pos.len() / 2];
        out.push(name.clone());
        out.push(format!(
            "{name}:{}-{}",
            mid.saturating_sub(50).max(1),
            mid + 300
        ));
        out.push(format!("{name}:{}", mid + 1));
        out.push(format!("{name}:{}-{}", mid, mid));
    }
    out
}

/// Loads `file` into a VAS and a region file, then checks every operation.
fn check_against_samtools(file: &Path, scratch: &Path) {
    compare(file, scratch, None).unwrap_or_else(|e| panic!("{e}"));
}

/// Loads `file` into a VAS and a region file, then compares every operation with
/// samtools, with broken variant `broken` of pmlab selected if given; the first
/// difference.
fn compare(file: &Path, scratch: &Path, broken: Option<&str>) -> Result<(), String> {
    let f = file.to_str().unwrap();
    let stem = file
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .replace('.', "_");
    let fresh = tempfile::tempdir_in(scratch).unwrap();
    let reg = fresh.path().join("reg");
    let region_file = fresh.path().join(format!("{stem}.region"));
    let targets: [Vec<String>; 2] = [
        vec![
            "--vas".into(),
            stem.clone(),
            "--dir".into(),
            reg.display().to_string(),
        ],
        vec!["--region".into(), region_file.display().to_string()],
    ];
    let flagstat = samtools(&["flagstat", f]);
    let coord = records_only(samtools(&["sort", "-O", "sam", f]));
    let name = records_only(samtools(&["sort", "-n", "-O", "sam", f]));
    let bam = scratch.join(format!("{stem}.sorted.bam"));
    let bam_s = bam.to_str().unwrap();
    samtools(&["sort", "-o", bam_s, f]);
    samtools(&["index", bam_s]);
    let pm = |args: &[String]| -> Vec<u8> {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pmlab"));
        c.args(args);
        if let Some(b) = broken {
            c.env("PMLAB_SAM_BROKEN", b);
        }
        ok(c.output().expect("run pmlab"), &format!("pmlab {args:?}"))
    };
    for t in &targets {
        let with = |op: &[&'static str]| -> Vec<String> {
            op.iter()
                .map(|s| s.to_string())
                .chain(t.iter().cloned())
                .collect()
        };
        let mut load = with(&["sam", "load", "--no-progress"]);
        load.push(f.to_string());
        pm(&load);
        let got = pm(&with(&["sam", "flagstat"]));
        if got != flagstat {
            return Err(format!(
                "{f} {t:?}: flagstat differs:\n{}\nsamtools:\n{}",
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&flagstat)
            ));
        }
        let got = pm(&with(&["sam", "sort", "-n", "--print"]));
        if got != name {
            return Err(first_difference(f, t, "sort -n", &got, &name));
        }
        let got = pm(&with(&["sam", "sort", "--print"]));
        if got != coord {
            return Err(first_difference(f, t, "sort", &got, &coord));
        }
        pm(&with(&["sam", "index"]));
        for r in regions(&coord) {
            let want = samtools(&["view", bam_s, &r]);
            let mut args = with(&["sam", "view"]);
            args.push(r.clone());
            let got = pm(&args);
            if got != want {
                return Err(first_difference(f, t, &format!("view {r}"), &got, &want));
            }
        }
    }
    // And in one go.
    let got = pm(&["sam".into(), "flagstat".into(), f.into()]);
    if got != flagstat {
        return Err(format!("{f}: flagstat FILE differs"));
    }
    Ok(())
}

/// Where pmlab's output first differs from samtools': line number and both lines.
fn first_difference(f: &str, t: &[String], what: &str, got: &[u8], want: &[u8]) -> String {
    let (g, w) = (String::from_utf8_lossy(got), String::from_utf8_lossy(want));
    let (gl, wl): (Vec<&str>, Vec<&str>) = (g.lines().collect(), w.lines().collect());
    let i = (0..gl.len().max(wl.len()))
        .find(|&i| gl.get(i) != wl.get(i))
        .unwrap_or(0);
    let cut = |l: Option<&&str>| l.map_or("(none)".to_string(), |l| l.chars().take(60).collect());
    format!(
        "{f} {}: {what}: {} lines, samtools {}; line {}: pmlab {:?}, samtools {:?}",
        t[0],
        gl.len(),
        wl.len(),
        i + 1,
        cut(gl.get(i)),
        cut(wl.get(i))
    )
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("pmlab-sam-test")
        .tempdir_in("/dev/shm")
        .unwrap()
}

#[test]
fn real_files_match_samtools() {
    let d = scratch();
    for f in [
        "toy.sam",
        "ce_1000.sam",
        "ex1.bam",
        "ce_5b.bam",
        "fetch_pairs.bam",
    ] {
        check_against_samtools(&data(f), d.path());
    }
}

#[test]
fn generated_set_matches_samtools_as_sam_and_as_bam() {
    let d = scratch();
    let sam = d.path().join("gen.sam");
    let s = sam.to_str().unwrap();
    ok(
        pmlab(&[
            "sam", "generate", "-o", s, "--bytes", "3MiB", "--seed", "11",
        ]),
        "generate",
    );
    check_against_samtools(&sam, d.path());
    let bam = d.path().join("gen.bam");
    samtools(&["view", "-b", "-o", bam.to_str().unwrap(), s]);
    check_against_samtools(&bam, d.path());
}

#[test]
fn the_generator_is_deterministic() {
    let d = scratch();
    let mut outs = Vec::new();
    for (i, seed) in ["5", "5", "6"].iter().enumerate() {
        let p = d.path().join(format!("g{i}.sam"));
        ok(
            pmlab(&[
                "sam",
                "generate",
                "-o",
                p.to_str().unwrap(),
                "--bytes",
                "200KiB",
                "--seed",
                seed,
            ]),
            "generate",
        );
        outs.push(std::fs::read(p).unwrap());
    }
    assert_eq!(outs[0], outs[1]);
    assert_ne!(outs[0], outs[2]);
}

/// Each broken variant of an operation is caught by the comparison with samtools:
/// an unstable coordinate sort, a name sort on plain bytes, an index one record late
/// and a view that stops a base early.
#[test]
fn broken_operations_are_caught_by_the_comparison() {
    let d = scratch();
    let sam = d.path().join("gen.sam");
    let s = sam.to_str().unwrap();
    ok(
        pmlab(&[
            "sam", "generate", "-o", s, "--bytes", "1MiB", "--seed", "11",
        ]),
        "generate",
    );
    for broken in [
        "unstable-sort",
        "name-bytes",
        "index-late",
        "view-end-early",
    ] {
        let mut caught = None;
        for f in [data("ex1.bam"), sam.clone()] {
            if let Err(e) = compare(&f, d.path(), Some(broken)) {
                caught = Some(e);
                break;
            }
        }
        let e = caught.unwrap_or_else(|| panic!("broken variant {broken} was not caught"));
        eprintln!("{broken} caught: {e}");
    }
}

/// Figures 11 and 12 on a tiny set: every operation timed in all four systems (their
/// outputs checked equal first, by the bench itself), every file written, and an
/// operation this short timed often enough for a stable median.
#[test]
fn the_bench_runs_every_operation_on_a_small_set() {
    let tmp = scratch();
    let out = tmp.path().join("out");
    let scratch_dir = tmp.path().display().to_string();
    let o = pmlab(&[
        "sam",
        "bench",
        "--bytes",
        "256KiB",
        "--reps",
        "1",
        "--no-progress",
        "--scratch",
        &scratch_dir,
        "--out",
        &out.display().to_string(),
    ]);
    let text = String::from_utf8_lossy(&ok(o, "pmlab sam bench")).to_string();
    assert!(text.contains("Figures 11 and 12"), "{text}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("sam.json")).unwrap()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let ops: Vec<&str> = rows.iter().map(|r| r["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["flagstat", "sort -n", "sort", "index", "view"]);
    for r in rows {
        for k in ["vas_s", "mmap_s", "samtools_bam_s"] {
            assert!(r[k].as_f64().is_some_and(|s| s > 0.0), "{k} in {r}");
        }
        // Every operation on 256 KiB is short: 21 repetitions, not the 1 asked.
        assert_eq!(r["reps"], 21, "{r}");
    }
    for f in ["fig11.csv", "fig11.svg", "fig12.svg"] {
        assert!(out.join(f).exists(), "{f} not written");
    }
}

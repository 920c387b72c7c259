//! `pmlab sam` on bad input: a malformed SAM record names its line and field, a
//! truncated BAM is an error, a file or segment of another format is refused; every
//! one exits non-zero and loses nothing already stored.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn pmlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pmlab"))
        .args(args)
        .output()
        .expect("pmlab runs")
}

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fails(o: Output, needles: &[&str]) {
    assert!(
        !o.status.success(),
        "should fail: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!e.contains("panicked"), "{e}");
    for n in needles {
        assert!(e.contains(n), "{e:?} lacks {n:?}");
    }
}

const HEADER: &str = "@HD\tVN:1.6\n@SQ\tSN:chr1\tLN:1000\n";
const GOOD: &str = "r1\t99\tchr1\t10\t60\t5M\t=\t50\t45\tACGTA\tIIIII\tNM:i:0\n";

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("pmlab-sam-bad")
        .tempdir_in("/dev/shm")
        .unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn malformed_records_name_line_and_field() {
    let d = scratch();
    let cases = [
        (
            "r2\tabc\tchr1\t10\t60\t5M\t=\t50\t45\tACGTA\tIIIII\n",
            "FLAG",
        ),
        ("r2\t0\tchrX\t10\t60\t5M\t*\t0\t0\tACGTA\tIIIII\n", "RNAME"),
        ("r2\t0\tchr1\tten\t60\t5M\t*\t0\t0\tACGTA\tIIIII\n", "POS"),
        ("r2\t0\tchr1\t10\t999\t5M\t*\t0\t0\tACGTA\tIIIII\n", "MAPQ"),
        ("r2\t0\tchr1\t10\t60\t5Q\t*\t0\t0\tACGTA\tIIIII\n", "CIGAR"),
        ("r2\t0\tchr1\t10\t60\t7M\t*\t0\t0\tACGTA\tIIIII\n", "CIGAR"),
        ("r2\t0\tchr1\t10\t60\t5M\t*\t0\tx\tACGTA\tIIIII\n", "TLEN"),
        (
            "r2\t0\tchr1\t10\t60\t5M\tchrY\t5\t0\tACGTA\tIIIII\n",
            "RNEXT",
        ),
        ("r2\t0\tchr1\t10\t60\t5M\t=\tx\t0\tACGTA\tIIIII\n", "PNEXT"),
        ("r2\t0\tchr1\t10\t60\t5M\t*\t0\t0\tACGTA\tIII\n", "QUAL"),
        (
            "r2\t0\tchr1\t10\t60\t5M\t*\t0\t0\tACGTA\tIIIII\tNM:q:1\n",
            "TAG",
        ),
        ("r2\t0\tchr1\t10\t60\t5M\n", "RNEXT"),
    ];
    for (i, (bad, field)) in cases.iter().enumerate() {
        let f = write(
            d.path(),
            &format!("bad{i}.sam"),
            &format!("{HEADER}{GOOD}{bad}{GOOD}"),
        );
        let fs = f.to_str().unwrap();
        let want = format!("line 4: field {field}");
        fails(pmlab(&["sam", "flagstat", fs]), &[&want, fs]);
        let reg = d.path().join("reg");
        let r = reg.to_str().unwrap();
        fails(
            pmlab(&[
                "sam",
                "load",
                fs,
                "--vas",
                "bad",
                "--dir",
                r,
                "--no-progress",
            ]),
            &[&want],
        );
        // Nothing half-loaded is left behind.
        fails(
            pmlab(&["sam", "flagstat", "--vas", "bad", "--dir", r]),
            &["bad"],
        );
        let rf = d.path().join(format!("bad{i}.region"));
        fails(
            pmlab(&[
                "sam",
                "load",
                fs,
                "--region",
                rf.to_str().unwrap(),
                "--no-progress",
            ]),
            &[&want],
        );
        assert!(
            std::fs::read_dir(d.path())
                .unwrap()
                .all(|e| { !e.unwrap().file_name().to_string_lossy().contains(".region") })
        );
    }
}

#[test]
fn a_failed_load_leaves_what_is_stored() {
    let d = scratch();
    let reg = d.path().join("reg");
    let r = reg.to_str().unwrap();
    let good = write(d.path(), "good.sam", &format!("{HEADER}{GOOD}{GOOD}"));
    let bad = write(d.path(), "bad.sam", &format!("{HEADER}{GOOD}r\t1\n"));
    ok(pmlab(&[
        "sam",
        "load",
        good.to_str().unwrap(),
        "--vas",
        "keep",
        "--dir",
        r,
        "--no-progress",
    ]));
    let before = ok(pmlab(&["sam", "flagstat", "--vas", "keep", "--dir", r]));
    assert!(before.starts_with("2 + 0 in total"), "{before}");
    // Same name: refused, the stored alignments untouched.
    fails(
        pmlab(&[
            "sam",
            "load",
            bad.to_str().unwrap(),
            "--vas",
            "keep",
            "--dir",
            r,
            "--no-progress",
        ]),
        &["keep"],
    );
    assert_eq!(
        ok(pmlab(&["sam", "flagstat", "--vas", "keep", "--dir", r])),
        before
    );
    // Operations in the wrong order are errors that change nothing.
    fails(
        pmlab(&["sam", "view", "--vas", "keep", "--dir", r, "chr1"]),
        &["index"],
    );
    fails(
        pmlab(&["sam", "index", "--vas", "keep", "--dir", r]),
        &["sort"],
    );
    ok(pmlab(&["sam", "sort", "--vas", "keep", "--dir", r]));
    ok(pmlab(&["sam", "index", "--vas", "keep", "--dir", r]));
    fails(
        pmlab(&["sam", "view", "--vas", "keep", "--dir", r, "chr9:1-5"]),
        &["chr9", "no such reference"],
    );
    fails(
        pmlab(&["sam", "view", "--vas", "keep", "--dir", r, "chr1:50-10"]),
        &["ends before"],
    );
    assert_eq!(
        ok(pmlab(&[
            "sam",
            "view",
            "-c",
            "--vas",
            "keep",
            "--dir",
            r,
            "chr1:1-12"
        ])),
        "2\n"
    );
    assert_eq!(
        ok(pmlab(&["sam", "flagstat", "--vas", "keep", "--dir", r])),
        before
    );
}

#[test]
fn a_truncated_bam_is_an_error() {
    let d = scratch();
    let bam = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sam/ex1.bam"))
        .unwrap();
    for cut in [10, bam.len() / 2, bam.len() - 30] {
        let f = d.path().join(format!("cut{cut}.bam"));
        std::fs::write(&f, &bam[..cut]).unwrap();
        let fs = f.to_str().unwrap();
        fails(
            pmlab(&["sam", "flagstat", fs]),
            &["truncated or damaged BAM", fs],
        );
        let rf = d.path().join("t.region");
        fails(
            pmlab(&[
                "sam",
                "load",
                fs,
                "--region",
                rf.to_str().unwrap(),
                "--no-progress",
            ]),
            &["truncated"],
        );
        assert!(!rf.exists());
    }
}

#[test]
fn files_of_another_format_are_refused() {
    let d = scratch();
    let junk = write(d.path(), "junk.region", &"x".repeat(8192));
    fails(
        pmlab(&["sam", "flagstat", "--region", junk.to_str().unwrap()]),
        &["does not hold loaded alignments"],
    );
    let tiny = write(d.path(), "tiny.region", "PMLSAM01");
    fails(
        pmlab(&["sam", "sort", "--region", tiny.to_str().unwrap()]),
        &["too small"],
    );
    // A VAS segment made by someone else (zeros) is refused too.
    let reg = d.path().join("reg");
    let r = reg.to_str().unwrap();
    ok(pmlab(&["vas", "--dir", r, "create", "vas", "other"]));
    ok(pmlab(&[
        "vas", "--dir", r, "create", "seg", "other", "--size", "1MiB",
    ]));
    ok(pmlab(&["vas", "--dir", r, "attach", "other", "other"]));
    fails(
        pmlab(&["sam", "flagstat", "--vas", "other", "--dir", r]),
        &["does not hold loaded alignments"],
    );
    fails(
        pmlab(&["sam", "flagstat", "--vas", "missing", "--dir", r]),
        &["missing"],
    );
}

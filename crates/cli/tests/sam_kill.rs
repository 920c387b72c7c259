//! Kill tests of `pmlab sam`: `load` and each operation's publish are stopped by
//! SIGKILL at their k-th crash point (`PMLAB_SAM_KILL_AT`, every store the process makes
//! to the structure), for the first and last points and points drawn with xoshiro256++
//! (seed 17) in between. Afterwards `pmlab sam check` must find either the old
//! published result or the new one, in full (the checker recomputes every published
//! result from the records), never a torn one; and the operation run again must
//! work and print what it prints undisturbed.
//!
//! The broken variant `publish-first` (the root names a result before its contents
//! are written) must be caught for every operation.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/sam")
        .join(name)
}

fn pmlab(args: &[String], env: &[(&str, String)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pmlab"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run pmlab")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One operation to stop: what runs before it, and the operation.
struct Case {
    name: &'static str,
    before: &'static [&'static [&'static str]],
    op: &'static [&'static str],
}

const LOAD: &[&str] = &["load", "--no-progress", "@FILE"];

const CASES: [Case; 6] = [
    Case {
        name: "load",
        before: &[],
        op: LOAD,
    },
    Case {
        name: "sort",
        before: &[LOAD],
        op: &["sort"],
    },
    Case {
        name: "sort -n over an older order",
        before: &[LOAD, &["sort", "-n"]],
        op: &["sort", "-n"],
    },
    Case {
        name: "index",
        before: &[LOAD, &["sort"]],
        op: &["index"],
    },
    Case {
        name: "flagstat",
        before: &[LOAD],
        op: &["flagstat"],
    },
    Case {
        name: "view over an older view",
        before: &[LOAD, &["sort"], &["index"], &["view", "chr1:1-2000000"]],
        op: &["view", "chr2:100-3000000"],
    },
];

/// A scratch registry and the arguments that name VAS `s` in it.
struct Place {
    _dir: tempfile::TempDir,
    reg: PathBuf,
    file: PathBuf,
}

impl Place {
    fn new(file: &Path) -> Place {
        let d = tempfile::Builder::new()
            .prefix("pmlab-sam-kill")
            .tempdir_in("/dev/shm")
            .unwrap();
        Place {
            reg: d.path().join("reg"),
            _dir: d,
            file: file.to_path_buf(),
        }
    }

    fn args(&self, op: &[&str]) -> Vec<String> {
        let mut a = vec!["sam".to_string()];
        for s in op {
            a.push(if *s == "@FILE" {
                self.file.display().to_string()
            } else {
                s.to_string()
            });
        }
        a.extend(["--vas", "s", "--dir"].map(String::from));
        a.push(self.reg.display().to_string());
        a
    }

    fn run(&self, op: &[&str], env: &[(&str, String)]) -> Output {
        pmlab(&self.args(op), env)
    }

    /// `pmlab sam check`: `Ok(summary)` or `Err(message)` (never a crash).
    fn check(&self) -> Result<String, String> {
        let o = self.run(&["check"], &[]);
        match o.status.code() {
            Some(0) => Ok(text(&o.stdout)),
            Some(1) => Err(text(&o.stderr)),
            _ => panic!("check crashed: {:?} {}", o.status, text(&o.stderr)),
        }
    }

    fn prepare(&self, case: &Case) {
        for op in case.before {
            let o = self.run(op, &[]);
            assert!(o.status.success(), "{op:?}: {}", text(&o.stderr));
        }
    }
}

/// Whether `check`'s error says that no structure is there (a load that did not
/// finish, or parts not made yet), rather than that one is damaged.
fn absent(e: &str) -> bool {
    !e.contains(": field ")
}

/// What an undisturbed run shows: the state before and after, the output, the points.
struct Reference {
    old: Result<String, String>,
    new: String,
    out: Vec<u8>,
    points: u64,
}

fn reference(case: &Case, file: &Path) -> Reference {
    let p = Place::new(file);
    p.prepare(case);
    let old = p.check();
    let env = [("PMLAB_SAM_CRASH_POINTS", "report".to_string())];
    let o = p.run(case.op, &env);
    assert!(o.status.success(), "{}: {}", case.name, text(&o.stderr));
    let err = text(&o.stderr);
    let points = err
        .lines()
        .find_map(|l| l.strip_prefix("pmlab-sam-crash-points "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the crash point count");
    let new = p.check().expect("check after an undisturbed run");
    Reference {
        old,
        new,
        out: o.stdout,
        points,
    }
}

/// The crash points to stop at: the first and last few, and seeded ones between.
fn points(n: u64, rng: &mut Xoshiro256PlusPlus) -> Vec<u64> {
    let mut ks: Vec<u64> = (1..=n.min(5))
        .chain(n.saturating_sub(4).max(1)..=n)
        .collect();
    for _ in 0..20 {
        ks.push(rng.gen_range(1..=n));
    }
    ks.sort_unstable();
    ks.dedup();
    ks
}

/// Stops `case` at each point; the first violation, if any.
fn explore(case: &Case, file: &Path, broken: Option<&str>) -> Result<usize, String> {
    let want = reference(case, file);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
    let ks = points(want.points, &mut rng);
    for &k in &ks {
        let p = Place::new(file);
        p.prepare(case);
        let mut env = vec![("PMLAB_SAM_KILL_AT", k.to_string())];
        if let Some(b) = broken {
            env.push(("PMLAB_SAM_BROKEN", b.to_string()));
        }
        let o = p.run(case.op, &env);
        if k <= want.points {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                o.status.signal(),
                Some(9),
                "{} k={k}: not killed",
                case.name
            );
        }
        let found = p.check();
        let old_ok = match (&found, &want.old) {
            (Ok(a), Ok(b)) => a == b,
            // No structure before (a load): refused as unfinished, or not there.
            (Err(e), Err(_)) => absent(e),
            _ => false,
        };
        let new_ok = found.as_ref().is_ok_and(|s| *s == want.new);
        if !old_ok && !new_ok {
            return Err(format!(
                "{} killed at point {k} of {}: found {:?}; old {:?}; new {:?}",
                case.name, want.points, found, want.old, want.new
            ));
        }
        let again = p.run(case.op, &[]);
        if case.op == LOAD && new_ok {
            // The load had finished: loading again is refused, nothing changes.
            if again.status.success() || !text(&again.stderr).contains("exists already") {
                return Err(format!(
                    "{} killed at point {k}: a second load was not refused",
                    case.name
                ));
            }
        } else if !again.status.success() || again.stdout != want.out {
            return Err(format!(
                "{} killed at point {k}: running it again: {:?} {}",
                case.name,
                again.status,
                text(&again.stderr)
            ));
        }
        if p.check().as_ref() != Ok(&want.new) {
            return Err(format!(
                "{} killed at point {k}: wrong after the rerun",
                case.name
            ));
        }
    }
    Ok(ks.len())
}

/// A generated SAM set of `bytes` (`pmlab sam generate`, seed `seed`) in a new
/// temporary directory (returned to keep it alive).
fn generated(bytes: &str, seed: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("g.sam");
    let seed = seed.to_string();
    let o = pmlab(
        &[
            "sam",
            "generate",
            "-o",
            file.to_str().unwrap(),
            "--bytes",
            bytes,
            "--seed",
            seed.as_str(),
        ]
        .map(String::from),
        &[],
    );
    assert!(o.status.success());
    (dir, file)
}

#[test]
fn killed_loads_and_operations_leave_old_or_new_results() {
    let file = data("ce_1000.sam");
    let (_gen_dir, small) = generated("400KiB", 3);
    for case in &CASES {
        // The generated set has chr1 and chr2 for the views; ce_1000 for the rest.
        let f = if case.name.starts_with("view") || case.name == "index" {
            &small
        } else {
            &file
        };
        let n = explore(case, f, None).unwrap_or_else(|e| panic!("{e}"));
        eprintln!("{}: {n} kill points, each old or new", case.name);
    }
}

#[test]
fn publishing_before_writing_is_caught() {
    let (_gen_dir, small) = generated("400KiB", 3);
    for case in &CASES {
        match explore(case, &small, Some("publish-first")) {
            Ok(n) => panic!("{}: publish-first survived {n} kills", case.name),
            Err(e) => eprintln!("caught: {e}"),
        }
    }
}

/// Kills at random times instead of at crash points: `load` and `sort` of a larger
/// set are SIGKILLed after a delay drawn with xoshiro256++ (seed 17) from zero to the
/// undisturbed run's time; the same old-or-new rule and a working rerun.
#[test]
fn loads_and_sorts_killed_at_random_times_leave_old_or_new() {
    let (_gen_dir, set) = generated("4MiB", 5);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
    for case in [&CASES[0], &CASES[1]] {
        let t = std::time::Instant::now();
        let want = reference(case, &set);
        let span = t.elapsed().as_micros() as u64 / 2;
        let mut outcomes = [0u32; 2];
        for _ in 0..8 {
            let p = Place::new(&set);
            p.prepare(case);
            let mut child = Command::new(env!("CARGO_BIN_EXE_pmlab"))
                .args(p.args(case.op))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_micros(rng.gen_range(0..=span)));
            let _ = child.kill();
            let _ = child.wait();
            let found = p.check();
            let new_ok = found.as_ref().is_ok_and(|s| *s == want.new);
            let old_ok = match (&found, &want.old) {
                (Ok(a), Ok(b)) => a == b,
                (Err(e), Err(_)) => absent(e),
                _ => false,
            };
            assert!(
                old_ok || new_ok,
                "{}: found {found:?}, old {:?}, new {:?}",
                case.name,
                want.old,
                want.new
            );
            outcomes[usize::from(new_ok)] += 1;
            let again = p.run(case.op, &[]);
            if !(case.op == LOAD && new_ok) {
                assert!(
                    again.status.success(),
                    "{}: {}",
                    case.name,
                    text(&again.stderr)
                );
            }
            assert_eq!(p.check().as_ref(), Ok(&want.new), "{}", case.name);
        }
        eprintln!(
            "{}: {} kills found the old state, {} the new",
            case.name, outcomes[0], outcomes[1]
        );
    }
}

//! Figures 11 and 12: SAMtools on SAM and on BAM files (on tmpfs, as the paper), the
//! VAS version and the mmap version of the same operations, per operation.
//!
//! Every figure is the wall time of a whole process (`samtools ...` or `pmlab sam
//! ...`), median over repetitions, all measured in one run on one data set: the
//! seeded generated alignments (xoshiro256++), converted to BAM by samtools itself.
//! Before timing, the outputs are checked: flagstat text identical to samtools',
//! view counts equal.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use indicatif::ProgressBar;
use serde::Serialize;

use super::SpaceJmpError;

/// What to run.
#[derive(Clone, Debug)]
pub struct SamConfig {
    /// Bytes of generated SAM (the paper: 3.1 GiB; the full run: 1 GiB).
    pub sam_bytes: u64,
    /// Timed repetitions per operation (median reported).
    pub reps: usize,
    /// A tmpfs directory for the files, the registry and the region file.
    pub scratch: PathBuf,
    /// The `pmlab` binary that runs the VAS and mmap versions.
    pub pmlab: PathBuf,
    /// Data-set seed.
    pub seed: u64,
    /// Region queried by `view`.
    pub region: String,
    /// Show progress.
    pub progress: bool,
}

/// One operation's medians (seconds); `None` where samtools cannot run it on that
/// format (plain SAM cannot be indexed, so neither indexed nor region-queried).
#[derive(Clone, Debug, Serialize)]
pub struct SamRow {
    /// `flagstat`, `sort`, `sort -n`, `index`, `view`.
    pub op: String,
    /// samtools on the SAM file.
    pub samtools_sam_s: Option<f64>,
    /// samtools on the BAM file.
    pub samtools_bam_s: Option<f64>,
    /// pmlab in a VAS (pointers): inside the process, from before attaching the VAS
    /// to the result stored and printed (the paper stops timers before process exit).
    pub vas_s: f64,
    /// pmlab over an mmap'ed region file (offsets), measured the same way.
    pub mmap_s: f64,
    /// The VAS version's whole process (exec to exit, unmapping included).
    pub vas_process_s: f64,
    /// The mmap version's whole process.
    pub mmap_process_s: f64,
    /// Timed repetitions of this operation per system (more than asked for a short
    /// one: see [`SHORT_OP_S`]).
    pub reps: usize,
}

/// An operation whose slowest system finishes in less than this is timed
/// [`SHORT_OP_REPS`] times at least: at a few milliseconds, one interrupted run or
/// a cold cache line moves a median of three by tens of percent, while the whole
/// series still costs well under a second.
pub const SHORT_OP_S: f64 = 0.1;

/// The repetitions a short operation gets at least.
pub const SHORT_OP_REPS: usize = 21;

/// The whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct SamBench {
    /// Per operation.
    pub rows: Vec<SamRow>,
    /// SAM bytes.
    pub sam_bytes: u64,
    /// BAM bytes.
    pub bam_bytes: u64,
    /// Records.
    pub records: u64,
    /// Loading the SAM file into the VAS (once; samtools has no such step).
    pub load_vas_s: f64,
    /// Loading it into the region file.
    pub load_mmap_s: f64,
    /// `samtools --version`'s first line.
    pub samtools: String,
    /// Repetitions.
    pub reps: usize,
    /// Seed.
    pub seed: u64,
    /// Load average at the start and at the end (the machine is shared).
    pub loadavg: (String, String),
}

fn io(what: &str) -> impl Fn(std::io::Error) -> SpaceJmpError + '_ {
    move |source| SpaceJmpError::Io {
        what: what.to_string(),
        source,
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Runs `argv` to completion, stdout to `out` (or discarded): its wall time and
/// captured stdout.
fn timed(argv: &[String], capture: bool) -> Result<(f64, Vec<u8>), SpaceJmpError> {
    timed_err(argv, capture).map(|(s, out, _)| (s, out))
}

/// As [`timed`], with the process's stderr.
fn timed_err(argv: &[String], capture: bool) -> Result<(f64, Vec<u8>, String), SpaceJmpError> {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..])
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    c.stdout(if capture {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let t = Instant::now();
    let out = c.output().map_err(io(&argv[0]))?;
    let s = t.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(SpaceJmpError::Wrong(format!(
            "`{}` failed ({}): {}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok((
        s,
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// The in-process time `pmlab sam --timing` reports (reaching the structure + work).
fn in_process(stderr: &str) -> Option<f64> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("pmlab-sam-timing "))?;
    let mut total = 0.0;
    for kv in line.split_whitespace().skip(1) {
        total += kv.split_once('=')?.1.parse::<f64>().ok()?;
    }
    Some(total)
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The four systems' command lines for one operation.
struct OpCmds {
    name: &'static str,
    sam: Option<Vec<String>>,
    bam: Option<Vec<String>>,
    vas: Vec<String>,
    mmap: Vec<String>,
}

fn op_cmds(d: &Path, pmlab: &str, region: &str) -> Vec<OpCmds> {
    let p = |f: &str| d.join(f).display().to_string();
    let (sam, bam, sorted, tmp) = (p("g.sam"), p("g.bam"), p("gs.bam"), p("sorttmp"));
    let reg = p("reg");
    let vas = |op: &[&str]| {
        let mut v = argv(&[pmlab, "sam", "--timing"]);
        v.extend(argv(op));
        v.extend(argv(&["--vas", "bench", "--dir", &reg]));
        v
    };
    let mmap = |op: &[&str]| {
        let mut v = argv(&[pmlab, "sam", "--timing"]);
        v.extend(argv(op));
        v.extend(argv(&["--region", &p("g.region")]));
        v
    };
    let (osam, obam) = (p("out.sam"), p("out.bam"));
    let sort = |n: bool, fmt: &str, out: &str, input: &str| {
        let mut v = argv(&["samtools", "sort", "-T", &tmp, "-O", fmt, "-o", out]);
        if n {
            v.push("-n".into());
        }
        v.push(input.into());
        v
    };
    vec![
        OpCmds {
            name: "flagstat",
            sam: Some(argv(&["samtools", "flagstat", &sam])),
            bam: Some(argv(&["samtools", "flagstat", &bam])),
            vas: vas(&["flagstat"]),
            mmap: mmap(&["flagstat"]),
        },
        OpCmds {
            name: "sort -n",
            sam: Some(sort(true, "sam", &osam, &sam)),
            bam: Some(sort(true, "bam", &obam, &bam)),
            vas: vas(&["sort", "-n"]),
            mmap: mmap(&["sort", "-n"]),
        },
        OpCmds {
            name: "sort",
            sam: Some(sort(false, "sam", &osam, &sam)),
            bam: Some(sort(false, "bam", &obam, &bam)),
            vas: vas(&["sort"]),
            mmap: mmap(&["sort"]),
        },
        OpCmds {
            name: "index",
            sam: None,
            bam: Some(argv(&["samtools", "index", &sorted])),
            vas: vas(&["index"]),
            mmap: mmap(&["index"]),
        },
        OpCmds {
            name: "view",
            sam: None,
            bam: Some(argv(&["samtools", "view", &sorted, region])),
            vas: vas(&["view", region]),
            mmap: mmap(&["view", region]),
        },
    ]
}

/// Makes the data set and the peers' files, and loads both versions.
fn prepare(cfg: &SamConfig, d: &Path, b: &ProgressBar) -> Result<(u64, f64, f64), SpaceJmpError> {
    b.set_message("generating SAM");
    let f = std::fs::File::create(d.join("g.sam")).map_err(io("create g.sam"))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let g = pmlab_samjmp::generate::generate(&mut w, cfg.sam_bytes, cfg.seed)
        .map_err(io("generate"))?;
    std::io::Write::flush(&mut w).map_err(io("generate"))?;
    drop(w);
    let p = |f: &str| d.join(f).display().to_string();
    b.set_message("samtools: SAM -> BAM, sorted BAM");
    timed(
        &argv(&["samtools", "view", "-b", "-o", &p("g.bam"), &p("g.sam")]),
        false,
    )?;
    let tmp = p("sorttmp");
    timed(
        &argv(&[
            "samtools",
            "sort",
            "-T",
            &tmp,
            "-o",
            &p("gs.bam"),
            &p("g.bam"),
        ]),
        false,
    )?;
    let pm = cfg.pmlab.display().to_string();
    b.set_message("loading the VAS and the region file");
    let (load_vas, _) = timed(
        &argv(&[
            &pm,
            "sam",
            "load",
            &p("g.sam"),
            "--no-progress",
            "--vas",
            "bench",
            "--dir",
            &p("reg"),
        ]),
        false,
    )?;
    let (load_mmap, _) = timed(
        &argv(&[
            &pm,
            "sam",
            "load",
            &p("g.sam"),
            "--no-progress",
            "--region",
            &p("g.region"),
        ]),
        false,
    )?;
    Ok((g.records, load_vas, load_mmap))
}

/// The first run of each system, outputs compared: flagstat and view must print
/// exactly what samtools prints.
fn check_outputs(op: &OpCmds, outs: &[(String, Vec<u8>)]) -> Result<(), SpaceJmpError> {
    if !matches!(op.name, "flagstat" | "view") {
        return Ok(());
    }
    let (ref_name, reference) = &outs[0];
    for (name, out) in &outs[1..] {
        if out != reference {
            return Err(SpaceJmpError::Wrong(format!(
                "{}: {name} printed something else than {ref_name} ({} vs {} bytes)",
                op.name,
                out.len(),
                reference.len()
            )));
        }
    }
    Ok(())
}

fn time_op(op: &OpCmds, reps: usize, b: &ProgressBar) -> Result<SamRow, SpaceJmpError> {
    let systems: Vec<(&str, &Vec<String>)> = [
        ("samtools SAM", op.sam.as_ref()),
        ("samtools BAM", op.bam.as_ref()),
        ("VAS", Some(&op.vas)),
        ("mmap", Some(&op.mmap)),
    ]
    .into_iter()
    .filter_map(|(n, c)| c.map(|c| (n, c)))
    .collect();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); systems.len()];
    let mut inner: Vec<Vec<f64>> = vec![Vec::new(); systems.len()];
    // The bar counts the repetitions asked for; a short operation's extra ones are
    // over in well under a second.
    let asked = reps;
    let mut reps = reps;
    let mut rep = 0;
    while rep < reps {
        let mut outs = Vec::new();
        // Interleaved, so that a change in the machine's load hits every system.
        for (i, (name, cmd)) in systems.iter().enumerate() {
            b.set_message(format!("{} {name} ({}/{reps})", op.name, rep + 1));
            let (s, out, err) = timed_err(cmd, rep == 0)?;
            times[i].push(s);
            if let Some(t) = in_process(&err) {
                inner[i].push(t);
            }
            outs.push((name.to_string(), out));
        }
        if rep == 0 {
            check_outputs(op, &outs)?;
            let slowest = times
                .iter()
                .filter_map(|t| t.first().copied())
                .fold(0.0, f64::max);
            if slowest < SHORT_OP_S {
                reps = reps.max(SHORT_OP_REPS);
            }
        }
        if rep < asked {
            b.inc(1);
        }
        rep += 1;
    }
    let med = |name: &str| {
        systems
            .iter()
            .position(|(n, _)| *n == name)
            .map(|i| median(times[i].clone()))
    };
    let inner_med = |name: &str| -> Result<f64, SpaceJmpError> {
        let i = systems.iter().position(|(n, _)| *n == name).expect("run");
        if inner[i].len() != reps {
            return Err(SpaceJmpError::Wrong(format!(
                "{} {name}: no `pmlab-sam-timing` line on stderr",
                op.name
            )));
        }
        Ok(median(inner[i].clone()))
    };
    Ok(SamRow {
        op: op.name.to_string(),
        samtools_sam_s: med("samtools SAM"),
        samtools_bam_s: med("samtools BAM"),
        vas_s: inner_med("VAS")?,
        mmap_s: inner_med("mmap")?,
        vas_process_s: med("VAS").expect("always run"),
        mmap_process_s: med("mmap").expect("always run"),
        reps,
    })
}

/// Runs Figures 11 and 12.
pub fn run(cfg: &SamConfig) -> Result<SamBench, SpaceJmpError> {
    let start_load = loadavg();
    let (_, ver) = timed(&argv(&["samtools", "--version"]), true).map_err(|e| {
        SpaceJmpError::Wrong(format!("samtools is needed for Figures 11 and 12: {e}"))
    })?;
    let version = String::from_utf8_lossy(&ver)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let dir = tempfile::Builder::new()
        .prefix("pmlab-sam")
        .tempdir_in(&cfg.scratch)
        .map_err(io("scratch"))?;
    let d = dir.path();
    let b = if cfg.progress {
        ProgressBar::new(5 * cfg.reps as u64)
    } else {
        ProgressBar::hidden()
    };
    let (records, load_vas_s, load_mmap_s) = prepare(cfg, d, &b)?;
    let pm = cfg.pmlab.display().to_string();
    let mut rows = Vec::new();
    for op in op_cmds(d, &pm, &cfg.region) {
        rows.push(time_op(&op, cfg.reps, &b)?);
    }
    b.finish_and_clear();
    let size = |f: &str| std::fs::metadata(d.join(f)).map(|m| m.len()).unwrap_or(0);
    Ok(SamBench {
        rows,
        sam_bytes: size("g.sam"),
        bam_bytes: size("g.bam"),
        records,
        load_vas_s,
        load_mmap_s,
        samtools: version,
        reps: cfg.reps,
        seed: cfg.seed,
        loadavg: (start_load, loadavg()),
    })
}

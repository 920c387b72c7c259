//! `pmlab bench`: simulator throughput (references per second), from pmlab's binary
//! trace format and from din text, side by side with Dinero IV when its binary is given.

use anyhow::Context;
use pmlab_cache::HierarchyConfig;
use pmlab_cache::bench::{self, Workload};
use pmlab_trace::Format;
use std::path::{Path, PathBuf};

/// Arguments of `pmlab bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Trace to run (any format and compression the trace crate reads); it is converted
    /// to din text and to pmlab's binary format (uncompressed) in /dev/shm (or the
    /// temporary directory) first. Default: the trace the binary carries, 4,000,000
    /// references of GNU sort (the Dinero IV validation slice, data/validation/dinero).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Use only the first N references of the trace.
    #[arg(long)]
    limit: Option<usize>,
    /// Path of a Dinero IV binary (`dineroIV`) to time on the same trace and configurations.
    #[arg(long)]
    dinero: Option<PathBuf>,
    /// Repetitions of each measurement; the median is reported.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Where to write the results as JSON.
    #[arg(long, default_value = "bench-cache.json")]
    json: PathBuf,
    /// Seed of the random replacement generator (xoshiro256++).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// One benchmark case: what pmlab runs and the Dinero IV runs that do the same work.
struct Case {
    name: &'static str,
    what: &'static str,
    work: Workload<'static>,
    dinero_configs: Vec<HierarchyConfig>,
}

fn leak<T>(x: T) -> &'static T {
    Box::leak(Box::new(x))
}

fn cases() -> Vec<Case> {
    let dm = leak(bench::dm32k());
    let kh = leak(bench::kh_hierarchy());
    let l1 = leak(bench::kh_level1());
    let l2s: &'static [HierarchyConfig] = Box::leak(bench::kh_table1_level2s().into_boxed_slice());
    let nine: &'static [HierarchyConfig] =
        Box::leak(bench::kh_table1_hierarchies().into_boxed_slice());
    let mut v = vec![
        Case {
            name: "dm32k",
            what: "one 32 KiB direct-mapped cache, 32 B blocks",
            work: Workload::One(dm),
            dinero_configs: vec![dm.clone()],
        },
        Case {
            name: "kh-l1-l2",
            what: "split 32 KiB DM L1s (32 B) + 1 MiB DM L2 (128 B, random)",
            work: Workload::One(kh),
            dinero_configs: vec![kh.clone()],
        },
        Case {
            name: "kh-nine-one-pass",
            what: "the L1s once, feeding the nine L2s of Kessler & Hill Table 1",
            work: Workload::OnePass(l1, l2s),
            dinero_configs: nine.to_vec(),
        },
    ];
    for (i, h) in nine.iter().enumerate() {
        v.push(Case {
            name: [
                "kh-nine-separate-1",
                "kh-nine-separate-2",
                "kh-nine-separate-3",
                "kh-nine-separate-4",
                "kh-nine-separate-5",
                "kh-nine-separate-6",
                "kh-nine-separate-7",
                "kh-nine-separate-8",
                "kh-nine-separate-9",
            ][i],
            what: "one of the nine hierarchies, a pass of its own",
            work: Workload::One(h),
            dinero_configs: Vec::new(),
        });
    }
    v
}

/// One line of the results: rates by clock (\[0\] elapsed, \[1\] processor time) and format
/// (\[0\] binary, \[1\] din), and Dinero IV's rate by clock.
struct Row {
    name: String,
    what: String,
    rate: [[f64; 2]; 2],
    dinero: Option<[f64; 2]>,
}

/// The medians of the elapsed and of the processor times, in seconds.
fn median_secs(timings: &[bench::Timing]) -> [f64; 2] {
    let mut wall: Vec<f64> = timings.iter().map(|t| t.wall.as_secs_f64()).collect();
    let mut cpu: Vec<f64> = timings.iter().map(|t| t.cpu.as_secs_f64()).collect();
    [bench::median(&mut wall), bench::median(&mut cpu)]
}

/// Converts the trace to din text and binary in `dir`; returns the reference count.
/// The trace `pmlab bench` runs when none is named, carried in the binary so that an
/// installed `pmlab` needs no file beside it.
const BUILTIN_TRACE: &[u8] =
    include_bytes!("../../../../data/validation/dinero/traces/sort.din.xz");
/// How the built-in trace is named in the report.
const BUILTIN_NAME: &str = "built-in sort.din.xz (GNU sort, 4,000,000 references)";

/// The trace to run: `--trace`, or the built-in one written into `dir`.
fn trace_path(args: &Args, dir: &Path) -> anyhow::Result<PathBuf> {
    match &args.trace {
        Some(t) => Ok(t.clone()),
        None => {
            let path = dir.join("builtin.din.xz");
            std::fs::write(&path, BUILTIN_TRACE)
                .with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        }
    }
}

/// How the report names the trace.
fn trace_name(args: &Args) -> String {
    args.trace
        .as_ref()
        .map_or_else(|| BUILTIN_NAME.to_string(), |t| t.display().to_string())
}

fn prepare(trace: &Path, limit: Option<usize>, dir: &Path) -> anyhow::Result<u64> {
    let mut src = pmlab_trace::open_trace(&trace.to_string_lossy(), None)?;
    let mut refs = pmlab_trace::read_all(&mut *src)?;
    refs.truncate(limit.unwrap_or(usize::MAX));
    for (name, format) in [
        ("trace.din", Format::DinExtended),
        ("trace.bin", Format::Binary),
    ] {
        let path = dir.join(name);
        let mut w = pmlab_trace::create_trace_writer(&path.to_string_lossy(), format, 0)?;
        w.write_refs(&refs)?;
        w.finish()?;
    }
    Ok(refs.len() as u64)
}

/// Where the converted traces go: `/dev/shm` (memory) when there is one, so that both
/// programs read from memory and the disk's write-back of the freshly written traces
/// does not run during the measurements; the temporary directory otherwise.
fn scratch_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Runs `pmlab bench`.
pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.reps >= 1, "--reps: must be at least 1");
    // Removed when dropped, whether the run succeeds, fails or panics.
    let root = scratch_root();
    let dir = tempfile::Builder::new()
        .prefix("pmlab-bench-")
        .tempdir_in(&root)
        .with_context(|| format!("creating a scratch directory in {}", root.display()))?;
    run_in(&args, dir.path())
}

fn run_in(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let trace = trace_path(args, dir)?;
    let n = prepare(&trace, args.limit, dir)
        .with_context(|| format!("preparing {}", trace_name(args)))?;
    eprintln!(
        "pmlab bench: {} ({n} references), {} repetitions",
        trace_name(args),
        args.reps
    );
    let rows = measure(args, dir, n)?;
    let json_rows = print_tables(&rows);
    let rate_of = |name: &str| rows.iter().find(|r| r.name == name).map(|r| r.rate[0]);
    let one_pass = rate_of("kh-nine-one-pass").unwrap_or_default();
    let separate = rate_of("kh-nine-separate").unwrap_or_default();
    let speedup = [one_pass[0] / separate[0], one_pass[1] / separate[1]];
    println!(
        "one pass vs nine separate passes: {:.2}x (binary), {:.2}x (din)",
        speedup[0], speedup[1]
    );
    let doc = serde_json::json!({
        "trace": trace_name(args),
        "references": n,
        "repetitions": args.reps,
        "statistic": "median",
        "dinero": args.dinero,
        "cases": json_rows,
        "one_pass_speedup": { "binary": speedup[0], "din": speedup[1] },
    });
    std::fs::write(&args.json, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", args.json.display()))?;
    eprintln!("pmlab bench: wrote {}", args.json.display());
    Ok(())
}

/// Times every case on both trace files, and Dinero IV where it is given; the nine
/// separate passes are summed into one row. Rates are kept per clock: `[0]` elapsed
/// time, `[1]` processor time (user + system).
fn measure(args: &Args, dir: &Path, n: u64) -> anyhow::Result<Vec<Row>> {
    let (din, bin) = (dir.join("trace.din"), dir.join("trace.bin"));
    let mut rows: Vec<Row> = Vec::new();
    // Summed medians of the nine separate runs, by clock and format (bin, din).
    let mut separate = [[0.0f64; 2]; 2];
    for case in cases() {
        let mut rate = [[0.0f64; 2]; 2];
        for (k, (path, format)) in [(&bin, Format::Binary), (&din, Format::DinExtended)]
            .into_iter()
            .enumerate()
        {
            let timings: Vec<bench::Timing> = (0..args.reps)
                .map(|_| bench::time_pmlab(&case.work, path, format, args.seed).map(|(t, _)| t))
                .collect::<Result<_, _>>()?;
            for (clock, secs) in median_secs(&timings).into_iter().enumerate() {
                if case.name.starts_with("kh-nine-separate") {
                    separate[clock][k] += secs;
                }
                rate[clock][k] = n as f64 / secs;
            }
        }
        if case.name.starts_with("kh-nine-separate") {
            continue;
        }
        let dinero = match &args.dinero {
            Some(d) if !case.dinero_configs.is_empty() => {
                Some(time_dinero(d, &case.dinero_configs, &din, args.reps)?.map(|s| n as f64 / s))
            }
            _ => None,
        };
        rows.push(Row {
            name: case.name.to_string(),
            what: case.what.to_string(),
            rate,
            dinero,
        });
    }
    let nine_dinero = rows
        .iter()
        .find(|r| r.name == "kh-nine-one-pass")
        .and_then(|r| r.dinero);
    rows.push(Row {
        name: "kh-nine-separate".into(),
        what: "the nine hierarchies, nine passes".into(),
        rate: separate.map(|s| s.map(|secs| n as f64 / secs)),
        dinero: nine_dinero,
    });
    Ok(rows)
}

/// Median seconds (elapsed, processor) of `reps` runs of Dinero IV over every
/// configuration in turn.
fn time_dinero(
    dinero: &Path,
    configs: &[HierarchyConfig],
    din: &Path,
    reps: usize,
) -> anyhow::Result<[f64; 2]> {
    let mut timings = Vec::new();
    for _ in 0..reps {
        let mut total = bench::Timing::default();
        for cfg in configs {
            let t = bench::time_dinero(dinero, cfg, din)?;
            total.wall += t.wall;
            total.cpu += t.cpu;
        }
        timings.push(total);
    }
    Ok(median_secs(&timings))
}

/// Prints one table per clock; returns the rows as JSON objects (elapsed-time figures
/// under their original keys, processor-time ones with `_cpu` added).
fn print_tables(rows: &[Row]) -> Vec<serde_json::Value> {
    let mut json_rows: Vec<serde_json::Value> =
        rows.iter().map(|_| serde_json::json!({})).collect();
    for (clock, title) in [
        (0, "elapsed (wall-clock) time"),
        (
            1,
            "processor time (user + system; other load on the machine does not inflate it)",
        ),
    ] {
        println!("{title}:");
        println!(
            "{:<18} {:>12} {:>12} {:>12} {:>9} {:>9}",
            "case", "bin Mref/s", "din Mref/s", "dinero", "bin/din4", "din/din4"
        );
        for (row, json) in rows.iter().zip(&mut json_rows) {
            print_row(row, clock);
            add_json(json, row, clock);
        }
    }
    json_rows
}

fn print_row(row: &Row, clock: usize) {
    let rate = row.rate[clock];
    let dinero = row.dinero.map(|d| d[clock]);
    let fmt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    println!(
        "{:<18} {:>12.2} {:>12.2} {:>12} {:>9} {:>9}",
        row.name,
        rate[0] / 1e6,
        rate[1] / 1e6,
        fmt(dinero.map(|d| d / 1e6)),
        fmt(dinero.map(|d| rate[0] / d)),
        fmt(dinero.map(|d| rate[1] / d)),
    );
}

fn add_json(json: &mut serde_json::Value, row: &Row, clock: usize) {
    let rate = row.rate[clock];
    let dinero = row.dinero.map(|d| d[clock]);
    json["case"] = serde_json::json!(row.name);
    json["description"] = serde_json::json!(row.what);
    let suffix = if clock == 0 { "" } else { "_cpu" };
    let fields = [
        ("pmlab_binary_refs_per_s", serde_json::json!(rate[0])),
        ("pmlab_din_refs_per_s", serde_json::json!(rate[1])),
        ("dinero_refs_per_s", serde_json::json!(dinero)),
        (
            "ratio_binary_over_dinero",
            serde_json::json!(dinero.map(|d| rate[0] / d)),
        ),
        (
            "ratio_din_over_dinero",
            serde_json::json!(dinero.map(|d| rate[1] / d)),
        ),
    ];
    for (key, value) in fields {
        json[format!("{key}{suffix}")] = value;
    }
}

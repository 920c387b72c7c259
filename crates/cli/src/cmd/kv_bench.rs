//! `pmlab kv bench`: Figures 10a–10c natively — the store's clients beside the real
//! `redis-server` + `redis-benchmark` over a Unix socket, and independent Redis
//! instances, one per core, in the same run. Prints a table (with the ratios), and
//! writes JSON, CSV and SVG plots.

use std::path::PathBuf;

use anyhow::Context;
use pmlab_kvjmp::bench::{self, Plan, Row, Workload};
use pmlab_report::{LinePlot, Series, Table};

/// Arguments of `pmlab kv bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Client counts, e.g. 1,2 (processes for the store, connections for Redis).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    clients: Vec<u32>,
    /// Requests per test over all clients (redis-benchmark -n).
    #[arg(long, default_value_t = 100_000)]
    requests: u64,
    /// Key space (redis-benchmark -r).
    #[arg(long, default_value_t = 100_000)]
    keyspace: u64,
    /// Value bytes (redis-benchmark -d).
    #[arg(long, default_value_t = 4)]
    value_len: usize,
    /// SET percentages of the sweep (Figure 10c) besides 0 and 100.
    #[arg(long, value_delimiter = ',', default_value = "10,25,50")]
    sweep: Vec<u32>,
    /// Repetitions; medians are reported.
    #[arg(long, default_value_t = 3)]
    reps: u32,
    /// Run the real redis-server and redis-benchmark beside the store.
    #[arg(long)]
    vs_redis: bool,
    /// Print the JSON list of {system, clients, op, set_pct, req_per_s} on stdout
    /// (the table goes to stderr).
    #[arg(long)]
    json: bool,
    /// Seed (xoshiro256++) of the clients' keys and operations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where kv.json, kv.csv and the SVG plots go.
    #[arg(long, default_value = "results/kv")]
    out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<()> {
    if a.clients.is_empty() || a.clients.contains(&0) {
        anyhow::bail!("--clients: give one or more positive counts, e.g. 1,2");
    }
    if let Some(p) = a.sweep.iter().find(|&&p| p > 100) {
        anyhow::bail!("--sweep: {p} is not a percentage");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let plan = Plan {
        clients: a.clients.clone(),
        reps: a.reps.max(1),
        workload: Workload {
            requests: a.requests,
            keyspace: a.keyspace,
            value_len: a.value_len,
            seed: a.seed,
        },
        sweep: a
            .sweep
            .iter()
            .copied()
            .filter(|&p| p != 0 && p != 100)
            .collect(),
        vs_redis: a.vs_redis,
        cores,
        store_bytes: 256 << 20,
    };
    let load = load_average();
    let exe = std::env::current_exe().context("the pmlab executable's path")?;
    let command = |spec: &bench::client::ClientSpec| {
        let mut c = std::process::Command::new(&exe);
        c.args(["kv", "bench-client"])
            .args(bench::client_args(spec));
        c
    };
    let steps = plan.reps as u64
        * plan.clients.len() as u64
        * (2 + plan.sweep.len() as u64)
        * if a.vs_redis { 2 } else { 1 };
    let bar = progress(steps, a.no_progress);
    let mut tick = |what: &str| {
        bar.set_message(what.to_string());
        bar.inc(1);
    };
    let rows = bench::run(&plan, &command, &mut tick).map_err(|e| anyhow::anyhow!(e))?;
    bar.finish_and_clear();
    let table = table(&rows, &plan, load);
    if a.json {
        eprintln!("{table}");
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!("{table}");
    }
    write_outputs(&a.out, &rows, &table)
}

fn progress(len: u64, hidden: bool) -> indicatif::ProgressBar {
    if hidden {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(len);
    b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(s) =
        indicatif::ProgressStyle::with_template("kv bench [{bar:30}] {pos}/{len} {msg} {elapsed}")
    {
        b.set_style(s);
    }
    b
}

/// The 1-minute load average, read before the run (the machine is shared).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn find(rows: &[Row], system: &str, clients: u32, pct: u32) -> Option<f64> {
    rows.iter()
        .find(|r| r.system == system && r.clients == clients && r.set_pct == pct)
        .map(|r| r.req_per_s)
}

fn table(rows: &[Row], plan: &Plan, load: String) -> Table {
    let mut t = Table::new(
        "Redis_JMP (pmlab kv) vs Redis: requests per second (medians)",
        &[
            "clients",
            "op",
            "SET %",
            "pmlab",
            "redis",
            "redis-per-core",
            "pmlab / redis",
            "pmlab / per-core",
        ],
    );
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    };
    let cell = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
    let mut pcts: Vec<u32> = vec![0, 100];
    pcts.extend(plan.sweep.iter().copied());
    for &c in &plan.clients {
        for &p in &pcts {
            let (k, r, pc) = (
                find(rows, "pmlab", c, p),
                find(rows, "redis", c, p),
                find(rows, "redis-per-core", c, p),
            );
            let op = rows
                .iter()
                .find(|x| x.clients == c && x.set_pct == p)
                .map_or("-", |x| x.op.as_str());
            t.row(vec![
                c.to_string(),
                op.into(),
                p.to_string(),
                cell(k),
                cell(r),
                cell(pc),
                ratio(k, r),
                ratio(k, pc),
            ]);
        }
    }
    t.note(format!(
        "{} requests per test, key space {}, {}-byte values, {} repetition(s); {} cores; load average before the run {load}; switch mechanism {}; {}",
        plan.workload.requests,
        plan.workload.keyspace,
        plan.workload.value_len,
        plan.reps,
        plan.cores,
        pmlab_vas::native::protect::decide(Default::default()).map_or("unknown".into(), |m| m.name().to_string()),
        bench::redis::version().unwrap_or_else(|| "redis-server not run".into())
    ));
    t
}

fn write_outputs(out: &std::path::Path, rows: &[Row], table: &Table) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    pmlab_report::write_json(&out.join("kv.json"), &rows)?;
    table.write_csv(&out.join("kv.csv"))?;
    for (file, title, pct) in [
        ("fig10a-get.svg", "Figure 10a: GET", 0),
        ("fig10b-set.svg", "Figure 10b: SET", 100),
    ] {
        let series = ["pmlab", "redis", "redis-per-core"]
            .iter()
            .map(|s| {
                let pts = rows
                    .iter()
                    .filter(|r| r.system == *s && r.set_pct == pct)
                    .map(|r| (f64::from(r.clients), r.req_per_s))
                    .collect();
                Series::new(*s, pts)
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        let plot = LinePlot {
            title: title.into(),
            x_label: "clients".into(),
            y_label: "requests/s".into(),
            series,
        };
        plot.write_svg(&out.join(file))?;
    }
    let max_c = rows.iter().map(|r| r.clients).max().unwrap_or(1);
    let series = ["pmlab", "redis"]
        .iter()
        .map(|s| {
            let pts = rows
                .iter()
                .filter(|r| r.system == *s && r.clients == max_c)
                .map(|r| (f64::from(r.set_pct), r.req_per_s))
                .collect();
            Series::new(format!("{s}, {max_c} client(s)"), pts)
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let plot = LinePlot {
        title: "Figure 10c: SET percentage sweep".into(),
        x_label: "SET %".into(),
        y_label: "requests/s".into(),
        series,
    };
    plot.write_svg(&out.join("fig10c-sweep.svg"))?;
    eprintln!(
        "wrote {}/kv.json, kv.csv, fig10a-get.svg, fig10b-set.svg, fig10c-sweep.svg",
        out.display()
    );
    Ok(())
}

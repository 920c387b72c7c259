//! `pmlab kv bench`: Figures 10a–10c natively — the store's clients beside the real
//! `redis-server` + `redis-benchmark` over a Unix socket, and independent Redis
//! instances, one per core, in the same run. The store runs in both persistence
//! domains and each is compared with the Redis configuration of the same guarantee
//! (power: Redis fsyncing its AOF before every reply; process: Redis's default).
//! Prints a table (with the ratios), and writes JSON, CSV and SVG plots.

use std::path::PathBuf;

use anyhow::Context;
use pmlab_kvjmp::Persist;
use pmlab_kvjmp::bench::{self, Plan, Row, Workload};
use pmlab_report::{LinePlot, Series, Table};
use pmlab_vas::native::MechanismChoice;

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
    /// Let the scheduler place each Redis server and its clients. By default they
    /// share one CPU (instance i of redis-per-core on CPU i), Redis's fastest setting
    /// for one connection: across CPUs every request and reply wakes an idle CPU,
    /// which on a virtual machine cuts a connection's rate several times.
    #[arg(long)]
    redis_unpinned: bool,
    /// Print the JSON list of {system, clients, op, set_pct, req_per_s, mechanism} on
    /// stdout (the table goes to stderr); a mixed point has a GET and a SET row, each
    /// with its op's share of the requests per second.
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

/// Runs the benchmark, with the store switching by `mechanism`, or by every mechanism
/// this machine has when `None`.
/// The store runs in domain `persist`, or in both when `None`.
pub fn run(
    a: Args,
    mechanism: Option<MechanismChoice>,
    persist: Option<Persist>,
) -> anyhow::Result<()> {
    if a.clients.is_empty() || a.clients.contains(&0) {
        anyhow::bail!("--clients: give one or more positive counts, e.g. 1,2");
    }
    if let Some(p) = a.sweep.iter().find(|&&p| p > 100) {
        anyhow::bail!("--sweep: {p} is not a percentage");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let mechanisms = match mechanism {
        Some(c) => vec![
            pmlab_vas::native::protect::decide(c)
                .map_err(|e| anyhow::anyhow!("--mechanism: {e}"))?,
        ],
        None => bench::available_mechanisms(),
    };
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
        redis_same_cpu: !a.redis_unpinned,
        cores,
        store_bytes: 256 << 20,
        mechanisms,
        persists: persist.map_or(Persist::ALL.to_vec(), |p| vec![p]),
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
        * ((2 + plan.sweep.len() as u64)
            * plan.mechanisms.len() as u64
            * plan.persists.len() as u64
            + if a.vs_redis {
                2 + plan.sweep.len() as u64 + u64::from(plan.persists.contains(&Persist::Power))
            } else {
                0
            });
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

/// Figures 10a-c for `pmlab reproduce spacejmp`: one to (cores) clients beside the
/// real Redis, every available mechanism, the default sweep; `--quick` runs 20,000
/// requests per test and one repetition (else 100,000 and three).
pub fn reproduce(
    quick: bool,
    seed: u64,
    out: &std::path::Path,
    no_progress: bool,
) -> anyhow::Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let a = Args {
        clients: (1..=cores.max(1)).collect(),
        requests: if quick { 20_000 } else { 100_000 },
        keyspace: 100_000,
        value_len: 4,
        sweep: vec![10, 25, 50],
        reps: if quick { 1 } else { 3 },
        vs_redis: true,
        redis_unpinned: false,
        json: false,
        seed,
        out: out.to_path_buf(),
        no_progress,
    };
    run(a, None, None)
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

/// The total requests per second of one point (the sum of its GET and SET rows).
fn total(rows: &[Row], system: &str, clients: u32, pct: u32, mech: Option<&str>) -> Option<f64> {
    let xs: Vec<f64> = rows
        .iter()
        .filter(|r| r.system == system && r.clients == clients && r.set_pct == pct)
        .filter(|r| mech.is_none() || r.mechanism.as_deref() == mech)
        .map(|r| r.req_per_s)
        .collect();
    (!xs.is_empty()).then(|| xs.iter().sum())
}

/// Builds the table: one line per (clients, SET %, mechanism, persistence domain),
/// totals per point, each domain beside the Redis configuration of its guarantee.
fn table(rows: &[Row], plan: &Plan, load: String) -> Table {
    let mut t = Table::new(
        "Redis_JMP (pmlab kv) vs Redis of the same durability: requests per second (medians; mixed points: GET + SET)",
        &[
            "clients",
            "SET %",
            "mechanism",
            "persist",
            "pmlab",
            "peer",
            "peer req/s",
            "pmlab / peer",
            "redis-per-core",
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
        for &pct in &pcts {
            for m in &plan.mechanisms {
                for &p in &plan.persists {
                    let k = total(rows, bench::system_of(p), c, pct, Some(m.name()));
                    let peer = total(rows, bench::peer_of(p), c, pct, None);
                    // Independent instances run Redis's default: the process domain's peer.
                    let pc = (p == Persist::Process)
                        .then(|| total(rows, "redis-per-core", c, pct, None))
                        .flatten();
                    t.row(vec![
                        c.to_string(),
                        pct.to_string(),
                        m.name().into(),
                        p.name().into(),
                        cell(k),
                        bench::peer_of(p).into(),
                        cell(peer),
                        ratio(k, peer),
                        cell(pc),
                        ratio(k, pc),
                    ]);
                }
            }
        }
    }
    let isolation = if plan.mechanisms.iter().all(|m| m.isolates_switched_out()) {
        String::new()
    } else {
        "; resident: no system call per switch, but the store stays mapped (read-only unless the client may write it) and reachable from a client between its requests".into()
    };
    t.note(format!(
        "{} requests per test, key space {}, {}-byte values, {} repetition(s); {} cores; load average before the run {load}; switch mechanisms {}{isolation}; CPUID PKU {}; persist power: every SET written back (clwb/sfence) before it returns, against redis-aof-always (appendfsync always, AOF on tmpfs; GET/SET tests only); persist process: compiler ordering only, survives any process kill, against default redis and redis-per-core (no AOF, no snapshot); redis sweep points (SET % other than 0 and 100) by pmlab's RESP client processes, since redis-benchmark cannot mix; each Redis server {}; {}",
        plan.workload.requests,
        plan.workload.keyspace,
        plan.workload.value_len,
        plan.reps,
        plan.cores,
        plan.mechanisms.iter().map(|m| m.name()).collect::<Vec<_>>().join(", "),
        pmlab_vas::native::pku_support().ospke,
        if plan.redis_same_cpu {
            "on one CPU with its clients (instance i of redis-per-core on CPU i)"
        } else {
            "and its clients placed by the scheduler (--redis-unpinned)"
        },
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
        let series = series_names(rows)
            .into_iter()
            .map(|(label, s, m)| {
                let pts = rows
                    .iter()
                    .filter(|r| r.system == s && r.mechanism == m && r.set_pct == pct)
                    .map(|r| (f64::from(r.clients), r.req_per_s))
                    .collect();
                Series::new(label, pts)
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
    let mut pcts: Vec<u32> = rows.iter().map(|r| r.set_pct).collect();
    pcts.sort_unstable();
    pcts.dedup();
    let series = series_names(rows)
        .into_iter()
        .filter(|(_, s, _)| s != "redis-per-core")
        .map(|(label, s, m)| {
            let pts = pcts
                .iter()
                .filter_map(|&p| total(rows, &s, max_c, p, m.as_deref()).map(|v| (f64::from(p), v)))
                .collect();
            Series::new(format!("{label}, {max_c} client(s)"), pts)
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

/// The plotted series: each system, the store once per mechanism (label, system,
/// mechanism).
fn series_names(rows: &[Row]) -> Vec<(String, String, Option<String>)> {
    let mut v: Vec<(String, String, Option<String>)> = rows
        .iter()
        .map(|r| {
            let label = match &r.mechanism {
                Some(m) => format!("{} ({m})", r.system),
                None => r.system.clone(),
            };
            (label, r.system.clone(), r.mechanism.clone())
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

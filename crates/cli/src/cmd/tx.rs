//! `pmlab tx`: durable transactions — the workloads under each protocol, timed on real
//! regions beside PMDK (`bench`), crash-explored on the machine model (`crashtest`),
//! and killed at random moments (`stress`).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Subcommand;
use pmlab_report::Table;
use pmlab_tx::{Fault, FaultPlan};
use pmlab_txcheck::{ProtocolKind, bench, crash};
use pmlab_workloads::{Dist, Kind, Params};

/// Arguments of `pmlab tx`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Time a workload's transactions on a real region (tmpfs or DAX, real clwb/
    /// clflushopt + sfence) under each protocol, and with --vs-pmdk PMDK's libpmemobj on
    /// the same SPS operations in the same run; medians over repetitions.
    Bench(BenchArgs),
    /// Explore every crash point of a workload's transactions (and of recovery) on the
    /// machine model under each protocol: every image must recover to a checker-clean
    /// structure holding a committed prefix with every acknowledged transaction. Exits
    /// non-zero if any image fails; --fault runs a deliberately broken variant.
    Crashtest(CrashArgs),
    /// Kill a running `pmlab tx bench` with SIGKILL at random moments; after each kill
    /// the pool must recover, pass the workload's checker and hold the acknowledged
    /// transactions (or one more). Exits non-zero on the first violation.
    Stress(StressArgs),
}

/// The workload options every subcommand shares.
#[derive(clap::Args, Clone)]
struct WorkloadArgs {
    /// sps, hashtable, rbtree, btree, bptree, sdg or db.
    #[arg(long, default_value = "sps")]
    workload: String,
    /// How operations pick elements: uniform or zipf (YCSB's θ = 0.99).
    #[arg(long, default_value = "uniform")]
    dist: String,
    /// Elements of the structure (default: the workload's scaled default).
    #[arg(long, value_parser = pmlab_spine::parse_size)]
    elements: Option<u64>,
    /// Operations per transaction (default: 4 for bptree and db, else 1).
    #[arg(long)]
    ops_per_tx: Option<u32>,
}

impl WorkloadArgs {
    fn kind(&self) -> anyhow::Result<Kind> {
        Kind::from_name(&self.workload).with_context(|| {
            let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
            format!(
                "--workload {:?}: not one of {}",
                self.workload,
                names.join(", ")
            )
        })
    }

    fn params(&self, kind: Kind) -> anyhow::Result<Params> {
        let dist = Dist::from_name(&self.dist)
            .with_context(|| format!("--dist {:?}: not uniform or zipf", self.dist))?;
        let mut p = Params::defaults(kind, dist);
        if let Some(e) = self.elements {
            p.elements = e;
        }
        if let Some(o) = self.ops_per_tx {
            if o == 0 {
                bail!("--ops-per-tx 0: at least one operation per transaction");
            }
            p.ops_per_tx = o;
        }
        Ok(p)
    }
}

fn protocols(name: &str) -> anyhow::Result<Vec<ProtocolKind>> {
    if name == "all" {
        return Ok(ProtocolKind::ALL.to_vec());
    }
    name.split(',')
        .map(|n| {
            ProtocolKind::from_name(n)
                .with_context(|| format!("--protocol {n:?}: not redo, undo or all"))
        })
        .collect()
}

fn fault_plan(name: Option<&str>) -> anyhow::Result<(FaultPlan, Option<ProtocolKind>)> {
    let Some(name) = name else {
        return Ok((FaultPlan::CORRECT, None));
    };
    let f = Fault::from_name(name).with_context(|| {
        let names: Vec<&str> = ProtocolKind::ALL
            .iter()
            .flat_map(|p| p.faults().iter().map(|f| f.name()))
            .collect();
        format!("--fault {name:?}: not one of {}", names.join(", "))
    })?;
    let owner = ProtocolKind::of_fault(f)
        .with_context(|| format!("--fault {name}: not a fault of a transaction protocol"))?;
    Ok((FaultPlan::broken(f), Some(owner)))
}

#[derive(clap::Args)]
struct BenchArgs {
    #[command(flatten)]
    w: WorkloadArgs,
    /// redo, undo, a comma-separated list, or all.
    #[arg(long, default_value = "all")]
    protocol: String,
    /// Transactions per repetition.
    #[arg(long, default_value_t = 1_000_000, value_parser = pmlab_spine::parse_size)]
    ops: u64,
    /// Repetitions (each system once per repetition, interleaved); medians reported.
    #[arg(long, default_value_t = 5)]
    reps: u32,
    /// Seed of the operation streams (xoshiro256++); repetition r uses seed + r.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A pool to run on: made if missing (sized for the workload), opened and
    /// recovered if it exists, and kept. Without it, scratch pools in --dir.
    #[arg(long)]
    region: Option<PathBuf>,
    /// Directory for scratch pools.
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Also time PMDK's libpmemobj on the same SPS operations (PMEM_IS_PMEM_FORCE=1).
    #[arg(long)]
    vs_pmdk: bool,
    /// Print the results as JSON (one object per protocol) instead of a table.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Stress worker: count acknowledged transactions in this page and run until
    /// killed (started by `pmlab tx stress`).
    #[arg(long, hide = true, requires = "region")]
    ack: Option<PathBuf>,
    /// Stress worker: SIGKILL itself right after this store to the pool.
    #[arg(long, hide = true, requires = "ack")]
    kill_at_store: Option<u64>,
    /// Stress worker: run a deliberately broken variant of the protocol.
    #[arg(long, hide = true, requires = "ack")]
    fault: Option<String>,
}

#[derive(clap::Args)]
struct StressArgs {
    #[command(flatten)]
    w: WorkloadArgs,
    /// redo or undo.
    #[arg(long, default_value = "redo")]
    protocol: String,
    /// Rounds, each ending in a SIGKILL of the bench (by timer on even rounds, at a
    /// random store on odd rounds).
    #[arg(long, default_value_t = 10)]
    kills: u32,
    /// Seed of the kill points and the rounds' operations (xoshiro256++).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for the pool.
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Longest delay before a timed kill, in milliseconds.
    #[arg(long, default_value_t = 300)]
    max_delay_ms: u64,
    /// Largest store count for a self-kill.
    #[arg(long, default_value_t = 50_000)]
    max_stores: u64,
    /// Break the protocol on purpose (recovery-skips-replay, recovery-skips-rollback:
    /// a process kill shows these; fence and flush faults need the model's crashes).
    #[arg(long)]
    fault: Option<String>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

#[derive(clap::Args)]
struct CrashArgs {
    #[command(flatten)]
    w: WorkloadArgs,
    /// redo, undo, a comma-separated list, or all.
    #[arg(long, default_value = "all")]
    protocol: String,
    /// Explore every workload, not just --workload.
    #[arg(long)]
    all_workloads: bool,
    /// Transactions explored (default: the workload's small, CI-sized run; the
    /// structure is small too unless --elements says otherwise).
    #[arg(long)]
    txs: Option<u64>,
    /// Seed of the operations, chaos write-backs and pending subsets.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Break the protocol on purpose (e.g. skip-log-fence, skip-snapshot-flush,
    /// recovery-skips-replay); the exploration must then fail.
    #[arg(long)]
    fault: Option<String>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// Runs `pmlab tx`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.cmd {
        Cmd::Bench(a) => run_bench(a),
        Cmd::Crashtest(a) => run_crash(a),
        Cmd::Stress(a) => run_stress(a),
    }
}

fn bar(len: u64, hidden: bool, what: &str) -> indicatif::ProgressBar {
    if hidden {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(len);
    b.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}")
            .expect("a valid template"),
    );
    b.set_message(what.to_string());
    b
}

fn run_bench(a: BenchArgs) -> anyhow::Result<()> {
    let kind = a.w.kind()?;
    let params = a.w.params(kind)?;
    if let Some(ack) = &a.ack {
        return run_worker(&a, kind, params, ack);
    }
    let mut protos = protocols(&a.protocol)?;
    if let Some(region) = &a.region {
        if let Some(p) = bench::existing_protocol(region)? {
            if a.protocol == "all" {
                protos = vec![p];
            }
        } else if a.protocol == "all" {
            protos = vec![ProtocolKind::Redo];
        }
    }
    if a.vs_pmdk && std::env::var_os(pmlab_txcheck::pmdk::FORCE_PMEM_ENV).is_none() {
        // SAFETY: nothing else runs yet (no progress bar, no threads): the environment is
        // set before libpmem is loaded and reads it.
        unsafe { std::env::set_var(pmlab_txcheck::pmdk::FORCE_PMEM_ENV, "1") };
    }
    let cfg = bench::Config {
        workload: kind,
        params,
        protocols: protos,
        ops: a.ops,
        reps: a.reps.max(1),
        seed: a.seed,
        dir: a.dir,
        region: a.region,
        vs_pmdk: a.vs_pmdk,
        log_len: pmlab_txcheck::pool::NATIVE_LOG,
    };
    let pb = bar(u64::from(cfg.reps), a.no_progress, "repetitions");
    let rows = bench::run(&cfg, &mut |r| pb.set_position(u64::from(r)))?;
    pb.finish_and_clear();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", bench_table(&rows));
    }
    Ok(())
}

fn bench_table(rows: &[bench::Row]) -> Table {
    let mut t = Table::new(
        "pmlab tx bench: transactions on a real region (medians)",
        &[
            "workload",
            "protocol",
            "dist",
            "elements",
            "tx/s",
            "flushes/tx",
            "fences/tx",
            "log B/tx",
            "PMDK tx/s",
            "vs PMDK",
        ],
    );
    for r in rows {
        t.row(vec![
            r.workload.clone(),
            r.protocol.clone(),
            r.dist.clone(),
            r.elements.to_string(),
            format!("{:.0}", r.tx_per_s),
            format!("{:.2}", r.flushes_per_tx),
            format!("{:.2}", r.fences_per_tx),
            format!("{:.1}", r.log_bytes_per_tx),
            r.pmdk_tx_per_s.map_or("-".into(), |v| format!("{v:.0}")),
            r.speedup_vs_pmdk.map_or("-".into(), |v| format!("{v:.2}x")),
        ]);
    }
    if let Some(r) = rows.first() {
        t.note(format!(
            "{} transactions x {} repetitions per system; region on {} with {}; load average {:.2} before, {:.2} after, {} CPUs",
            r.txs, r.reps, r.medium, r.persist_mode, r.load_before, r.load_after, r.cpus
        ));
        if let Some(p) = r.pmdk_is_pmem {
            t.note(format!(
                "PMDK treated its pool as persistent memory (pmem_is_pmem): {p}"
            ));
        }
        t.note(format!("checked after the run: {}", r.checked));
    }
    t
}

fn run_crash(a: CrashArgs) -> anyhow::Result<()> {
    let (faults, owner) = fault_plan(a.fault.as_deref())?;
    let protos = match owner {
        Some(p) if a.protocol == "all" => vec![p],
        Some(p) if protocols(&a.protocol)? != vec![p] => {
            bail!(
                "--fault {} is a fault of the {p} protocol",
                a.fault.unwrap_or_default()
            )
        }
        _ => protocols(&a.protocol)?,
    };
    let kinds = if a.all_workloads {
        Kind::ALL.to_vec()
    } else {
        vec![a.w.kind()?]
    };
    let mut t = Table::new(
        "pmlab tx crashtest: crash points explored on the machine model",
        &[
            "workload",
            "protocol",
            "faults",
            "txs",
            "points",
            "images",
            "recoveries",
            "recovery images",
            "failing images",
        ],
    );
    let mut failed = Vec::new();
    for kind in kinds {
        let cfg = crash_config(&a, kind)?;
        for &p in &protos {
            let r = explore_one(&cfg, p, faults, a.no_progress)
                .with_context(|| format!("{kind} under {p}"))?;
            let figures = [
                r.txs,
                r.points,
                r.images,
                r.recoveries,
                r.recovery_images,
                r.failing_images,
            ];
            let mut cells = vec![kind.to_string(), p.to_string(), faults.to_string()];
            cells.extend(figures.iter().map(|n| n.to_string()));
            t.row(cells);
            if let Some(f) = r.failures.first() {
                failed.push(format!("{kind} {p}: {f}"));
            }
        }
    }
    t.note(
        "failing images: up to 4 per recorded run (the explorer stops a run's exploration there)",
    );
    print!("{t}");
    if !failed.is_empty() {
        for f in &failed {
            eprintln!("first failure: {f}");
        }
        bail!(
            "{} of the explorations found crash images that fail",
            failed.len()
        );
    }
    Ok(())
}

/// The exploration of `kind`: the small, CI-sized run unless the command line asks
/// for another size, mix or length.
fn crash_config(a: &CrashArgs, kind: Kind) -> anyhow::Result<crash::Config> {
    let mut cfg = crash::Config::small(kind, a.seed);
    let asked = a.w.params(kind)?;
    cfg.params.dist = asked.dist;
    if let Some(e) = a.w.elements {
        cfg.params.elements = e;
    }
    if a.w.ops_per_tx.is_some() {
        cfg.params.ops_per_tx = asked.ops_per_tx;
    }
    if let Some(n) = a.txs {
        cfg.txs = n;
    }
    Ok(cfg)
}

/// Explores one workload under one protocol, with a progress bar.
fn explore_one(
    cfg: &crash::Config,
    p: ProtocolKind,
    faults: FaultPlan,
    quiet: bool,
) -> anyhow::Result<crash::Report> {
    let pb = bar(cfg.txs, quiet, &format!("{} {p}", cfg.workload));
    let mut tick = |n| pb.set_position(n);
    let r = match p {
        ProtocolKind::Redo => crash::explore(&pmlab_txcheck::RedoHarness(faults), cfg, &mut tick),
        ProtocolKind::Undo => crash::explore(&pmlab_txcheck::UndoHarness(faults), cfg, &mut tick),
    };
    pb.finish_and_clear();
    Ok(r?)
}

/// `pmlab tx bench --ack`: the stress test's worker. It returns only on an error.
fn run_worker(
    a: &BenchArgs,
    kind: Kind,
    params: Params,
    ack: &std::path::Path,
) -> anyhow::Result<()> {
    let protocol = *protocols(&a.protocol)?
        .first()
        .context("--protocol names no protocol")?;
    let (faults, _) = fault_plan(a.fault.as_deref())?;
    let args = pmlab_txcheck::stress::WorkerArgs {
        region: a.region.clone().context("--ack needs --region")?,
        workload: kind,
        params,
        protocol,
        faults,
        seed: a.seed,
        ack: ack.to_path_buf(),
        kill_at_store: a.kill_at_store,
    };
    pmlab_txcheck::stress::worker(&args).map_err(anyhow::Error::msg)
}

fn run_stress(a: StressArgs) -> anyhow::Result<()> {
    let kind = a.w.kind()?;
    let params = a.w.params(kind)?;
    let protocol = ProtocolKind::from_name(&a.protocol)
        .with_context(|| format!("--protocol {:?}: not redo or undo", a.protocol))?;
    let (faults, owner) = fault_plan(a.fault.as_deref())?;
    if owner.is_some_and(|o| o != protocol) {
        bail!(
            "--fault {} is not a fault of the {protocol} protocol",
            a.fault.unwrap_or_default()
        );
    }
    let cfg = pmlab_txcheck::stress::Config {
        spec: pmlab_txcheck::pool::Spec {
            workload: kind,
            params,
            protocol,
            log_len: pmlab_txcheck::pool::NATIVE_LOG,
        },
        faults,
        kills: a.kills,
        seed: a.seed,
        dir: a.dir,
        pmlab: std::env::current_exe().context("the pmlab executable's path")?,
        max_delay_ms: a.max_delay_ms,
        max_stores: a.max_stores,
    };
    let pb = bar(u64::from(cfg.kills), a.no_progress, "kills");
    let report = pmlab_txcheck::stress::run(&cfg, &mut |r| pb.set_position(u64::from(r)))?;
    pb.finish_and_clear();
    let mut t = Table::new(
        format!(
            "pmlab tx stress: {kind} under {protocol} ({faults}), seed {}",
            a.seed
        ),
        &["round", "kill", "acknowledged", "held", "recovery"],
    );
    for r in &report.rounds {
        t.row(vec![
            r.round.to_string(),
            r.kill.clone(),
            r.acked.to_string(),
            if r.one_more {
                "acked + 1".into()
            } else {
                "acked".into()
            },
            r.recovery.clone(),
        ]);
    }
    print!("{t}");
    match report.violation {
        None => {
            println!(
                "{} kills: every recovered pool passed the checker and held the acknowledged transactions",
                report.rounds.len()
            );
            Ok(())
        }
        Some(v) => bail!("violation: {v}"),
    }
}

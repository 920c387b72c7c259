//! `pmlab placement`: Kessler & Hill's careful page mapping — the analytic conflict
//! model of section 2 beside a Monte Carlo of random placement through the OS model.

use anyhow::{Context, bail};
use clap::Subcommand;
use pmlab_os::compare::{CompareConfig, run_policy};
use pmlab_os::figures::{FigureConfig, FigurePoint, MonteCarloSpec, model_figures};
use pmlab_os::{CacheGeometry, OsConfig, PageSize, PolicyKind};
use pmlab_spine::parse_size;

/// Arguments of `pmlab placement`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The conflict model (equations 1-2): Figure 3 (C_min, C_avg, C_max of a
    /// direct-mapped cache) and Figure 4 (mapping conflicts C_avg - C_min per
    /// associativity), with the paper's parameters as defaults.
    Model(ModelArgs),
    /// The placement policies side by side on one synthetic multiprogrammed workload:
    /// page conflicts within each address space at its exit (as Figure 12 samples them).
    Compare(CompareArgs),
}

/// Arguments of `pmlab placement compare`.
#[derive(clap::Args)]
struct CompareArgs {
    /// Policies, comma separated (random, coloring, coloring-hash, bin-hopping,
    /// sequential, hierarchical).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "random,coloring,coloring-hash,bin-hopping,sequential,hierarchical"
    )]
    policies: Vec<PolicyKind>,
    /// Main memory.
    #[arg(long, default_value = "128MiB", value_parser = parse_size)]
    memory: u64,
    /// Pool of available frames at the bottom of the LRU list (the paper's large pool is
    /// 4 MiB, its small one 256 KiB).
    #[arg(long, default_value = "4MiB", value_parser = parse_size)]
    pool: u64,
    /// Page size.
    #[arg(long, default_value = "16KiB", value_parser = parse_size)]
    page_size: u64,
    /// Size of the cache the policies target.
    #[arg(long, default_value = "1MiB", value_parser = parse_size)]
    cache: u64,
    /// Associativity of the target cache.
    #[arg(long, default_value_t = 1)]
    assoc: u32,
    /// Processes running at a time.
    #[arg(long, default_value_t = 8)]
    processes: u32,
    /// Mean working set per process in pages (uniform in [pages/2, 3 pages/2]).
    #[arg(long, default_value_t = 64)]
    pages: u64,
    /// References between context switches.
    #[arg(long, default_value_t = 2000)]
    quantum: u64,
    /// References a process makes before it exits.
    #[arg(long, default_value_t = 20000)]
    lifetime: u64,
    /// Processes to finish (one sample each).
    #[arg(long, default_value_t = 400)]
    exits: u32,
    /// Seed of the workload, LRU order and policies (xoshiro256++).
    #[arg(long, default_value_t = 1990)]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `pmlab placement model`.
#[derive(clap::Args)]
struct ModelArgs {
    /// Main memory (all of it is the model's P available frames).
    #[arg(long, default_value = "128MiB", value_parser = parse_size)]
    memory: u64,
    /// Page size.
    #[arg(long, default_value = "16KiB", value_parser = parse_size)]
    page_size: u64,
    /// Cache size (the paper's N = cache size / page size).
    #[arg(long, default_value = "1MiB", value_parser = parse_size)]
    cache: u64,
    /// Associativities, comma separated (Figure 3 uses the first).
    #[arg(long, default_value = "1,2,4,8", value_delimiter = ',')]
    assoc: Vec<u32>,
    /// Largest application size in pages (default 4 N).
    #[arg(long)]
    max_pages: Option<u64>,
    /// Step between application sizes in pages (default N / 8).
    #[arg(long)]
    step: Option<u64>,
    /// Trials of a Monte Carlo of random placement through the OS model, shown beside the
    /// model (0: none).
    #[arg(long, default_value_t = 0)]
    monte_carlo: u32,
    /// Pool of available frames at the bottom of the LRU list, for the Monte Carlo.
    #[arg(long, default_value = "4MiB", value_parser = parse_size)]
    pool: u64,
    /// Seed of the Monte Carlo's xoshiro256++ generator.
    #[arg(long, default_value_t = 1990)]
    seed: u64,
    /// Print JSON instead of tables.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV (one row per application size and associativity) instead of tables.
    #[arg(long)]
    csv: bool,
}

/// Runs `pmlab placement`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Model(a) => model(a),
        Command::Compare(a) => compare(a),
    }
}

fn compare(a: CompareArgs) -> anyhow::Result<()> {
    let page_size = PageSize::new(a.page_size).context("--page-size")?;
    let os =
        OsConfig::from_bytes(a.memory, a.pool, page_size, a.seed).context("--memory/--pool")?;
    let geometry = CacheGeometry::new(a.cache, a.assoc, page_size).context("--cache/--assoc")?;
    let config = CompareConfig {
        os,
        geometry,
        processes: a.processes,
        pages: a.pages,
        quantum: a.quantum,
        lifetime: a.lifetime,
        exits: a.exits,
        seed: a.seed,
    };
    let outcomes = a
        .policies
        .iter()
        .map(|&p| run_policy(&config, p).with_context(|| format!("policy {p}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&outcomes)?);
        return Ok(());
    }
    println!(
        "{} KiB {}-way target cache ({} bins), {} MiB memory, {} KiB pool, {} KiB pages; {} processes \
         at a time, working sets of ~{} pages, {} processes measured at exit",
        a.cache >> 10,
        a.assoc,
        geometry.bins(),
        a.memory >> 20,
        a.pool >> 10,
        a.page_size >> 10,
        a.processes,
        a.pages,
        a.exits
    );
    println!(
        "{:<14} {:>10} {:>14} {:>14} {:>18} {:>10}",
        "policy", "mean C", "mean C-C_min", "conflict-free", "C-C_min (B/2)", "evictions"
    );
    for o in &outcomes {
        println!(
            "{:<14} {:>10.3} {:>14.3} {:>14} {:>18.3} {:>10}",
            o.policy.name(),
            o.mean_conflicts,
            o.mean_mapping_conflicts,
            format!("{}/{}", o.conflict_free, o.processes),
            o.mean_mapping_conflicts_half,
            o.evictions
        );
    }
    Ok(())
}

fn model(a: ModelArgs) -> anyhow::Result<()> {
    let page_size = PageSize::new(a.page_size).context("--page-size")?;
    if a.assoc.is_empty() {
        bail!("--assoc: give at least one associativity");
    }
    let n = a.cache / page_size.bytes();
    let max_pages = a.max_pages.unwrap_or(4 * n);
    let step = a.step.unwrap_or((n / 8).max(1));
    if step == 0 {
        bail!("--step: must be at least 1");
    }
    let config = FigureConfig {
        memory: a.memory,
        page_size,
        cache_size: a.cache,
        assocs: a.assoc.clone(),
        sizes: (0..=max_pages).step_by(step as usize).collect(),
        monte_carlo: (a.monte_carlo > 0).then_some(MonteCarloSpec {
            trials: a.monte_carlo,
            pool: a.pool,
            seed: a.seed,
        }),
    };
    let points = model_figures(&config).context("model configuration")?;
    if a.json {
        let doc = serde_json::json!({
            "memory_bytes": a.memory,
            "page_size": page_size.bytes(),
            "cache_bytes": a.cache,
            "cache_pages": n,
            "frames": a.memory / page_size.bytes(),
            "monte_carlo": config.monte_carlo.map(|m| serde_json::json!({
                "trials": m.trials, "pool_bytes": m.pool, "seed": m.seed, "prng": "xoshiro256++"})),
            "points": points,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else if a.csv {
        print_csv(&points)?;
    } else {
        print_tables(&a, n, &points);
    }
    Ok(())
}

fn print_csv(points: &[FigurePoint]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(std::io::stdout());
    w.write_record([
        "pages",
        "mib",
        "assoc",
        "bins",
        "c_min",
        "c_avg",
        "c_max",
        "c_std_dev",
        "mapping_conflicts",
        "mc_conflicts_mean",
        "mc_conflicts_std_err",
        "mc_trials",
    ])?;
    for p in points {
        let mc = p.mc_conflicts;
        w.write_record([
            p.pages.to_string(),
            format!("{:.4}", p.mib),
            p.assoc.to_string(),
            p.bins.to_string(),
            p.c_min.to_string(),
            format!("{:.6}", p.c_avg),
            p.c_max.to_string(),
            format!("{:.6}", p.c_std_dev),
            format!("{:.6}", p.mapping_conflicts),
            mc.map(|m| format!("{:.6}", m.mean)).unwrap_or_default(),
            mc.map(|m| format!("{:.6}", m.std_err)).unwrap_or_default(),
            mc.map(|m| m.samples.to_string()).unwrap_or_default(),
        ])?;
    }
    w.flush()?;
    Ok(())
}

fn print_tables(a: &ModelArgs, n: u64, points: &[FigurePoint]) {
    let frames = a.memory / a.page_size;
    let assocs = &a.assoc;
    let mc = a.monte_carlo > 0;
    let first = assocs[0];
    println!(
        "Figure 3. Cache mapping conflicts: {} KiB cache, {first}-way (N = {n} pages, B = {} bins), \
         {} MiB memory (P = {frames} frames) of {} KiB pages",
        a.cache >> 10,
        n / u64::from(first),
        a.memory >> 20,
        a.page_size >> 10
    );
    let mut header = format!(
        "{:>6} {:>8} {:>7} {:>10} {:>7}",
        "U", "U (MiB)", "C_min", "C_avg", "C_max"
    );
    if mc {
        header += &format!(" {:>20}", "Monte Carlo C");
    }
    println!("{header}");
    for p in points.iter().filter(|p| p.assoc == first) {
        let mut line = format!(
            "{:>6} {:>8.3} {:>7} {:>10.3} {:>7}",
            p.pages, p.mib, p.c_min, p.c_avg, p.c_max
        );
        if let Some(m) = p.mc_conflicts {
            line += &format!(" {:>20}", format!("{:.3} ± {:.3}", m.mean, m.std_err));
        }
        println!("{line}");
    }
    println!();
    println!("Figure 4. Random mapping conflicts C_avg - C_min by associativity (N = {n} pages)");
    let mut header = format!("{:>6} {:>8}", "U", "U (MiB)");
    for &assoc in assocs {
        header += &format!(" {:>9}", format!("A={assoc}"));
        if mc {
            header += &format!(" {:>17}", format!("MC A={assoc}"));
        }
    }
    println!("{header}");
    for row in points.chunks(assocs.len()) {
        let mut line = format!("{:>6} {:>8.3}", row[0].pages, row[0].mib);
        for p in row {
            line += &format!(" {:>9.3}", p.mapping_conflicts);
            if let Some(m) = p.mc_conflicts {
                line += &format!(
                    " {:>17}",
                    format!("{:.3} ± {:.3}", m.mean - p.c_min as f64, m.std_err)
                );
            }
        }
        println!("{line}");
    }
    if mc {
        let worst = points
            .iter()
            .filter_map(|p| {
                let m = p.mc_conflicts?;
                let se = p.c_std_dev / f64::from(m.samples).sqrt();
                (se > 0.0).then(|| ((m.mean - p.c_avg) / se).abs())
            })
            .fold(0.0f64, f64::max);
        println!();
        println!(
            "Monte Carlo: {} trials of random placement through the OS model (pool {} KiB at the \
             bottom of a randomly ordered LRU list, xoshiro256++ seed {}); largest |MC - model| = \
             {worst:.2} model standard errors over {} points.",
            a.monte_carlo,
            a.pool >> 10,
            a.seed,
            points.len()
        );
    }
}

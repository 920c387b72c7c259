//! `pmlab kv`: Redis_JMP (SpaceJMP §5.3) — a key-value store in a lockable segment that
//! every client switches into: create, set, get, check, recover, and the benchmark
//! beside the real Redis (Figures 10a–10c).

use std::path::PathBuf;

use anyhow::{Context, bail};
use pmlab_kvjmp::bench::client::{ClientSpec, Target, run_client};
use pmlab_kvjmp::{KvStore, Persist};
use pmlab_vas::Mode;
use pmlab_vas::native::MechanismChoice;

use super::{kv_bench, kv_stress};

/// Arguments of `pmlab kv`.
#[derive(clap::Args)]
pub struct Args {
    /// The registry directory (default: $PMLAB_VAS_DIR, else /dev/shm/pmlab-vas).
    #[arg(long, global = true)]
    dir: Option<PathBuf>,
    /// How a client switches into the store: auto (protection keys where the CPU has
    /// them, else mprotect), pkeys, mprotect, or resident (no system call per switch;
    /// the store stays mapped, with the rights the kernel granted, and reachable from
    /// the client between requests). `bench` measures every available one unless this
    /// names one.
    #[arg(long, global = true)]
    mechanism: Option<String>,
    /// How far a SET is durable when it returns: power (written back with clwb and
    /// fenced: survives power loss on persistent memory; the default) or process (the
    /// same transaction ordered by the compiler alone: survives any process being
    /// killed, like Redis's default configuration). `bench` measures both unless this
    /// names one.
    #[arg(long, global = true)]
    persist: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Create a store: its segment `kv.NAME` and VASes `kv.NAME.r`, `kv.NAME.w`.
    Create {
        /// The store's name.
        name: String,
        /// Segment size (e.g. 64MiB).
        #[arg(long, default_value = "64MiB")]
        size: String,
        /// Permission bits of the segment and VASes (octal): who may write, who read.
        #[arg(long, default_value = "644")]
        mode: String,
        /// Seed of the store's key hash.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// SET KEY VALUE (switches in with the exclusive lock; one transaction).
    Set {
        /// The store.
        #[arg(long)]
        store: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// GET KEY (switches in with the shared lock); prints the value, or (nil).
    Get {
        /// The store.
        #[arg(long)]
        store: String,
        /// The key.
        key: String,
    },
    /// Check the store's structure (tables, chains, heap, counts).
    Check {
        /// The store.
        #[arg(long)]
        store: String,
    },
    /// Take the exclusive lock and recover the store after a writer died in it.
    Recover {
        /// The store.
        #[arg(long)]
        store: String,
    },
    /// GET/SET throughput of 1..N client processes, beside the real redis-server and
    /// redis-benchmark (Figures 10a–10c).
    Bench(kv_bench::Args),
    /// Kill writer clients at random times (SIGKILL, seeded xoshiro256++); after every
    /// kill the store must recover, pass its checker and hold every acknowledged SET.
    Stress(kv_stress::Args),
    /// One writer of `stress` (SETs from --start on, each acknowledged, until killed).
    #[command(hide = true)]
    StressWorker {
        /// The first SET of the sequence to run.
        #[arg(long)]
        start: u64,
        /// The variant (see `stress --variant`).
        #[arg(long, default_value = "correct")]
        variant: String,
    },
    /// One client process of the benchmark (started by `bench`).
    #[command(hide = true)]
    BenchClient(ClientArgs),
}

/// Arguments of one benchmark client.
#[derive(clap::Args)]
pub struct ClientArgs {
    /// The store (with --dir).
    #[arg(long)]
    store: Option<String>,
    /// A redis-server socket instead.
    #[arg(long)]
    redis: Option<PathBuf>,
    #[arg(long)]
    requests: u64,
    #[arg(long)]
    set_pct: u32,
    #[arg(long)]
    keyspace: u64,
    #[arg(long)]
    value_len: usize,
    #[arg(long)]
    seed: u64,
}

/// Runs `pmlab kv`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let dir = a.dir.clone().unwrap_or_else(pmlab_vas::native::default_dir);
    let choice = match &a.mechanism {
        Some(m) => MechanismChoice::parse(m).map_err(|e| anyhow::anyhow!("--mechanism: {e}"))?,
        None => MechanismChoice::Auto,
    };
    let persist = match &a.persist {
        Some(p) => Some(Persist::parse(p).map_err(|e| anyhow::anyhow!("--persist: {e}"))?),
        None => None,
    };
    let domain = persist.unwrap_or_default();
    let open = |store: &str, write: bool| {
        KvStore::open_with(&dir, store, write, choice).map(|s| s.with_persist(domain))
    };
    match a.cmd {
        Cmd::Create {
            name,
            size,
            mode,
            seed,
        } => {
            let size =
                pmlab_spine::parse_size(&size).map_err(|e| anyhow::anyhow!("--size: {e}"))?;
            let mode = Mode::parse(&mode).map_err(|e| anyhow::anyhow!("--mode: {e}"))?;
            let s = KvStore::create(&dir, &name, size, mode, seed)?;
            println!(
                "created store {name}: segment {}",
                s.segment_path().display()
            );
        }
        Cmd::Set { store, key, value } => {
            let mut s = open(&store, true)?;
            s.set(key.as_bytes(), value.as_bytes())?;
            report_recovery(&s);
            println!("OK");
        }
        Cmd::Get { store, key } => {
            let mut s = open(&store, false)?;
            match s.get(key.as_bytes())? {
                Some(v) => println!("{}", String::from_utf8_lossy(&v)),
                None => println!("(nil)"),
            }
        }
        Cmd::Check { store } => {
            let mut s = open(&store, false)?;
            let r = s
                .check()
                .with_context(|| format!("store {store} is inconsistent"))?;
            println!(
                "store {store}: consistent: {} keys, buckets {:?}{}, {} blocks in use, {} free, {} heap bytes, {} SETs",
                r.contents.len(),
                r.buckets,
                if r.rehashing { " (rehashing)" } else { "" },
                r.blocks_used,
                r.blocks_free,
                r.heap_bytes,
                r.sets
            );
        }
        Cmd::Recover { store } => {
            let mut s = open(&store, true)?;
            let r = s.recover()?;
            println!(
                "store {store}: {} (dead lock holders cleared: {:?})",
                r.note,
                s.dead_holders()
            );
        }
        Cmd::Bench(b) => kv_bench::run(b, a.mechanism.is_some().then_some(choice), persist)?,
        Cmd::BenchClient(c) => bench_client(&dir, c, (choice, domain))?,
        Cmd::Stress(s) => kv_stress::run(s, choice, domain)?,
        Cmd::StressWorker { start, variant } => {
            pmlab_kvjmp::stress::worker(&dir, start, &variant, choice, domain)
                .map_err(|e| anyhow::anyhow!(e))?
        }
    }
    Ok(())
}

fn report_recovery(s: &KvStore) {
    if !s.dead_holders().is_empty() {
        eprintln!("cleared the lock of dead holder(s) {:?}", s.dead_holders());
    }
    if let Some(r) = s.last_recovery().filter(|r| r.repaired) {
        eprintln!("recovered: {}", r.note);
    }
}

fn bench_client(
    dir: &std::path::Path,
    c: ClientArgs,
    (mechanism, persist): (MechanismChoice, Persist),
) -> anyhow::Result<()> {
    let target = match (c.store, c.redis) {
        (Some(name), None) => Target::Store {
            dir: dir.to_path_buf(),
            name,
        },
        (None, Some(sock)) => Target::Redis(sock),
        _ => bail!("give exactly one of --store and --redis"),
    };
    let spec = ClientSpec {
        target,
        requests: c.requests,
        set_pct: c.set_pct,
        keyspace: c.keyspace.max(1),
        value_len: c.value_len,
        seed: c.seed,
        mechanism,
        persist,
    };
    run_client(&spec).map_err(|e| anyhow::anyhow!(e))
}

//! The benchmark of Figures 10a–10c: `redis-benchmark`'s GET/SET test mirrored for the
//! store, and the real `redis-server` driven by the real `redis-benchmark` over a Unix
//! socket beside it, in the same run.
//!
//! The workload is `redis-benchmark -t set,get -n N -c C -r K -d 4`: keys
//! `key:` + a 12-digit number drawn uniformly from `[0, K)`, 4-byte values of `x`, the
//! SET test first (it fills the key space), then the GET test; N requests in total
//! over C clients. Here every client is a process of its own that opens the store,
//! waits until all are ready, runs its share (xoshiro256++ seeded from the run's seed
//! and its index) and reports its first and last instant on `CLOCK_MONOTONIC`;
//! throughput is all requests over the span from the first start to the last end.
//! The SET-percentage sweep runs mixes (each request a SET with the given
//! probability) through the store and, for Redis, through pmlab's own RESP client
//! processes (one request in flight per connection, as `redis-benchmark` without
//! pipelining), since `redis-benchmark` runs one command per test and cannot mix.
//!
//! Every point is reported in the schema, one row per op: a mixed point gives
//! a `GET` row and a `SET` row with the same `set_pct`, each carrying that op's share
//! of the requests per second over the same span (the two add up to the point's total
//! rate). The store's rows also name the switch mechanism that ran (`mechanism`;
//! `null` for Redis): the store is measured with every mechanism asked for.

pub mod client;
pub mod redis;

use pmlab_vas::native::{Mechanism, MechanismChoice};
use serde::Serialize;

use crate::Persist;

/// One measured point of the JSON list.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Row {
    /// `pmlab` (the store, every SET durable against power loss: `--persist power`),
    /// `pmlab-process` (the store, every SET surviving any process kill: `--persist
    /// process`), `redis` (Redis's default persistence, as the server runs in memory),
    /// `redis-aof-always` (every SET appended and fsynced before the reply, AOF on
    /// tmpfs) or `redis-per-core` (independent default instances).
    pub system: String,
    /// Client processes (pmlab), connections (redis), or connections over all
    /// instances (redis-per-core).
    pub clients: u32,
    /// `GET` or `SET`; a mixed point of the sweep has one row of each.
    pub op: String,
    /// Percentage of requests that are SETs.
    pub set_pct: u32,
    /// This op's requests per second (median over the repetitions); at a mixed point,
    /// its share of the point's total rate.
    pub req_per_s: f64,
    /// The store's switch mechanism (`mprotect`, `resident`, `pkeys`); none for Redis.
    pub mechanism: Option<String>,
}

/// The workload's parameters, as `redis-benchmark`'s flags.
#[derive(Clone, Debug, Serialize)]
pub struct Workload {
    /// Requests per test over all clients (`-n`).
    pub requests: u64,
    /// Keys are drawn from `[0, keyspace)` (`-r`).
    pub keyspace: u64,
    /// Value bytes (`-d`).
    pub value_len: usize,
    /// The run's seed.
    pub seed: u64,
}

/// The key with number `n`, as `redis-benchmark -r` writes `key:__rand_int__`
/// (`key:` and 12 digits, zero-padded; larger numbers keep all their digits).
pub fn key(n: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(b"key:");
    let mut digits = [b'0'; 20];
    let (mut i, mut v) = (digits.len(), n);
    while v > 0 {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    // Done by hand rather than by `write!`: the client formats a key per request,
    // inside the span it measures.
    out.extend_from_slice(&digits[i.min(digits.len() - 12)..]);
}

/// The median of `xs` (which must not be empty).
pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// What `pmlab kv bench` runs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Client counts (`--clients 1,2`).
    pub clients: Vec<u32>,
    /// Repetitions (medians reported).
    pub reps: u32,
    /// The workload.
    pub workload: Workload,
    /// SET percentages of the sweep (Figure 10c) besides 0 and 100.
    pub sweep: Vec<u32>,
    /// Run the real Redis beside the store.
    pub vs_redis: bool,
    /// Run each Redis server on one CPU together with its clients (redis-benchmark,
    /// the sweep's RESP clients): a request and its reply then pass between processes
    /// on one CPU, with no wake-up of an idle CPU each way, which on a virtual machine
    /// costs tens of microseconds and cuts a single connection's rate several times.
    /// Off: the scheduler places them.
    pub redis_same_cpu: bool,
    /// Cores of this machine (Redis instances of `redis-per-core`).
    pub cores: u32,
    /// Segment bytes of the benchmark's stores.
    pub store_bytes: u64,
    /// The switch mechanisms the store is measured with (each decided on this machine).
    pub mechanisms: Vec<Mechanism>,
    /// The persistence domains the store is measured in.
    pub persists: Vec<Persist>,
}

/// The JSON `system` of the store measured in domain `p`: `pmlab` is the durable one
/// (its meaning before the domains were a choice), `pmlab-process` the other.
pub fn system_of(p: Persist) -> &'static str {
    match p {
        Persist::Power => "pmlab",
        Persist::Process => "pmlab-process",
    }
}

/// The Redis configuration of the same guarantee as the store in domain `p`, by its
/// JSON `system`: `fsync` of every SET before its reply for power loss, the default
/// (the server's memory) for process kills.
pub fn peer_of(p: Persist) -> &'static str {
    match p {
        Persist::Power => "redis-aof-always",
        Persist::Process => "redis",
    }
}

/// The mechanisms to measure when none is named: every one this machine can run —
/// `mprotect`, `resident`, and `pkeys` only where the CPU and kernel have them.
pub fn available_mechanisms() -> Vec<Mechanism> {
    let mut m = vec![Mechanism::Mprotect, Mechanism::Resident];
    if let Ok(k) = pmlab_vas::native::protect::decide(MechanismChoice::Pkeys) {
        m.push(k);
    }
    m
}

/// The choice that runs mechanism `m`.
pub fn choice_of(m: Mechanism) -> MechanismChoice {
    match m {
        Mechanism::Pkeys => MechanismChoice::Pkeys,
        Mechanism::Mprotect => MechanismChoice::Mprotect,
        Mechanism::Resident => MechanismChoice::Resident,
    }
}

/// (system, clients, op, set_pct, mechanism) -> samples.
type Samples = std::collections::BTreeMap<(String, u32, String, u32, Option<String>), Vec<f64>>;

/// Runs the plan; `command` starts one client process for a spec; `tick` is called
/// after every measurement with its label (for progress).
pub fn run(
    plan: &Plan,
    command: &dyn Fn(&client::ClientSpec) -> std::process::Command,
    tick: &mut dyn FnMut(&str),
) -> Result<Vec<Row>, String> {
    let mut samples = Samples::new();
    for rep in 0..plan.reps {
        for &c in &plan.clients {
            let salt = u64::from(rep) << 8 | u64::from(c);
            for &m in &plan.mechanisms {
                for &p in &plan.persists {
                    run_pmlab(plan, c, salt, (m, p), command, &mut samples, tick)?;
                }
            }
            if plan.vs_redis {
                run_redis(plan, c, salt, command, &mut samples, tick)?;
                if plan.persists.contains(&Persist::Power) {
                    run_redis_aof(plan, c, &mut samples, tick)?;
                }
                run_redis_per_core(plan, c, &mut samples, tick)?;
            }
        }
    }
    Ok(samples
        .into_iter()
        .map(|((system, clients, op, set_pct, mechanism), mut xs)| Row {
            system,
            clients,
            op,
            set_pct,
            req_per_s: median(&mut xs),
            mechanism,
        })
        .collect())
}

/// Records one measured point: a GET row unless it is all SETs, a SET row unless it
/// is all GETs.
fn add(
    samples: &mut Samples,
    system: &str,
    clients: u32,
    pct: u32,
    mechanism: Option<Mechanism>,
    r: client::Rates,
) {
    for (op, rps, present) in [("GET", r.get, pct < 100), ("SET", r.set, pct > 0)] {
        if present {
            let key = (
                system.to_string(),
                clients,
                op.to_string(),
                pct,
                mechanism.map(|m| m.name().to_string()),
            );
            samples.entry(key).or_default().push(rps);
        }
    }
}

/// SET test, GET test, then the sweep's mixes on a fresh store, switching by `m`,
/// SETs committing to domain `p`.
fn run_pmlab(
    plan: &Plan,
    c: u32,
    salt: u64,
    (m, p): (Mechanism, Persist),
    command: &dyn Fn(&client::ClientSpec) -> std::process::Command,
    samples: &mut Samples,
    tick: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("pmlab-kv-bench")
        .tempdir_in(shm_or_tmp())
        .map_err(|e| format!("temporary registry: {e}"))?;
    drop(
        crate::KvStore::create(
            dir.path(),
            "bench",
            plan.store_bytes,
            pmlab_vas::Mode(0o600),
            plan.workload.seed,
        )
        .map_err(|e| e.to_string())?,
    );
    let target = client::Target::Store {
        dir: dir.path().to_path_buf(),
        name: "bench".into(),
    };
    for pct in [100, 0].into_iter().chain(plan.sweep.iter().copied()) {
        let specs = client::specs(
            &target,
            c,
            plan.workload.requests,
            pct,
            &plan.workload,
            salt ^ u64::from(pct),
            choice_of(m),
        );
        let specs: Vec<_> = specs
            .into_iter()
            .map(|s| client::ClientSpec { persist: p, ..s })
            .collect();
        let rps = client::run_clients(&specs, command)?;
        add(samples, system_of(p), c, pct, Some(m), rps);
        tick(&format!("pmlab ({m}, {p}) {c} client(s) {pct}% SET"));
    }
    Ok(())
}

/// `redis-benchmark -c C` against one server, then the sweep through RESP clients.
fn run_redis(
    plan: &Plan,
    c: u32,
    salt: u64,
    command: &dyn Fn(&client::ClientSpec) -> std::process::Command,
    samples: &mut Samples,
    tick: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let cpu = plan.redis_same_cpu.then_some(0);
    let server = redis_get_set(plan, c, redis::Durability::Default, "redis", samples, tick)?;
    let target = client::Target::Redis(server.socket().to_path_buf());
    for &pct in &plan.sweep {
        let specs = client::specs(
            &target,
            c,
            plan.workload.requests,
            pct,
            &plan.workload,
            salt ^ u64::from(pct),
            MechanismChoice::Auto,
        );
        let pinned = |s: &client::ClientSpec| {
            let mut cmd = command(s);
            redis::pin(&mut cmd, cpu);
            cmd
        };
        let rps = client::run_clients(&specs, &pinned)?;
        add(samples, "redis", c, pct, None, rps);
        tick(&format!("redis {c} client(s) {pct}% SET"));
    }
    Ok(())
}

/// `redis-benchmark -c C` against one server that appends every SET to its AOF and
/// fsyncs it before replying (the AOF on tmpfs, as the store's segment): the peer of
/// the store's power domain. GET/SET only; the sweep is run against default Redis.
fn run_redis_aof(
    plan: &Plan,
    c: u32,
    samples: &mut Samples,
    tick: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let durability = redis::Durability::AofAlways;
    redis_get_set(plan, c, durability, "redis-aof-always", samples, tick).map(drop)
}

/// Starts one server of the given durability (on CPU 0 when pinned) and records
/// `redis-benchmark -c C`'s SET and GET rates as `system`; returns the server for
/// more requests.
fn redis_get_set(
    plan: &Plan,
    c: u32,
    durability: redis::Durability,
    system: &str,
    samples: &mut Samples,
    tick: &mut dyn FnMut(&str),
) -> Result<redis::RedisServer, String> {
    let cpu = plan.redis_same_cpu.then_some(0);
    let server = redis::RedisServer::start(cpu, durability)?;
    let running = redis::start_benchmark(server.socket(), c, &plan.workload, cpu)?;
    let (set, get) = redis::finish_benchmark(running)?;
    for (pct, r) in [
        (100, client::Rates { get: 0.0, set }),
        (0, client::Rates { get, set: 0.0 }),
    ] {
        add(samples, system, c, pct, None, r);
    }
    tick(&format!("{system} {c} client(s) GET/SET"));
    Ok(server)
}

/// The paper's "Redis 6x": independent instances (one per core, at most one per
/// client), each with its own `redis-benchmark` running at the same time and sharing
/// the clients and requests; their rates are summed.
fn run_redis_per_core(
    plan: &Plan,
    c: u32,
    samples: &mut Samples,
    tick: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let instances = c.min(plan.cores).max(1);
    // Instance i and its redis-benchmark on CPU i, when pinned.
    let cpu = |i: u32| plan.redis_same_cpu.then_some(i as usize);
    let servers = (0..instances)
        .map(|i| redis::RedisServer::start(cpu(i), redis::Durability::Default))
        .collect::<Result<Vec<_>, _>>()?;
    let w = Workload {
        requests: plan.workload.requests / u64::from(instances),
        ..plan.workload.clone()
    };
    let running = (0u32..)
        .zip(&servers)
        .map(|(i, s)| redis::start_benchmark(s.socket(), c / instances, &w, cpu(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut set, mut get) = (0.0, 0.0);
    for b in running {
        let (s, g) = redis::finish_benchmark(b)?;
        set += s;
        get += g;
    }
    add(
        samples,
        "redis-per-core",
        c,
        100,
        None,
        client::Rates { get: 0.0, set },
    );
    add(
        samples,
        "redis-per-core",
        c,
        0,
        None,
        client::Rates { get, set: 0.0 },
    );
    tick(&format!("redis-per-core {c} client(s) GET/SET"));
    Ok(())
}

/// `/dev/shm` where it exists (the stores' segments are memory), else the temp dir.
pub fn shm_or_tmp() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The command-line arguments of `pmlab kv bench-client` for `spec`.
pub fn client_args(spec: &client::ClientSpec) -> Vec<std::ffi::OsString> {
    let mut a: Vec<std::ffi::OsString> = Vec::new();
    match &spec.target {
        client::Target::Store { dir, name } => {
            a.extend([
                "--dir".into(),
                dir.clone().into_os_string(),
                "--store".into(),
                name.into(),
            ]);
        }
        client::Target::Redis(sock) => a.extend(["--redis".into(), sock.clone().into_os_string()]),
    }
    for (flag, v) in [
        ("--requests", spec.requests.to_string()),
        ("--set-pct", spec.set_pct.to_string()),
        ("--keyspace", spec.keyspace.to_string()),
        ("--value-len", spec.value_len.to_string()),
        ("--seed", spec.seed.to_string()),
        ("--mechanism", choice_name(spec.mechanism).to_string()),
        ("--persist", spec.persist.name().to_string()),
    ] {
        a.push(flag.into());
        a.push(v.into());
    }
    a
}

/// The `--mechanism` word of `c`.
pub fn choice_name(c: MechanismChoice) -> &'static str {
    match c {
        MechanismChoice::Auto => "auto",
        MechanismChoice::Pkeys => "pkeys",
        MechanismChoice::Mprotect => "mprotect",
        MechanismChoice::Resident => "resident",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_redis_benchmarks() {
        let mut k = Vec::new();
        for n in [0, 7, 99_999, 123_456_789_012, 1_234_567_890_123, u64::MAX] {
            super::key(n, &mut k);
            assert_eq!(k, format!("key:{n:012}").into_bytes());
        }
    }
}

//! One benchmark client process and the driver that starts several at once.
//!
//! A client prints `ready` once its store is open (or its connection made), waits for
//! a line on stdin, runs its requests and prints `start_ns end_ns requests sets`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use pmlab_vas::native::MechanismChoice;

use super::key;
use crate::resp::{Reply, RespClient};
use crate::{KvStore, Persist};

/// What one client process runs.
#[derive(Clone, Debug)]
pub struct ClientSpec {
    /// The store's registry directory and name, or a Redis socket.
    pub target: Target,
    /// Requests this client sends.
    pub requests: u64,
    /// Percentage of SETs.
    pub set_pct: u32,
    /// Key space.
    pub keyspace: u64,
    /// Value bytes.
    pub value_len: usize,
    /// Seed of this client's key and operation choices.
    pub seed: u64,
    /// How a store client switches (ignored for Redis).
    pub mechanism: MechanismChoice,
    /// The persistence domain of a store client's SETs (ignored for Redis).
    pub persist: Persist,
}

/// Where a client sends its requests.
#[derive(Clone, Debug)]
pub enum Target {
    /// A store in a registry.
    Store {
        /// Registry directory.
        dir: PathBuf,
        /// Store name.
        name: String,
    },
    /// A redis-server's Unix socket.
    Redis(PathBuf),
}

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process on the machine.
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

enum Backend {
    Store(Box<KvStore>),
    Redis(RespClient),
}

impl Backend {
    fn open(spec: &ClientSpec) -> Result<Backend, String> {
        let write = spec.set_pct > 0;
        match &spec.target {
            Target::Store { dir, name } => KvStore::open_with(dir, name, write, spec.mechanism)
                .map(|s| Backend::Store(Box::new(s.with_persist(spec.persist))))
                .map_err(|e| e.to_string()),
            Target::Redis(sock) => RespClient::connect(sock)
                .map(Backend::Redis)
                .map_err(|e| format!("{}: {e}", sock.display())),
        }
    }

    fn request(&mut self, set: bool, k: &[u8], v: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match self {
            Backend::Store(s) if set => s.set(k, v).map(drop).map_err(|e| e.to_string()),
            Backend::Store(s) => s.get_into(k, out).map(drop).map_err(|e| e.to_string()),
            Backend::Redis(c) => {
                let r = if set {
                    c.call(&[b"SET", k, v])
                } else {
                    c.call(&[b"GET", k])
                };
                match r.map_err(|e| e.to_string())? {
                    Reply::Error(e) => Err(e),
                    _ => Ok(()),
                }
            }
        }
    }
}

/// The client process's body: open, say ready, wait, run, report.
pub fn run_client(spec: &ClientSpec) -> Result<(), String> {
    let mut b = Backend::open(spec)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "ready")
        .and_then(|()| stdout.flush())
        .map_err(|e| e.to_string())?;
    let mut go = String::new();
    std::io::stdin()
        .read_line(&mut go)
        .map_err(|e| e.to_string())?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let value = vec![b'x'; spec.value_len];
    let (mut k, mut out) = (Vec::new(), Vec::new());
    let mut sets = 0u64;
    let start = monotonic_ns();
    for _ in 0..spec.requests {
        key(rng.gen_range(0..spec.keyspace), &mut k);
        let set = spec.set_pct > 0 && rng.gen_range(0..100) < spec.set_pct;
        sets += u64::from(set);
        b.request(set, &k, &value, &mut out)?;
    }
    let end = monotonic_ns();
    writeln!(stdout, "{start} {end} {} {sets}", spec.requests).map_err(|e| e.to_string())
}

/// What a set of concurrent clients achieved: GETs and SETs per second, each over the
/// same span (from the first client's start to the last one's end), so that the two
/// add up to the total rate and each is that op's share of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// GETs per second.
    pub get: f64,
    /// SETs per second.
    pub set: f64,
}

/// Runs `specs` as concurrent client processes, each started by `command(spec)`;
/// returns GETs and SETs per second over the span from the first start to the last end.
pub fn run_clients(
    specs: &[ClientSpec],
    command: &dyn Fn(&ClientSpec) -> Command,
) -> Result<Rates, String> {
    let mut children: Vec<(Child, BufReader<std::process::ChildStdout>)> = Vec::new();
    for s in specs {
        let mut c = command(s)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting a client: {e}"))?;
        let out = BufReader::new(c.stdout.take().expect("piped"));
        children.push((c, out));
    }
    for (c, out) in &mut children {
        let mut line = String::new();
        out.read_line(&mut line).map_err(|e| e.to_string())?;
        if line.trim() != "ready" {
            let _ = c.kill();
            return Err(format!(
                "a client did not get ready (said {line:?}; see its error above)"
            ));
        }
    }
    for (c, _) in &mut children {
        let _ = c.stdin.as_mut().expect("piped").write_all(b"go\n");
    }
    let (mut first, mut last, mut total, mut sets) = (u64::MAX, 0u64, 0u64, 0u64);
    for (mut c, mut out) in children {
        let mut line = String::new();
        out.read_line(&mut line).map_err(|e| e.to_string())?;
        let st = c.wait().map_err(|e| e.to_string())?;
        let f: Vec<u64> = line
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if !st.success() || f.len() != 4 || f[3] > f[2] {
            return Err(format!("a client failed ({st}); it reported {line:?}"));
        }
        first = first.min(f[0]);
        last = last.max(f[1]);
        total += f[2];
        sets += f[3];
    }
    let span = (last - first).max(1) as f64 / 1e9;
    Ok(Rates {
        get: (total - sets) as f64 / span,
        set: sets as f64 / span,
    })
}

/// Specs for `clients` processes sharing `requests` over `target` (store clients in
/// the power domain; the benchmark sets each spec's `persist`).
pub fn specs(
    target: &Target,
    clients: u32,
    requests: u64,
    set_pct: u32,
    w: &super::Workload,
    salt: u64,
    mechanism: MechanismChoice,
) -> Vec<ClientSpec> {
    (0..clients)
        .map(|i| ClientSpec {
            target: target.clone(),
            requests: requests / u64::from(clients),
            set_pct,
            keyspace: w.keyspace,
            value_len: w.value_len,
            seed: w.seed ^ (salt << 32) ^ u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            mechanism,
            persist: Persist::Power,
        })
        .collect()
}

/// A registry directory's display for errors.
pub fn show(p: &Path) -> String {
    p.display().to_string()
}

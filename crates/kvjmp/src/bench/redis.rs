//! The real peer: `redis-server` instances on Unix sockets in a temporary directory,
//! and the real `redis-benchmark` against them. A server runs either as Redis does by
//! default for a SET (served from memory: no snapshot during the run, no AOF) or with
//! `appendonly yes` and `appendfsync always` (every SET written to the append-only
//! file and fsynced before the reply), its directory on tmpfs (`/dev/shm`) like the
//! store's segment.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::resp::{Reply, RespClient};

/// How a Redis server makes a SET durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// In memory only (`--save "" --appendonly no`): an acknowledged SET survives any
    /// client's death, not the server's.
    Default,
    /// `--appendonly yes --appendfsync always`: fsynced before the reply.
    AofAlways,
}

impl Durability {
    fn args(self) -> &'static [&'static str] {
        match self {
            Durability::Default => &["--save", "", "--appendonly", "no"],
            Durability::AofAlways => &[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ],
        }
    }
}

/// A running `redis-server`, stopped when dropped.
pub struct RedisServer {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

/// Whether `program` can be run (`--version`).
pub fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The version line of `redis-server`.
pub fn version() -> Option<String> {
    let out = Command::new("redis-server")
        .arg("--version")
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Confines the process `cmd` starts to CPU `cpu` (when given), set in the child
/// before it executes the program.
pub fn pin(cmd: &mut Command, cpu: Option<usize>) -> &mut Command {
    use std::os::unix::process::CommandExt;
    if let Some(cpu) = cpu {
        // SAFETY: the closure runs in the forked child before exec and only calls
        // sched_setaffinity, a system call that is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
    }
    cmd
}

impl RedisServer {
    /// Starts `redis-server` listening only on a Unix socket in a new temporary
    /// directory on tmpfs, making SETs durable as `durability` says, on CPU `cpu` alone
    /// when given, and waits until it answers.
    pub fn start(cpu: Option<usize>, durability: Durability) -> Result<RedisServer, String> {
        if !installed("redis-server") {
            return Err(
                "redis-server is not installed (Debian: apt-get install redis-server redis-tools)"
                    .into(),
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("pmlab-redis")
            .tempdir_in(super::shm_or_tmp())
            .map_err(|e| format!("temporary directory: {e}"))?;
        let socket = dir.path().join("redis.sock");
        let child = pin(&mut Command::new("redis-server"), cpu)
            .args(["--port", "0", "--unixsocket"])
            .arg(&socket)
            .args(durability.args())
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting redis-server: {e}"))?;
        let server = RedisServer {
            child,
            socket,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = RespClient::connect(&server.socket) {
                if let Ok(Reply::Status(s)) = c.call(&[b"PING"]) {
                    if s == "PONG" {
                        return Ok(server);
                    }
                }
            }
            if Instant::now() > deadline {
                return Err("redis-server did not answer on its socket within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its Unix socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Empties it (`FLUSHALL`).
    pub fn flush(&self) -> Result<(), String> {
        let mut c = RespClient::connect(&self.socket).map_err(|e| e.to_string())?;
        c.call(&[b"FLUSHALL"]).map(drop).map_err(|e| e.to_string())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A started `redis-benchmark -s SOCKET -t set,get -n N -c C -r K -d D --csv`, on CPU
/// `cpu` alone when given.
pub fn start_benchmark(
    socket: &Path,
    clients: u32,
    w: &super::Workload,
    cpu: Option<usize>,
) -> Result<Child, String> {
    if !installed("redis-benchmark") {
        return Err(
            "redis-benchmark is not installed (Debian: apt-get install redis-tools)".into(),
        );
    }
    pin(&mut Command::new("redis-benchmark"), cpu)
        .arg("-s")
        .arg(socket)
        .args(["-t", "set,get", "--csv"])
        .args(["-n", &w.requests.to_string()])
        .args(["-c", &clients.to_string()])
        .args(["-r", &w.keyspace.to_string()])
        .args(["-d", &w.value_len.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("starting redis-benchmark: {e}"))
}

/// Waits for a benchmark and reads its SET and GET requests per second.
pub fn finish_benchmark(child: Child) -> Result<(f64, f64), String> {
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("redis-benchmark failed ({}): {text}", out.status));
    }
    parse_csv(&text)
}

/// The SET and GET rows' `rps` of `redis-benchmark --csv` output.
pub fn parse_csv(text: &str) -> Result<(f64, f64), String> {
    let rps = |test: &str| {
        text.lines()
            .enumerate()
            .find(|(_, l)| l.starts_with(&format!("\"{test}\",")))
            .ok_or_else(|| format!("redis-benchmark printed no {test} row: {text:?}"))
            .and_then(|(i, l)| {
                let field = l.split(',').nth(1).unwrap_or("").trim_matches('"');
                field.parse::<f64>().map_err(|_| {
                    format!(
                        "redis-benchmark output line {}: field rps {field:?} is not a number",
                        i + 1
                    )
                })
            })
    };
    Ok((rps("SET")?, rps("GET")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_redis_benchmark_csv_and_names_a_bad_field() {
        let t = "\"test\",\"rps\",\"avg_latency_ms\"\n\"SET\",\"17809.44\",\"0.053\"\n\"GET\",\"21186.44\",\"0.044\"\n";
        assert_eq!(parse_csv(t).unwrap(), (17809.44, 21186.44));
        let e = parse_csv("\"SET\",\"x\"\n\"GET\",\"1\"").unwrap_err();
        assert!(e.contains("line 1") && e.contains("rps"), "{e}");
        assert!(parse_csv("").is_err());
    }
}

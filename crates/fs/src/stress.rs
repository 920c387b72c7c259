//! `pmlab fs stress`: client processes run a seeded random workload while the driver
//! kills clients and the service itself with SIGKILL; after every kill the volume is
//! recovered (the service's start-up replays its log and reclaims orphans) and must
//! pass fsck with no error.
//!
//! Every random choice comes from xoshiro256++ (`rand_xoshiro::Xoshiro256PlusPlus`)
//! seeded from the run's seed, so a run is reproducible up to the timing of the kills.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::error::{FsError, Result};
use crate::pxfs::{OpenFlags, Pxfs};
use crate::service;

/// What a stress run does.
#[derive(Clone, Debug)]
pub struct Config {
    /// The volume directory (created if it does not exist).
    pub volume: PathBuf,
    /// Rounds; each ends with a SIGKILL (of the service on even rounds, of one client on
    /// odd rounds, then of everything).
    pub kills: u32,
    /// Client processes per round.
    pub clients: u32,
    /// Seed of the run.
    pub seed: u64,
    /// The `pmlab` executable (spawned as `fs serve` and as `fs stress-worker`).
    pub exe: PathBuf,
}

/// What one round saw.
#[derive(Clone, Debug)]
pub struct Round {
    /// Round number.
    pub round: u32,
    /// What was killed first: "service" or "client N".
    pub killed: String,
    /// Milliseconds the workload ran before the kill.
    pub ran_ms: u64,
    /// fsck's counts after recovery.
    pub summary: crate::fsck::Summary,
    /// fsck's notes before recovery (a committed transaction in the log, orphans).
    pub notes_before_recovery: usize,
}

/// The workload of one client process: random namespace and data operations in its own
/// directory and a shared one, until the connection fails.
pub fn worker(socket: &Path, seed: u64) -> Result<()> {
    let fs = Pxfs::mount(socket)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mine = format!("/w{seed}");
    let _ = fs.mkdir("/shared", 0o777);
    let _ = fs.mkdir(&mine, 0o755);
    loop {
        let dir = if rng.gen_bool(0.3) {
            "/shared".to_string()
        } else {
            mine.clone()
        };
        let path = format!("{dir}/n{}", rng.gen_range(0..24));
        let r = match rng.gen_range(0..10) {
            0..=3 => fs.create(&path, 0o644).and_then(|fd| {
                let len = rng.gen_range(0..20_000);
                fs.write(fd, &vec![seed as u8; len])?;
                fs.close(fd)
            }),
            4 => fs.unlink(&path),
            5 => fs.rename(&path, &format!("{dir}/n{}", rng.gen_range(0..24))),
            6 => fs.mkdir(&format!("{path}d"), 0o755),
            7 => fs.rmdir(&format!("{path}d")),
            8 => fs.open(&path, OpenFlags::default()).and_then(|fd| {
                let mut b = vec![0u8; 4096];
                fs.read(fd, &mut b)?;
                fs.close(fd)
            }),
            _ => fs.sync(),
        };
        match r {
            Ok(()) => {}
            // Races with other clients are expected; a lost service is the end.
            Err(
                FsError::NotFound(_)
                | FsError::Exists(_)
                | FsError::NotEmpty(_)
                | FsError::WrongKind(_),
            ) => {}
            Err(FsError::Refused(e)) if e.contains("batch rejected") => {}
            Err(e) => return Err(e),
        }
    }
}

fn kill(c: &mut Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// Runs the stress test; returns one report per round, or the first fsck failure.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Round)) -> Result<Vec<Round>> {
    if !cfg.volume.exists() {
        crate::volume::create(
            &cfg.volume,
            &crate::layout::Params::default(),
            crate::mkfs::RootOwner::current_user(0o777),
        )?;
    }
    let sock = cfg.volume.with_extension("sock");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let mut rounds = Vec::new();
    for round in 0..cfg.kills {
        let _ = std::fs::remove_file(&sock);
        let mut svc = Command::new(&cfg.exe)
            .args(["fs", "serve"])
            .arg(&cfg.volume)
            .arg("--socket")
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| FsError::io("spawn the service", e))?;
        let t0 = Instant::now();
        while !sock.exists() {
            if t0.elapsed() > Duration::from_secs(20) {
                kill(&mut svc);
                return Err(FsError::Protocol("the service did not start".into()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut workers: Vec<Child> = (0..cfg.clients)
            .map(|i| {
                Command::new(&cfg.exe)
                    .args(["fs", "stress-worker", "--socket"])
                    .arg(&sock)
                    .arg("--seed")
                    .arg((cfg.seed.wrapping_mul(1000) + round as u64 * 100 + i as u64).to_string())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| FsError::io("spawn a worker", e))
            })
            .collect::<Result<_>>()?;
        let ran_ms = rng.gen_range(50..400);
        std::thread::sleep(Duration::from_millis(ran_ms));
        let killed = if round % 2 == 0 || workers.is_empty() {
            kill(&mut svc);
            "service".to_string()
        } else {
            let v = rng.gen_range(0..workers.len());
            kill(&mut workers[v]);
            // The others keep going for a moment: the service must reclaim the dead
            // client's leases and reservations while they run.
            std::thread::sleep(Duration::from_millis(rng.gen_range(20..200)));
            format!("client {v}")
        };
        for w in &mut workers {
            kill(w);
        }
        kill(&mut svc);
        let before = crate::fsck::fsck_volume(&cfg.volume)
            .map(|r| {
                r.findings
                    .iter()
                    .filter(|f| f.severity == crate::fsck::Severity::Note)
                    .count()
            })
            .unwrap_or(0);
        // Recovery is what the service does when it starts.
        let _ = std::fs::remove_file(&sock);
        service::spawn(&cfg.volume, &sock, service::Config::default())?.stop()?;
        let report = crate::fsck::fsck_volume(&cfg.volume)?;
        if !report.clean() {
            let text: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
            return Err(FsError::Corrupt {
                what: "volume after recovery",
                at: crate::error::Location { page: 0, offset: 0 },
                why: format!("round {round} (killed {killed}):\n{}", text.join("\n")),
            });
        }
        let r = Round {
            round,
            killed,
            ran_ms,
            summary: report.summary,
            notes_before_recovery: before,
        };
        progress(&r);
        rounds.push(r);
    }
    let _ = std::fs::remove_file(&sock);
    Ok(rounds)
}

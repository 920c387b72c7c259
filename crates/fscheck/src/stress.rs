//! `pmlab fs stress`: client processes run a seeded random workload while the driver
//! kills clients and the service itself with SIGKILL; after every kill the volume is
//! recovered (the service's start-up replays its log and reclaims orphans), must pass
//! fsck with no error, and must keep every promise in the clients' fsync oracle logs
//! ([`oracle`]): what an fsync acknowledged is there, byte for byte, unless a later
//! operation changed it, and nothing is half-visible.
//!
//! Each client works alone in its own directory (`/c<i>`, kept across rounds, so that
//! promises made in one round are checked after every later kill too). The oracle logs
//! live beside the volume, in `<volume>.oracle/`, one per client and round.
//!
//! Every random choice comes from xoshiro256++ (`rand_xoshiro::Xoshiro256PlusPlus`)
//! seeded from the run's seed, so a run is reproducible up to the timing of the kills.

pub mod oracle;
pub mod worker;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use pmlab_native::scm_model::{WRITE_MODEL_ENV, WriteModel};

pub use oracle::{Expectations, State, Violation};
use pmlab_fs::error::{FsError, Result};
use pmlab_fs::pxfs::Pxfs;
use pmlab_fs::service;
pub use worker::{WorkerArgs, worker};

/// A process the driver starts.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Role {
    /// The trusted service of `volume` on `socket`.
    Serve {
        /// The volume directory.
        volume: PathBuf,
        /// The socket to listen on.
        socket: PathBuf,
    },
    /// One client.
    Worker {
        /// The service's socket.
        socket: PathBuf,
        /// The workload's seed.
        seed: u64,
        /// The client's own directory in the volume.
        dir: String,
        /// Its oracle log.
        oracle: PathBuf,
    },
}

impl Role {
    /// The `pmlab` command that plays this role: `pmlab fs serve` or
    /// `pmlab fs stress-worker`.
    fn command(&self, pmlab: &Path) -> Command {
        let mut c = Command::new(pmlab);
        match self {
            Role::Serve { volume, socket } => {
                c.args(["fs", "serve"])
                    .arg(volume)
                    .arg("--socket")
                    .arg(socket);
            }
            Role::Worker {
                socket,
                seed,
                dir,
                oracle,
            } => {
                c.args(["fs", "stress-worker", "--socket"])
                    .arg(socket)
                    .arg("--seed")
                    .arg(seed.to_string())
                    .arg("--dir")
                    .arg(dir)
                    .arg("--oracle")
                    .arg(oracle);
            }
        }
        c
    }
}

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
    /// The `pmlab` executable that plays the service (`pmlab fs serve`) and the clients
    /// (`pmlab fs stress-worker`).
    pub pmlab: PathBuf,
    /// The SCM write model of the service and the clients (they get it through
    /// `pmlab_native::scm_model::WRITE_MODEL_ENV`).
    pub scm_model: WriteModel,
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
    pub summary: pmlab_fs::fsck::Summary,
    /// fsck's notes before recovery (a committed transaction in the log, orphans).
    pub notes_before_recovery: usize,
    /// fsync acknowledgements the clients logged this round.
    pub acks: usize,
    /// Paths in the clients' directories checked against the oracle.
    pub checked: usize,
}

/// Directory of the oracle logs of the run on `volume`.
pub fn oracle_dir(volume: &Path) -> PathBuf {
    volume.with_extension("oracle")
}

/// Every client directory's contents, read through a client of a service started (and
/// so recovered) in this process.
fn read_back(volume: &Path, sock: &Path, clients: u32) -> Result<BTreeMap<String, State>> {
    let _ = std::fs::remove_file(sock);
    let svc = service::spawn(volume, sock, service::Config::default())?;
    let read = (|| {
        let fs = Pxfs::mount(sock)?;
        let mut all = BTreeMap::new();
        for i in 0..clients {
            let dir = format!("/c{i}");
            match fs.mkdir(&dir, 0o755) {
                Ok(()) => fs.sync()?,
                Err(FsError::Exists(_)) => {}
                Err(e) => return Err(e),
            }
            all.extend(oracle::scan(&fs, &dir)?);
        }
        Ok(all)
    })();
    svc.stop()?;
    read
}

fn kill(c: &mut Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// Runs the stress test; returns one report per round, or the first fsck failure or
/// broken oracle promise.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Round)) -> Result<Vec<Round>> {
    if !cfg.volume.exists() {
        pmlab_fs::volume::create(
            &cfg.volume,
            &pmlab_fs::layout::Params::default(),
            pmlab_fs::mkfs::RootOwner::current_user(0o777),
        )?;
    }
    let sock = cfg.volume.with_extension("sock");
    let logs = oracle_dir(&cfg.volume);
    std::fs::create_dir_all(&logs)
        .map_err(|e| FsError::io(format!("mkdir {}", logs.display()), e))?;
    let mut checked = read_back(&cfg.volume, &sock, cfg.clients)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let mut rounds = Vec::new();
    for round in 0..cfg.kills {
        let log_of = |i: u32| logs.join(format!("r{round}.c{i}.log"));
        let (killed, ran_ms) = crash_round(cfg, &sock, round, &log_of, &mut rng)?;
        let before = pmlab_fs::fsck::fsck_volume(&cfg.volume)
            .map(|r| {
                r.findings
                    .iter()
                    .filter(|f| f.severity == pmlab_fs::fsck::Severity::Note)
                    .count()
            })
            .unwrap_or(0);
        // Recovery is what the service does when it starts; the oracle reads the
        // clients' directories back through it.
        let actual = read_back(&cfg.volume, &sock, cfg.clients)?;
        let summary = check_clean(&cfg.volume, round, &killed)?;
        let mut expect = Expectations::new(&checked);
        for i in 0..cfg.clients {
            expect.apply_log(&log_of(i))?;
        }
        check_oracle(&expect, &actual, round, &killed, &logs)?;
        for i in 0..cfg.clients {
            let _ = std::fs::remove_file(log_of(i));
        }
        let r = Round {
            round,
            killed,
            ran_ms,
            summary,
            notes_before_recovery: before,
            acks: expect.acks(),
            checked: actual.len(),
        };
        checked = actual;
        progress(&r);
        rounds.push(r);
    }
    let _ = std::fs::remove_file(&sock);
    Ok(rounds)
}

/// One round's run: starts the service and the workers, lets them run for a random
/// while, kills the service (even rounds) or one worker (odd rounds), then everything.
/// Returns what was killed first and how long the round ran, in milliseconds.
fn crash_round(
    cfg: &Config,
    sock: &Path,
    round: u32,
    log_of: &dyn Fn(u32) -> PathBuf,
    rng: &mut Xoshiro256PlusPlus,
) -> Result<(String, u64)> {
    let mut svc = start_service(cfg, sock)?;
    let mut workers: Vec<Child> = (0..cfg.clients)
        .map(|i| {
            Role::Worker {
                socket: sock.to_path_buf(),
                seed: cfg.seed.wrapping_mul(1000) + round as u64 * 100 + i as u64,
                dir: format!("/c{i}"),
                oracle: log_of(i),
            }
            .command(&cfg.pmlab)
            .env(WRITE_MODEL_ENV, cfg.scm_model.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| FsError::io("spawn a worker", e))
        })
        .collect::<Result<_>>()?;
    let ran_ms = rng.gen_range(50..400);
    std::thread::sleep(Duration::from_millis(ran_ms));
    let killed = if round.is_multiple_of(2) || workers.is_empty() {
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
    Ok((killed, ran_ms))
}

/// Starts `pmlab fs serve` on the volume and waits for its socket to appear.
fn start_service(cfg: &Config, sock: &Path) -> Result<Child> {
    let _ = std::fs::remove_file(sock);
    let serve = Role::Serve {
        volume: cfg.volume.clone(),
        socket: sock.to_path_buf(),
    };
    let mut svc = serve
        .command(&cfg.pmlab)
        .env(WRITE_MODEL_ENV, cfg.scm_model.to_string())
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
    Ok(svc)
}

/// fsck after recovery: the volume's summary, or every finding as an error.
fn check_clean(volume: &Path, round: u32, killed: &str) -> Result<pmlab_fs::fsck::Summary> {
    let report = pmlab_fs::fsck::fsck_volume(volume)?;
    if !report.clean() {
        let text: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
        return Err(FsError::Corrupt {
            what: "volume after recovery",
            at: pmlab_fs::error::Location { page: 0, offset: 0 },
            why: format!("round {round} (killed {killed}):\n{}", text.join("\n")),
        });
    }
    Ok(report.summary)
}

/// The fsync oracle's promises against what was read back.
fn check_oracle(
    expect: &Expectations,
    actual: &BTreeMap<String, State>,
    round: u32,
    killed: &str,
    logs: &Path,
) -> Result<()> {
    let broken = expect.check(actual);
    if broken.is_empty() {
        return Ok(());
    }
    let text: Vec<String> = broken.iter().map(|v| v.to_string()).collect();
    Err(FsError::Corrupt {
        what: "fsync oracle",
        at: pmlab_fs::error::Location { page: 0, offset: 0 },
        why: format!(
            "round {round} (killed {killed}), logs kept in {}:\n{}",
            logs.display(),
            text.join("\n")
        ),
    })
}

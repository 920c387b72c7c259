//! One client process of `pmlab fs stress`: a seeded random workload in the client's own
//! directory, announcing and acknowledging what it does in its oracle log.
//!
//! The client is the only writer of its directory, so it knows exactly what every path
//! should hold and only issues operations that must succeed. Files are never overwritten
//! in place (a torn in-place overwrite is allowed by POSIX and would blur the check):
//! a new name is created and written; an existing one is replaced by writing a temporary
//! file and renaming it over the name, the pattern applications use for atomic updates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use rand::{Rng, RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::oracle::{OracleLog, State, read_all, scan};
use pmlab_fs::error::{FsError, Result};
use pmlab_fs::pxfs::{OpenFlags, Pxfs};

/// What one client process is told.
#[derive(Clone, Debug)]
pub struct WorkerArgs {
    /// The service's socket.
    pub socket: PathBuf,
    /// Seed of the workload (xoshiro256++).
    pub seed: u64,
    /// The client's own directory in the volume (for example `/c0`); it must exist.
    pub dir: String,
    /// The oracle log to append to (outside the volume).
    pub oracle: PathBuf,
}

struct Client {
    fs: Pxfs,
    log: OracleLog,
    model: BTreeMap<String, State>,
    /// Paths changed since they were last acknowledged.
    dirty: BTreeSet<String>,
    rng: Xoshiro256PlusPlus,
    dir: String,
}

/// Runs the workload until the service goes away (or the process is killed). Returns
/// the error that ended it; a disagreement with the model is also written to the log.
pub fn worker(args: &WorkerArgs) -> Result<()> {
    let fs = Pxfs::mount(&args.socket)?;
    let log = OracleLog::open(&args.oracle)?;
    let model = scan(&fs, &args.dir)?;
    let mut c = Client {
        fs,
        log,
        model,
        dirty: BTreeSet::new(),
        rng: Xoshiro256PlusPlus::seed_from_u64(args.seed),
        dir: args.dir.clone(),
    };
    loop {
        if let Err(e) = c.step() {
            if disagrees(&e) {
                let _ = c.log.fail(&format!("{}: {e}", c.dir));
            }
            return Err(e);
        }
    }
}

/// Whether an error means the file system contradicted the model, rather than that the
/// service went away (killed by the driver) or the run is over.
fn disagrees(e: &FsError) -> bool {
    matches!(
        e,
        FsError::NotFound(_)
            | FsError::Exists(_)
            | FsError::NotEmpty(_)
            | FsError::WrongKind(_)
            | FsError::BadHandle(_)
            | FsError::Denied(_)
            | FsError::Corrupt { .. }
    )
}

impl Client {
    fn state(&self, path: &str) -> State {
        self.model.get(path).copied().unwrap_or(State::Absent)
    }

    fn set(&mut self, path: &str, s: State) {
        if s == State::Absent {
            self.model.remove(path);
        } else {
            self.model.insert(path.to_string(), s);
        }
        self.dirty.insert(path.to_string());
    }

    fn pick(&mut self, want: impl Fn(State) -> bool) -> Option<String> {
        let hits: Vec<&String> = self
            .model
            .iter()
            .filter(|(p, s)| want(**s) && !p.contains("/t"))
            .map(|(p, _)| p)
            .collect();
        if hits.is_empty() {
            return None;
        }
        Some(hits[self.rng.gen_range(0..hits.len())].clone())
    }

    fn step(&mut self) -> Result<()> {
        let name = format!("{}/n{}", self.dir, self.rng.gen_range(0..16));
        match self.rng.gen_range(0..12) {
            0..=3 => self.write(&name),
            4 => match self.pick(|s| matches!(s, State::File { .. })) {
                Some(p) => {
                    self.log.may(&p, State::Absent)?;
                    self.fs.unlink(&p)?;
                    self.set(&p, State::Absent);
                    Ok(())
                }
                None => Ok(()),
            },
            5 => match self.pick(|s| matches!(s, State::File { .. })) {
                Some(from) if from != name && self.state(&name) != State::Dir => {
                    let s = self.state(&from);
                    self.log.may(&from, State::Absent)?;
                    self.log.may(&name, s)?;
                    self.fs.rename(&from, &name)?;
                    self.set(&from, State::Absent);
                    self.set(&name, s);
                    Ok(())
                }
                _ => Ok(()),
            },
            6 => {
                let d = format!("{name}d");
                if self.state(&d) != State::Absent {
                    return Ok(());
                }
                self.log.may(&d, State::Dir)?;
                self.fs.mkdir(&d, 0o755)?;
                self.set(&d, State::Dir);
                Ok(())
            }
            7 => match self.pick(|s| s == State::Dir) {
                Some(d) => {
                    self.log.may(&d, State::Absent)?;
                    self.fs.rmdir(&d)?;
                    self.set(&d, State::Absent);
                    Ok(())
                }
                None => Ok(()),
            },
            8 => match self.pick(|s| matches!(s, State::File { .. })) {
                Some(p) => self.verify(&p),
                None => Ok(()),
            },
            9 => match self.pick(|s| matches!(s, State::File { .. })) {
                Some(p) => {
                    let fd = self.fs.open(&p, OpenFlags::default())?;
                    self.fs.fsync(fd)?;
                    self.fs.close(fd)?;
                    self.ack(&p)
                }
                None => Ok(()),
            },
            _ => {
                self.fs.sync()?;
                for p in std::mem::take(&mut self.dirty) {
                    let s = self.state(&p);
                    self.log.ack(&p, s)?;
                }
                Ok(())
            }
        }
    }

    fn ack(&mut self, path: &str) -> Result<()> {
        self.dirty.remove(path);
        let s = self.state(path);
        self.log.ack(path, s)
    }

    /// Creates `path` with fresh random contents, directly if the name is free, else
    /// through a temporary file renamed over it.
    fn write(&mut self, path: &str) -> Result<()> {
        if self.state(path) == State::Dir {
            return Ok(());
        }
        let mut data = vec![0u8; self.rng.gen_range(0..20_000)];
        self.rng.fill_bytes(&mut data);
        let full = State::file(&data);
        let fsync = self.rng.gen_bool(0.25);
        if self.state(path) == State::Absent {
            return self.create(path, &data, fsync);
        }
        let tmp = format!("{}/t{}", self.dir, self.rng.gen_range(0..4));
        if self.state(&tmp) != State::Absent {
            // Left by a killed predecessor; never overwrite in place.
            self.log.may(&tmp, State::Absent)?;
            self.fs.unlink(&tmp)?;
            self.set(&tmp, State::Absent);
        }
        self.create(&tmp, &data, false)?;
        self.log.may(&tmp, State::Absent)?;
        self.log.may(path, full)?;
        self.fs.rename(&tmp, path)?;
        self.set(&tmp, State::Absent);
        self.set(path, full);
        if fsync {
            self.fs.sync()?;
            self.ack(&tmp)?;
            self.ack(path)?;
        }
        Ok(())
    }

    /// Creates a new file holding `data`: it may show up empty (created, size not yet
    /// shipped) or whole, never anything else.
    fn create(&mut self, path: &str, data: &[u8], fsync: bool) -> Result<()> {
        self.log.may(path, State::file(b""))?;
        self.log.may(path, State::file(data))?;
        let fd = self.fs.create(path, 0o644)?;
        self.set(path, State::file(b""));
        self.fs.write(fd, data)?;
        self.set(path, State::file(data));
        if fsync {
            self.fs.fsync(fd)?;
            self.ack(path)?;
        }
        self.fs.close(fd)
    }

    /// Reads a file back while running: it must hold what was written.
    fn verify(&mut self, path: &str) -> Result<()> {
        let want = self.state(path);
        let size = self.fs.stat(path)?.size;
        let got = State::file(&read_all(&self.fs, path, size)?);
        if got != want {
            return Err(FsError::Corrupt {
                what: "file contents read back",
                at: pmlab_fs::error::Location { page: 0, offset: 0 },
                why: format!("{path}: read back {got}, wrote {want}"),
            });
        }
        Ok(())
    }
}

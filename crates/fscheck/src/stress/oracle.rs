//! The fsync oracle of `pmlab fs stress`: what each client was promised, and the check
//! that a recovered volume keeps every promise.
//!
//! Each client process works alone in its own directory and keeps an exact model of it.
//! It appends to its oracle log, a plain file outside the volume written with one
//! `write(2)` per line (so a SIGKILL of the client cannot lose a line it finished):
//!
//! - `may <path> <state>` *before* an operation, for every state the operation may leave
//!   `path` in should the client die at any point (a created-then-written file may show
//!   up empty or complete; a rename may remove its source);
//! - `ack <path> <state>` *after* an fsync (or sync) returned, for what is now
//!   guaranteed;
//! - `fail <message>` when the client saw its file system disagree with its model
//!   (a read returning other bytes than it wrote, an operation refused that must work).
//!
//! After a kill, recovery and fsck, the driver reads the file system back and requires,
//! for every path, that its state is the last acknowledged one (or the state checked
//! after the previous round) or one that a `may` line announced after it. So an fsynced
//! file exists with exactly its acknowledged contents unless a later operation changed
//! it, and a file is never half-visible: a state no operation could leave (a torn write,
//! stale data under a new size, a name nobody created) is a violation.
//!
//! A state is `-` (absent), `D` (a directory) or `F:<len>:<crc32>` (a file with that
//! length and CRC-32 of its bytes).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write;
use std::path::Path;

use pmlab_fs::error::{FsError, Result};
use pmlab_fs::inode::Kind;
use pmlab_fs::pxfs::{OpenFlags, Pxfs};

/// What a path holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    /// Nothing by that name.
    Absent,
    /// A directory.
    Dir,
    /// A regular file of `len` bytes whose CRC-32 is `crc`.
    File {
        /// Length in bytes.
        len: u64,
        /// CRC-32 (IEEE) of the bytes.
        crc: u32,
    },
}

impl State {
    /// The state of a file holding exactly `bytes`.
    pub fn file(bytes: &[u8]) -> State {
        State::File {
            len: bytes.len() as u64,
            crc: crc32fast::hash(bytes),
        }
    }

    /// Parses what [`State`]'s `Display` prints.
    pub fn parse(text: &str) -> Option<State> {
        match text {
            "-" => Some(State::Absent),
            "D" => Some(State::Dir),
            _ => {
                let rest = text.strip_prefix("F:")?;
                let (len, crc) = rest.split_once(':')?;
                Some(State::File {
                    len: len.parse().ok()?,
                    crc: u32::from_str_radix(crc, 16).ok()?,
                })
            }
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            State::Absent => f.write_str("-"),
            State::Dir => f.write_str("D"),
            State::File { len, crc } => write!(f, "F:{len}:{crc:08x}"),
        }
    }
}

/// The writing end of an oracle log.
pub struct OracleLog {
    file: std::fs::File,
}

impl OracleLog {
    /// Opens (creating it) the log at `path` for appending.
    pub fn open(path: &Path) -> Result<OracleLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| FsError::io(format!("open oracle log {}", path.display()), e))?;
        Ok(OracleLog { file })
    }

    fn line(&mut self, text: String) -> Result<()> {
        // One write per line: the line is in the kernel before the operation it guards
        // starts, and a kill of this process cannot tear it.
        self.file
            .write_all(text.as_bytes())
            .map_err(|e| FsError::io("append to the oracle log", e))
    }

    /// Announces a state `path` may be left in by the operation about to start.
    pub fn may(&mut self, path: &str, state: State) -> Result<()> {
        self.line(format!("may {path} {state}\n"))
    }

    /// Records a state `path` is guaranteed to keep (an fsync covering it returned).
    pub fn ack(&mut self, path: &str, state: State) -> Result<()> {
        self.line(format!("ack {path} {state}\n"))
    }

    /// Records that the file system contradicted the client's model.
    pub fn fail(&mut self, message: &str) -> Result<()> {
        self.line(format!("fail {}\n", message.replace('\n', " ")))
    }
}

/// A promise broken by the recovered volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The path (or, for a client's own report, the log file).
    pub path: String,
    /// What the volume holds there.
    pub found: Option<State>,
    /// What it may hold; the first is the acknowledged (or previously checked) state.
    pub allowed: Vec<State>,
    /// Whether that first state came from an fsync acknowledgement of this round.
    pub acknowledged: bool,
    /// A client's own report of a disagreement, if that is what this is.
    pub message: Option<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(m) = &self.message {
            return write!(f, "{}: client reported: {m}", self.path);
        }
        let allowed: Vec<String> = self.allowed.iter().map(|s| s.to_string()).collect();
        write!(
            f,
            "{}: holds {} but may only hold {} ({} {})",
            self.path,
            self.found.unwrap_or(State::Absent),
            allowed.join(" or "),
            if self.acknowledged {
                "acknowledged by fsync:"
            } else {
                "as checked after the previous round:"
            },
            self.allowed[0]
        )
    }
}

#[derive(Clone, Debug)]
struct Allowed {
    states: Vec<State>,
    acknowledged: bool,
}

/// The states every path may be in, built from the last checked state and the logs.
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    paths: BTreeMap<String, Allowed>,
    reports: Vec<Violation>,
    acks: usize,
}

impl Expectations {
    /// Starts from the state the volume was checked to hold (absent paths omitted).
    pub fn new(baseline: &BTreeMap<String, State>) -> Expectations {
        let paths = baseline
            .iter()
            .map(|(p, s)| {
                (
                    p.clone(),
                    Allowed {
                        states: vec![*s],
                        acknowledged: false,
                    },
                )
            })
            .collect();
        Expectations {
            paths,
            ..Default::default()
        }
    }

    fn entry(&mut self, path: &str) -> &mut Allowed {
        self.paths.entry(path.to_string()).or_insert(Allowed {
            states: vec![State::Absent],
            acknowledged: false,
        })
    }

    /// Acknowledgements read so far.
    pub fn acks(&self) -> usize {
        self.acks
    }

    /// Applies one client's log in order. A missing log means the client never started.
    /// A last line without its newline is ignored: it cannot be one the client finished
    /// (and so cannot guard an operation that started).
    pub fn apply_log(&mut self, log: &Path) -> Result<()> {
        let text = match std::fs::read_to_string(log) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(FsError::io(format!("read {}", log.display()), e)),
        };
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        for (n, line) in complete.lines().enumerate() {
            let bad = |why: &str| {
                FsError::Foreign(format!("{}:{}: {why}: {line:?}", log.display(), n + 1))
            };
            let (verb, rest) = line.split_once(' ').ok_or_else(|| bad("no verb"))?;
            if verb == "fail" {
                self.reports.push(Violation {
                    path: log.display().to_string(),
                    found: None,
                    allowed: vec![],
                    acknowledged: false,
                    message: Some(rest.to_string()),
                });
                continue;
            }
            let (path, state) = rest.split_once(' ').ok_or_else(|| bad("no state"))?;
            let state = State::parse(state).ok_or_else(|| bad("the state field"))?;
            match verb {
                "may" => {
                    let a = self.entry(path);
                    if !a.states.contains(&state) {
                        a.states.push(state);
                    }
                }
                "ack" => {
                    self.acks += 1;
                    *self.entry(path) = Allowed {
                        states: vec![state],
                        acknowledged: true,
                    };
                }
                _ => return Err(bad("the verb (may, ack or fail)")),
            }
        }
        Ok(())
    }

    /// Every broken promise: clients' own reports, then each path whose state in
    /// `actual` (absent paths omitted) is not allowed.
    pub fn check(&self, actual: &BTreeMap<String, State>) -> Vec<Violation> {
        let mut out = self.reports.clone();
        let names: BTreeSet<&String> = self.paths.keys().chain(actual.keys()).collect();
        for p in names {
            let found = actual.get(p).copied().unwrap_or(State::Absent);
            let (states, acknowledged) = match self.paths.get(p) {
                Some(a) => (a.states.clone(), a.acknowledged),
                None => (vec![State::Absent], false),
            };
            if !states.contains(&found) {
                out.push(Violation {
                    path: p.clone(),
                    found: Some(found),
                    allowed: states,
                    acknowledged,
                    message: None,
                });
            }
        }
        out
    }
}

/// Reads back every entry of directory `dir` (one level: the workload makes only files
/// and empty directories there), keyed by full path.
pub fn scan(fs: &Pxfs, dir: &str) -> Result<BTreeMap<String, State>> {
    let mut out = BTreeMap::new();
    for name in fs.readdir(dir)? {
        let path = format!("{dir}/{name}");
        let st = fs.stat(&path)?;
        let state = if st.kind == Kind::Dir {
            State::Dir
        } else {
            State::file(&read_all(fs, &path, st.size)?)
        };
        out.insert(path, state);
    }
    Ok(out)
}

/// The whole content of a file of `size` bytes.
pub fn read_all(fs: &Pxfs, path: &str, size: u64) -> Result<Vec<u8>> {
    let fd = fs.open(path, OpenFlags::default())?;
    let mut buf = vec![0u8; size as usize];
    let mut done = 0;
    while done < buf.len() {
        let n = fs.read(fd, &mut buf[done..])?;
        if n == 0 {
            break;
        }
        done += n;
    }
    buf.truncate(done);
    fs.close(fd)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for s in [State::Absent, State::Dir, State::file(b"hello")] {
            assert_eq!(State::parse(&s.to_string()), Some(s));
        }
        assert_eq!(State::parse("F:1"), None);
        assert_eq!(State::parse("X"), None);
    }

    fn log(lines: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c0.log");
        std::fs::write(&p, lines).unwrap();
        (d, p)
    }

    #[test]
    fn an_acknowledged_file_must_keep_its_contents() {
        let a = State::file(b"a");
        let b = State::file(b"b");
        let (_d, p) = log(&format!(
            "may /c/x {}\nmay /c/x {a}\nack /c/x {a}\nmay /c/x {b}\n",
            State::file(b"")
        ));
        let mut e = Expectations::new(&BTreeMap::new());
        e.apply_log(&p).unwrap();
        assert_eq!(e.acks(), 1);
        let holds = |s: State| BTreeMap::from([("/c/x".to_string(), s)]);
        assert!(e.check(&holds(a)).is_empty());
        assert!(
            e.check(&holds(b)).is_empty(),
            "a later operation may change it"
        );
        // Empty was possible before the acknowledgement, not after it.
        let v = e.check(&holds(State::file(b"")));
        assert_eq!(v.len(), 1);
        assert!(v[0].acknowledged);
        assert_eq!(e.check(&BTreeMap::new()).len(), 1, "the file vanished");
        // A name nobody announced.
        let mut extra = holds(a);
        extra.insert("/c/y".into(), State::Dir);
        assert_eq!(e.check(&extra)[0].path, "/c/y");
    }

    #[test]
    fn torn_tail_is_ignored_and_bad_lines_are_located() {
        let (_d, p) = log("may /c/x D\nack /c/x");
        let mut e = Expectations::new(&BTreeMap::new());
        e.apply_log(&p).unwrap();
        assert_eq!(e.acks(), 0);
        let (_d, p) = log("may /c/x D\nack /c/x Q\n");
        let err = Expectations::default()
            .apply_log(&p)
            .unwrap_err()
            .to_string();
        assert!(err.contains("c0.log:2"), "{err}");
        let (_d, p) = log("fail read back other bytes\n");
        let mut e = Expectations::default();
        e.apply_log(&p).unwrap();
        assert_eq!(e.check(&BTreeMap::new()).len(), 1);
    }
}

//! The multiprogrammed workload: per-process traces grouped into job streams, held in
//! memory so that every pass replays exactly the same interleaving.
//!
//! Kessler & Hill's Mult2 was "a series of compiles, a printed circuit board router, a
//! VLSI design rule checker, and a series of simple UNIX commands, all executing in
//! parallel": four streams of work, two of them single long programs and two of them
//! series of short processes that start and finish over the run. A workload directory
//! describes such streams in a manifest (`mult2.tsv`, see [`MANIFEST`]); a directory of
//! traces without one is a set of long streams of one process each. How the streams share
//! the processor is the [`schedule`](super::schedule) module's job.

use pmlab_trace::{Kind, Ref, RefSource, TraceError, open_trace};
use std::path::{Path, PathBuf};

/// The manifest's file name in a workload directory.
pub const MANIFEST: &str = "mult2.tsv";

/// How a stream runs its processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Role {
    /// One long program that runs from before the trace starts to its end (the paper's
    /// router and design-rule checker); when its trace ends, so does the workload.
    Long,
    /// A series of short processes, each started when the previous one exits; the series
    /// starts over (as new processes) when it reaches its end.
    Series,
}

/// One process's trace, read into memory.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Program {
    /// Short name (the file stem).
    pub name: String,
    /// The trace file.
    pub path: PathBuf,
    /// The references (their asid fields are ignored).
    #[serde(skip)]
    pub refs: Vec<Ref>,
    /// Instruction fetches among `refs`.
    pub instructions: u64,
}

/// A job stream: programs run one after another.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Stream {
    /// The stream's name (`router`, `compile`, ...).
    pub name: String,
    /// Long program or series.
    pub role: Role,
    /// Indices into [`Workload::programs`], in running order.
    pub programs: Vec<usize>,
}

/// A workload that could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A trace did not read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// No programs were found.
    #[error("{0}: no trace files (*.bin, *.bin.zst, *.pmt, *.pmt.zst, *.din, *.din.xz) found")]
    Empty(PathBuf),
    /// A trace holds no reference.
    #[error("{0}: the trace holds no reference")]
    EmptyTrace(PathBuf),
    /// A manifest line that does not parse.
    #[error("{path}:{line}: {field}: {message}")]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The field that is wrong.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A directory or file could not be read.
    #[error("{path}: {error}")]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}

/// The programs and streams of a multiprogrammed workload.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Workload {
    /// Where it was read from.
    pub source: PathBuf,
    /// Every process's trace.
    pub programs: Vec<Program>,
    /// The job streams, in manifest order.
    pub streams: Vec<Stream>,
}

const SUFFIXES: [&str; 6] = [".bin.zst", ".bin", ".pmt.zst", ".pmt", ".din.xz", ".din"];

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> WorkloadError + '_ {
    move |error| WorkloadError::Io {
        path: path.to_path_buf(),
        error,
    }
}

impl Workload {
    /// Reads the workload in `dir`: the streams of its manifest if it has one, otherwise
    /// every trace file as a long stream of its own, in name order.
    pub fn load(dir: &Path) -> Result<Self, WorkloadError> {
        let manifest = dir.join(MANIFEST);
        let listed = if manifest.exists() {
            parse_manifest(&manifest)?
        } else {
            list_traces(dir)?
        };
        let mut programs = Vec::new();
        let mut streams: Vec<Stream> = Vec::new();
        for (stream, role, file) in listed {
            programs.push(read_program(&dir.join(&file))?);
            let index = programs.len() - 1;
            match streams.iter_mut().find(|s| s.name == stream) {
                Some(s) => s.programs.push(index),
                None => streams.push(Stream {
                    name: stream,
                    role,
                    programs: vec![index],
                }),
            }
        }
        Ok(Workload {
            source: dir.to_path_buf(),
            programs,
            streams,
        })
    }

    /// One trace file as a workload of one long stream (Appendix A's single programs).
    pub fn single(path: &Path) -> Result<Self, WorkloadError> {
        let program = read_program(path)?;
        let stream = Stream {
            name: program.name.clone(),
            role: Role::Long,
            programs: vec![0],
        };
        Ok(Workload {
            source: path.to_path_buf(),
            programs: vec![program],
            streams: vec![stream],
        })
    }

    /// The trace files of `dir` (none if it does not exist), in name order.
    pub fn trace_files(dir: &Path) -> Result<Vec<PathBuf>, WorkloadError> {
        if !dir.is_dir() {
            return Ok(Vec::new());
        }
        Ok(list_traces(dir)?
            .into_iter()
            .map(|(_, _, file)| dir.join(file))
            .collect())
    }

    /// A workload from programs already in memory and their streams (tests, examples).
    pub fn from_parts(source: PathBuf, programs: Vec<Program>, streams: Vec<Stream>) -> Self {
        Workload {
            source,
            programs,
            streams,
        }
    }

    /// All references of all programs.
    pub fn total_refs(&self) -> u64 {
        self.programs.iter().map(|p| p.refs.len() as u64).sum()
    }
}

impl Program {
    /// A program from references in memory.
    pub fn from_refs(name: &str, refs: Vec<Ref>) -> Self {
        let instructions = refs.iter().filter(|r| r.kind == Kind::Instr).count() as u64;
        Program {
            name: name.to_string(),
            path: PathBuf::from(name),
            refs,
            instructions,
        }
    }
}

fn read_program(path: &Path) -> Result<Program, WorkloadError> {
    let mut source = open_trace(&path.to_string_lossy(), None)?;
    let mut refs = Vec::new();
    let mut batch = Vec::with_capacity(1 << 16);
    while source.next_batch(&mut batch)? > 0 {
        refs.extend_from_slice(&batch);
    }
    if refs.is_empty() {
        return Err(WorkloadError::EmptyTrace(path.to_path_buf()));
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .map(|n| SUFFIXES.iter().find_map(|s| n.strip_suffix(s)).unwrap_or(n))
        .unwrap_or_default();
    let mut p = Program::from_refs(name, refs);
    p.path = path.to_path_buf();
    Ok(p)
}

/// Every trace file of `dir` as `(stream = its stem, Long, file name)`, in name order.
fn list_traces(dir: &Path) -> Result<Vec<(String, Role, String)>, WorkloadError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_error(dir))? {
        let path = entry.map_err(io_error(dir))?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if let Some(stem) = SUFFIXES.iter().find_map(|s| name.strip_suffix(s)) {
            found.push((stem.to_string(), Role::Long, name));
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(WorkloadError::Empty(dir.to_path_buf()));
    }
    Ok(found)
}

/// The manifest: one process per line, `stream<TAB>role<TAB>trace file<TAB>command`, the
/// role `long` or `series`; `#` starts a comment line. A long stream has one process.
pub fn parse_manifest(path: &Path) -> Result<Vec<(String, Role, String)>, WorkloadError> {
    let text = std::fs::read_to_string(path).map_err(io_error(path))?;
    let mut out: Vec<(String, Role, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let err = |field, message: String| WorkloadError::Manifest {
            path: path.to_path_buf(),
            line: i + 1,
            field,
            message,
        };
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() < 3 {
            return Err(err(
                "line",
                format!(
                    "expected stream, role, trace and command separated by tabs, found {line:?}"
                ),
            ));
        }
        let role = match fields[1] {
            "long" => Role::Long,
            "series" => Role::Series,
            other => {
                return Err(err(
                    "role",
                    format!("`{other}` is neither `long` nor `series`"),
                ));
            }
        };
        let (stream, file) = (fields[0].to_string(), fields[2].to_string());
        if stream.is_empty() || file.is_empty() || file.contains('/') {
            return Err(err(
                "trace",
                format!("`{file}` of stream `{stream}` is not a file name"),
            ));
        }
        if let Some((_, r, _)) = out.iter().find(|(s, _, _)| *s == stream)
            && (*r != role || role == Role::Long)
        {
            return Err(err(
                "stream",
                format!(
                    "stream `{stream}` is listed again (a long stream has one process, a series one role)"
                ),
            ));
        }
        out.push((stream, role, file));
    }
    if out.is_empty() {
        return Err(WorkloadError::Empty(path.to_path_buf()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(text: &str) -> Result<Vec<(String, Role, String)>, WorkloadError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MANIFEST);
        std::fs::write(&path, text).unwrap();
        parse_manifest(&path)
    }

    #[test]
    fn manifest_lines_become_streams() {
        let m = manifest("# stream\trole\ttrace\tcommand\nrouter\tlong\tr.bin.zst\tq\nsh\tseries\ta.bin\twc\nsh\tseries\tb.bin\tls\n").unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0], ("router".into(), Role::Long, "r.bin.zst".into()));
        assert_eq!(m[2].1, Role::Series);
    }

    #[test]
    fn a_bad_manifest_line_is_located() {
        let e = manifest("a\tlong\tx.bin\tc\nb\tshort\ty.bin\tc\n").unwrap_err();
        assert!(e.to_string().contains(":2: role:"), "{e}");
        let e = manifest("a\tlong\tx.bin\tc\na\tlong\ty.bin\tc\n").unwrap_err();
        assert!(e.to_string().contains(":2: stream:"), "{e}");
        let e = manifest("a\tlong\n").unwrap_err();
        assert!(e.to_string().contains(":1: line:"), "{e}");
        let e = manifest("a\tseries\t../x.bin\tc\n").unwrap_err();
        assert!(e.to_string().contains(":1: trace:"), "{e}");
    }
}

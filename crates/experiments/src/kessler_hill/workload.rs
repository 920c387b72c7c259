//! The multiprogrammed workload: per-program traces merged round-robin into one trace of
//! references stamped with process ids, held in memory so that every pass of the
//! experiment replays exactly the same interleaving.

use pmlab_trace::{
    Interleave, Kind, ProcessEnd, Ref, RefSource, SwitchUnit, TraceError, open_trace,
};
use std::path::{Path, PathBuf};

/// One program of the mix: a name and its trace file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Program {
    /// Short name (the file stem).
    pub name: String,
    /// The trace file.
    pub path: PathBuf,
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
    /// A directory could not be listed.
    #[error("{path}: {error}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}

/// The merged trace and where each process ended.
pub struct Workload {
    /// The programs, in process-id order (asid = index + 1).
    pub programs: Vec<Program>,
    /// All references, interleaved, with process ids.
    pub refs: Vec<Ref>,
    /// Process ends, in trace order.
    pub ends: Vec<ProcessEnd>,
    /// Instruction fetches in the merged trace.
    pub instructions: u64,
    /// Context switches performed by the interleaving.
    pub switches: u64,
}

impl Workload {
    /// The trace files in `dir`, sorted by name.
    pub fn programs_in(dir: &Path) -> Result<Vec<Program>, WorkloadError> {
        let io = |error| WorkloadError::Io {
            path: dir.to_path_buf(),
            error,
        };
        let mut programs = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let stem = [".bin.zst", ".bin", ".pmt.zst", ".pmt", ".din.xz", ".din"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix));
            if let Some(stem) = stem {
                programs.push(Program {
                    name: stem.to_string(),
                    path,
                });
            }
        }
        programs.sort_by(|a, b| a.name.cmp(&b.name));
        if programs.is_empty() {
            return Err(WorkloadError::Empty(dir.to_path_buf()));
        }
        Ok(programs)
    }

    /// Interleaves `programs` round-robin, switching every `switch_interval` instructions;
    /// program `i` becomes process `i + 1`.
    pub fn build(programs: Vec<Program>, switch_interval: u64) -> Result<Self, WorkloadError> {
        let mut mix = Interleave::new(switch_interval, SwitchUnit::Instructions);
        for (i, p) in programs.iter().enumerate() {
            let asid = u16::try_from(i + 1).expect("fewer than 65535 programs");
            mix.add(asid, open_trace(&p.path.to_string_lossy(), None)?);
        }
        let mut refs = Vec::new();
        let mut batch = Vec::with_capacity(1 << 16);
        while mix.next_batch(&mut batch)? > 0 {
            refs.extend_from_slice(&batch);
        }
        let instructions = refs.iter().filter(|r| r.kind == Kind::Instr).count() as u64;
        Ok(Workload {
            programs,
            refs,
            ends: mix.drain_ended(),
            instructions,
            switches: mix.switches(),
        })
    }
}

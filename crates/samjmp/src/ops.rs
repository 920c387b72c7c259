//! The operations as the command line runs them, on either version: each opens the
//! structure where it lives (switching into the VAS, or mapping the region file),
//! works on it in place, leaves its result there and prints what samtools would.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::arena::{Addressing, Arena};
use crate::error::SamError;
use crate::format::sam_line;
use crate::ingest::{LoadStats, load};
use crate::store::{RegionFile, Scratch, VasStore, arena_size_for};
use crate::{flagstat, index, sort};

/// Where the alignments live.
#[derive(Clone, Debug)]
pub enum Target {
    /// A VAS (and its segment) of this name in the registry `dir`: pointers.
    Vas {
        /// Registry directory.
        dir: PathBuf,
        /// VAS and segment name.
        name: String,
    },
    /// A region file mapped with `mmap`: offsets.
    Region(PathBuf),
}

/// An operation on loaded alignments.
#[derive(Clone, Debug)]
pub enum Op {
    /// `samtools flagstat`.
    Flagstat,
    /// `samtools sort [-n]`; `print`: write the records in the new order as SAM.
    Sort {
        /// By name (`-n`).
        by_name: bool,
        /// Print the sorted records.
        print: bool,
    },
    /// `samtools index`.
    Index,
    /// `samtools view REGION` on the indexed data.
    View {
        /// The region.
        region: String,
        /// Print only the number of records (`-c`).
        count: bool,
    },
}

/// Loads `file` into a new VAS or region file (refused if it exists). On failure
/// nothing is left behind.
pub fn load_into(
    target: &Target,
    file: &Path,
    size: Option<u64>,
    progress: bool,
) -> Result<LoadStats, SamError> {
    let size = match size {
        Some(s) => s.next_multiple_of(2 << 20),
        None => arena_size_for(file)?,
    };
    match target {
        Target::Vas { dir, name } => {
            let mut st = VasStore::create(dir, name, size)?;
            match load(&mut st.arena, file, progress) {
                Ok(s) => Ok(s),
                Err(e) => {
                    drop(st);
                    let _ = VasStore::remove(dir, name);
                    Err(e)
                }
            }
        }
        Target::Region(path) => {
            let mut rf = RegionFile::create(path, size)?;
            let s = load(&mut rf.arena, file, progress)?;
            rf.commit()?;
            Ok(s)
        }
    }
}

/// How long an operation took inside its process: reaching the structure (VAS
/// attach and switch, or opening and mapping the file) and the work itself. Leaving
/// (switching home, unmapping, exiting) is not included, as the paper stops its
/// timers before process exit.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    /// Seconds to reach the structure.
    pub open_s: f64,
    /// Seconds of the operation, output included.
    pub op_s: f64,
}

/// Runs `op` on the alignments at `target`, printing to `out`.
pub fn run(target: &Target, op: &Op, out: &mut dyn Write) -> Result<Timing, SamError> {
    let t = Instant::now();
    match target {
        Target::Vas { dir, name } => {
            let mut st = VasStore::open(dir, name)?;
            let open_s = t.elapsed().as_secs_f64();
            run_on(&mut st.arena, op, out)?;
            out.flush()
                .map_err(|e| SamError::io("write", "standard output", e))?;
            let op_s = t.elapsed().as_secs_f64() - open_s;
            Ok(Timing { open_s, op_s })
        }
        Target::Region(path) => {
            let mut rf = RegionFile::open(path)?;
            let open_s = t.elapsed().as_secs_f64();
            run_on(&mut rf.arena, op, out)?;
            out.flush()
                .map_err(|e| SamError::io("write", "standard output", e))?;
            let op_s = t.elapsed().as_secs_f64() - open_s;
            Ok(Timing { open_s, op_s })
        }
    }
}

/// `pmlab sam flagstat FILE`: loads into anonymous memory and counts, in one go.
pub fn flagstat_file(file: &Path, out: &mut dyn Write) -> Result<(), SamError> {
    let mut s = Scratch::new(arena_size_for(file)?)?;
    load(&mut s.arena, file, false)?;
    run_on(&mut s.arena, &Op::Flagstat, out)
}

fn write_out(out: &mut dyn Write, bytes: &[u8]) -> Result<(), SamError> {
    out.write_all(bytes)
        .map_err(|e| SamError::io("write", "standard output", e))
}

/// Runs `op` on an open arena.
pub fn run_on<A: Addressing>(
    arena: &mut Arena<A>,
    op: &Op,
    out: &mut dyn Write,
) -> Result<(), SamError> {
    match op {
        Op::Flagstat => {
            let s = flagstat::flagstat(arena)?;
            write_out(out, flagstat::render(&s).as_bytes())
        }
        Op::Sort { by_name, print } => {
            sort::sort(arena, *by_name)?;
            if *print {
                let order = arena.order(*by_name).expect("just sorted").to_vec();
                print_records(arena, &order, out)?;
            }
            Ok(())
        }
        Op::Index => index::index(arena),
        Op::View { region, count } => {
            let names = arena.ref_names();
            let reg = index::parse_region(region, &names)?;
            let sel = index::view(arena, reg)?;
            if *count {
                write_out(out, format!("{}\n", sel.len()).as_bytes())
            } else {
                print_records(arena, &sel, out)
            }
        }
    }
}

/// Writes records as SAM lines (no header, as `samtools view` without `-h`).
pub fn print_records<A: Addressing>(
    arena: &Arena<A>,
    refs: &[u64],
    out: &mut dyn Write,
) -> Result<(), SamError> {
    let names = arena.ref_names();
    let mut buf = Vec::with_capacity(1 << 20);
    for &r in refs {
        sam_line(arena, &names, arena.rec(r), &mut buf);
        if buf.len() > 1 << 20 {
            write_out(out, &buf)?;
            buf.clear();
        }
    }
    write_out(out, &buf)
}

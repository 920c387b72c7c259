//! The operations as the command line runs them, on either version: each opens the
//! structure where it lives (switching into the VAS, or mapping the region file),
//! works on it in place, leaves its result there and prints what samtools would.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::access::Entry;
use crate::arena::{Addressing, Arena};
use crate::error::SamError;
use crate::format::sam_line;
use crate::ingest::{LoadStats, load};
use crate::layout::Ref;
use crate::store::{RegionFile, Scratch, VasStore, arena_size_for};
use crate::{flagstat, index, sort};
use pmlab_vas::{Mode, VasError};

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

/// Loads `file` into a new VAS (segment and VAS modes `mode`) or region file
/// (refused if a finished one exists). On failure nothing is left behind.
pub fn load_into(
    target: &Target,
    file: &Path,
    size: Option<u64>,
    mode: Mode,
    progress: bool,
) -> Result<LoadStats, SamError> {
    let size = match size {
        Some(s) => s.next_multiple_of(2 << 20),
        None => arena_size_for(file)?,
    };
    match target {
        Target::Vas { dir, name } => {
            let mut st = VasStore::create(dir, name, size, mode)?;
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
            let mut st = match VasStore::open(dir, name, true) {
                Err(SamError::Vas(VasError::PermissionDenied { .. }))
                    if matches!(op, Op::Flagstat | Op::View { .. }) =>
                {
                    // May not write: the reader VAS (read-only mapping, shared lock);
                    // the result is printed, not left behind.
                    VasStore::open(dir, name, false)?
                }
                r => r?,
            };
            let open_s = t.elapsed().as_secs_f64();
            if st.writable() {
                run_on(&mut st.arena, op, out)?;
            } else {
                run_read_only(&st.arena, op, out)?;
            }
            out.flush()
                .map_err(|e| SamError::io("write", "standard output", e))?;
            let op_s = t.elapsed().as_secs_f64() - open_s;
            Ok(Timing { open_s, op_s })
        }
        Target::Region(path) => {
            let mut rf = match RegionFile::open(path) {
                Err(e) if write_denied(&e) && matches!(op, Op::Flagstat | Op::View { .. }) => {
                    // May not write, as a VAS's reader: a read-only mapping; the result
                    // is printed, not left behind.
                    RegionFile::open_read_only(path)?
                }
                r => r?,
            };
            let open_s = t.elapsed().as_secs_f64();
            if rf.writable() {
                run_on(&mut rf.arena, op, out)?;
            } else {
                run_read_only(&rf.arena, op, out)?;
            }
            out.flush()
                .map_err(|e| SamError::io("write", "standard output", e))?;
            let op_s = t.elapsed().as_secs_f64() - open_s;
            Ok(Timing { open_s, op_s })
        }
    }
}

/// Checks the alignments at `target` in full ([`crate::check`]), as a reader.
pub fn check(target: &Target) -> Result<crate::check::Summary, SamError> {
    match target {
        Target::Vas { dir, name } => {
            let st = match VasStore::open(dir, name, true) {
                Err(SamError::Vas(VasError::PermissionDenied { .. })) => {
                    VasStore::open(dir, name, false)?
                }
                r => r?,
            };
            crate::check::check(&st.arena)
        }
        Target::Region(path) => {
            let rf = match RegionFile::open(path) {
                Err(e) if write_denied(&e) => RegionFile::open_read_only(path)?,
                r => r?,
            };
            crate::check::check(&rf.arena)
        }
    }
}

/// Whether opening a region file for writing failed because the kernel denies this
/// process write access to it.
fn write_denied(e: &SamError) -> bool {
    matches!(e, SamError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied)
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
                let order = arena.order(*by_name)?.unwrap_or(&[]).to_vec();
                print_records(
                    arena,
                    &order,
                    if *by_name { "by_name" } else { "by_coord" },
                    out,
                )?;
            }
            Ok(())
        }
        Op::Index => index::index(arena),
        Op::View { region, count } => {
            let reg = index::parse_region(region, &arena.ref_names()?)?;
            let sel = index::view(arena, reg)?;
            print_view(arena, &sel, *count, out)
        }
    }
}

/// Runs `op` on an arena this process may only read: flagstat and view work, their
/// results are printed but not left behind.
pub fn run_read_only<A: Addressing>(
    arena: &Arena<A>,
    op: &Op,
    out: &mut dyn Write,
) -> Result<(), SamError> {
    match op {
        Op::Flagstat => {
            let s = flagstat::counts(arena)?;
            write_out(out, flagstat::render(&s).as_bytes())
        }
        Op::View { region, count } => {
            let reg = index::parse_region(region, &arena.ref_names()?)?;
            let sel = index::select(arena, reg)?;
            print_view(arena, &sel, *count, out)
        }
        Op::Sort { .. } | Op::Index => Err(SamError::Needs(format!(
            "{}: write access denied (sort and index leave their result in it)",
            arena.label()
        ))),
    }
}

fn print_view<A: Addressing>(
    arena: &Arena<A>,
    sel: &[Ref],
    count: bool,
    out: &mut dyn Write,
) -> Result<(), SamError> {
    if count {
        write_out(out, format!("{}\n", sel.len()).as_bytes())
    } else {
        print_records(arena, sel, "last_view", out)
    }
}

/// Writes records as SAM lines (no header, as `samtools view` without `-h`); `table`
/// names where the references came from, for errors.
pub fn print_records<A: Addressing>(
    arena: &Arena<A>,
    refs: &[Ref],
    table: &'static str,
    out: &mut dyn Write,
) -> Result<(), SamError> {
    let names = arena.ref_names()?;
    let mut buf = Vec::with_capacity(1 << 20);
    for (i, &r) in refs.iter().enumerate() {
        sam_line(arena, &names, &arena.rec(Entry { table, i }, r)?, &mut buf);
        if buf.len() > 1 << 20 {
            write_out(out, &buf)?;
            buf.clear();
        }
    }
    write_out(out, &buf)
}

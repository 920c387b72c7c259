//! `pmlab sam`: SpaceJMP's SAMtools (paper 002, §5.4). Alignments are loaded once into
//! a VAS (or, for comparison, an mmap'ed region file); each operation is its own
//! process that switches in, works in place and leaves its result there.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use pmlab_samjmp::ops::{self, Op, Target};

use super::sam_bench;

/// Arguments of `pmlab sam`.
#[derive(clap::Args)]
pub struct Args {
    /// Print the operation's time inside the process (reaching the structure, and the
    /// work) on stderr as `pmlab-sam-timing open=S op=S`.
    #[arg(long, global = true)]
    timing: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

/// Where the alignments live: `--vas NAME` or `--region FILE`.
#[derive(clap::Args, Clone)]
#[group(required = true, multiple = false)]
struct Place {
    /// A VAS (and segment) of this name: the SpaceJMP version, pointers.
    #[arg(long)]
    vas: Option<String>,
    /// A region file mapped with mmap: the comparison version, offsets.
    #[arg(long)]
    region: Option<PathBuf>,
}

#[derive(clap::Args, Clone)]
struct Where {
    #[command(flatten)]
    place: Place,
    /// The VAS registry directory (default: $PMLAB_VAS_DIR, else /dev/shm/pmlab-vas).
    #[arg(long)]
    dir: Option<PathBuf>,
}

impl Where {
    fn target(&self) -> Target {
        match (&self.place.vas, &self.place.region) {
            (Some(name), _) => Target::Vas {
                dir: self
                    .dir
                    .clone()
                    .unwrap_or_else(pmlab_vas::native::default_dir),
                name: name.clone(),
            },
            (None, Some(p)) => Target::Region(p.clone()),
            (None, None) => unreachable!("clap requires one"),
        }
    }
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Load a SAM or BAM file into a new VAS (or region file).
    Load {
        /// The SAM or BAM file.
        file: PathBuf,
        #[command(flatten)]
        at: Where,
        /// Bytes to reserve (default: from the file's size; sparse on tmpfs).
        #[arg(long, value_parser = pmlab_spine::parse_size)]
        size: Option<u64>,
        /// Permission bits of the VAS, its reader VAS and segment, in octal: who may
        /// write the alignments (and run sort and index) and who may only read them
        /// (flagstat and view, through `NAME.r`), as the kernel enforces.
        #[arg(long, default_value = "660", value_parser = parse_mode)]
        mode: u32,
        /// No progress bar.
        #[arg(long)]
        no_progress: bool,
    },
    /// Check loaded alignments in full: every record, and every published result
    /// recomputed (orders, index, flagstat, last view); prints what is published.
    Check {
        #[command(flatten)]
        at: Where,
    },
    /// `samtools flagstat`: of loaded alignments, or of FILE in one go.
    Flagstat {
        /// A SAM or BAM file to load and count (instead of --vas/--region).
        file: Option<PathBuf>,
        #[arg(long)]
        vas: Option<String>,
        #[arg(long, conflicts_with = "vas")]
        region: Option<PathBuf>,
        /// The VAS registry directory.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// `samtools sort`: by coordinate, or by name with -n; the order stays in the VAS.
    Sort {
        #[command(flatten)]
        at: Where,
        /// By read name.
        #[arg(short = 'n')]
        by_name: bool,
        /// Also print the records in the new order (SAM, no header).
        #[arg(long)]
        print: bool,
    },
    /// `samtools index`: the index over the coordinate order, left in the VAS.
    Index {
        #[command(flatten)]
        at: Where,
    },
    /// `samtools view REGION` on the indexed alignments (SAM lines, no header).
    View {
        #[command(flatten)]
        at: Where,
        /// `NAME`, `NAME:BEG` or `NAME:BEG-END` (1-based, inclusive).
        #[arg(value_name = "REGION")]
        query: String,
        /// Print only the count (`-c`).
        #[arg(short = 'c')]
        count: bool,
    },
    /// Write the seeded generated data set (xoshiro256++) as SAM.
    Generate {
        /// Output file.
        #[arg(short = 'o')]
        out: PathBuf,
        /// At least this many bytes of SAM.
        #[arg(long, default_value = "64MiB", value_parser = pmlab_spine::parse_size)]
        bytes: u64,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Figures 11 and 12: samtools on SAM and BAM vs the VAS and mmap versions.
    Bench(sam_bench::Args),
}

/// Runs `pmlab sam`.
pub fn run(args: Args) -> anyhow::Result<()> {
    // The kill tests' crash point (`PMLAB_SAM_KILL_AT`); nothing without it.
    pmlab_samjmp::crash::arm_from_env();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let timing = dispatch(args.cmd, &mut out)?;
    pmlab_samjmp::crash::report_if_asked();
    out.flush()?;
    if let (true, Some(t)) = (args.timing, timing) {
        eprintln!("pmlab-sam-timing open={:.6} op={:.6}", t.open_s, t.op_s);
    }
    Ok(())
}

/// Runs one subcommand; an operation on a structure returns its timing.
fn dispatch(cmd: Cmd, out: &mut impl Write) -> anyhow::Result<Option<ops::Timing>> {
    match cmd {
        Cmd::Load {
            file,
            at,
            size,
            mode,
            no_progress,
        } => {
            let mode = pmlab_vas::Mode(mode);
            let s = ops::load_into(&at.target(), &file, size, mode, !no_progress)?;
            let (n, bytes) = (s.records, s.bytes_used);
            writeln!(
                out,
                "loaded {n} records from {} ({bytes} bytes of structure)",
                file.display()
            )?;
        }
        Cmd::Flagstat {
            file,
            vas,
            region,
            dir,
        } => return flagstat(file, Place { vas, region }, dir, out),
        Cmd::Sort { at, by_name, print } => {
            return Ok(Some(ops::run(
                &at.target(),
                &Op::Sort { by_name, print },
                out,
            )?));
        }
        Cmd::Index { at } => return Ok(Some(ops::run(&at.target(), &Op::Index, out)?)),
        Cmd::View { at, query, count } => {
            let op = Op::View {
                region: query,
                count,
            };
            return Ok(Some(ops::run(&at.target(), &op, out)?));
        }
        Cmd::Generate {
            out: path,
            bytes,
            seed,
        } => generate(&path, bytes, seed, out)?,
        Cmd::Check { at } => writeln!(out, "{}", ops::check(&at.target())?)?,
        Cmd::Bench(a) => sam_bench::run(a)?,
    }
    Ok(None)
}

/// `flagstat` of a file (load and run in one go) or of a stored structure.
fn flagstat(
    file: Option<PathBuf>,
    place: Place,
    dir: Option<PathBuf>,
    out: &mut impl Write,
) -> anyhow::Result<Option<ops::Timing>> {
    match (file, &place.vas, &place.region) {
        (Some(f), None, None) => {
            ops::flagstat_file(&f, out)?;
            Ok(None)
        }
        (None, Some(_), _) | (None, _, Some(_)) => Ok(Some(ops::run(
            &Where { place, dir }.target(),
            &Op::Flagstat,
            out,
        )?)),
        _ => anyhow::bail!("flagstat takes either FILE or one of --vas/--region"),
    }
}

/// `generate`: the seeded data set written as SAM.
fn generate(path: &Path, bytes: u64, seed: u64, out: &mut impl Write) -> anyhow::Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let g = pmlab_samjmp::generate::generate(&mut w, bytes, seed)?;
    w.flush()?;
    writeln!(
        out,
        "{} records, {} bytes -> {}",
        g.records,
        g.bytes,
        path.display()
    )?;
    Ok(())
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|&m| m <= 0o777)
        .ok_or_else(|| format!("{s:?} is not an octal mode (e.g. 660)"))
}

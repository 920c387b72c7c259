//! `pmlab vas`: SpaceJMP's address spaces and segments on this machine — create, list,
//! inspect, attach, remove, check, and the lock kill test.

use std::path::PathBuf;

use anyhow::{Context, bail};
use pmlab_vas::native::{NativeSpaces, check::check};
use pmlab_vas::{Access, AttachTo, Mode, SegCtl, SpaceJmp, VasCtl};

use super::vas_stress;

/// Arguments of `pmlab vas`.
#[derive(clap::Args)]
pub struct Args {
    /// The registry directory (default: $PMLAB_VAS_DIR, else /dev/shm/pmlab-vas).
    #[arg(long, global = true)]
    dir: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Create a VAS or a segment (the registry too, if there is none).
    Create {
        #[command(subcommand)]
        what: CreateWhat,
    },
    /// Attach a segment to a VAS (for every process that attaches the VAS).
    Attach {
        /// The VAS.
        vas: String,
        /// The segment.
        seg: String,
        /// `rw` (lock taken exclusive on switch) or `ro` (shared).
        #[arg(long, default_value = "rw")]
        access: Access,
    },
    /// Detach a segment from a VAS.
    Detach {
        /// The VAS.
        vas: String,
        /// The segment.
        seg: String,
    },
    /// List VASes and segments.
    List,
    /// Describe a VAS or a segment (with its lock's holders).
    Inspect {
        /// A VAS or segment name.
        name: String,
    },
    /// Remove a VAS, or a segment no VAS lists.
    Remove {
        /// `vas` or `seg`.
        kind: String,
        /// Its name.
        name: String,
    },
    /// Check the registry's consistency; `--repair` clears locks held by dead processes.
    Check {
        /// Clear dead holders.
        #[arg(long)]
        repair: bool,
    },
    /// Kill test: processes holding segment locks shared and exclusive are SIGKILLed at
    /// random moments; every lock must be recovered and the registry stay consistent.
    Stress(vas_stress::Args),
    /// One process of the kill test (started by `stress`).
    #[command(hide = true)]
    StressWorker(vas_stress::WorkerArgs),
}

#[derive(clap::Subcommand)]
enum CreateWhat {
    /// A VAS.
    Vas {
        /// Its name.
        name: String,
        /// Permission bits (octal).
        #[arg(long, default_value = "660", value_parser = Mode::parse)]
        mode: Mode,
    },
    /// A global segment at a fixed address.
    Seg {
        /// Its name.
        name: String,
        /// Size (e.g. 64MiB), a multiple of the page.
        #[arg(long, value_parser = pmlab_spine::parse_size)]
        size: u64,
        /// Fixed base address (hex); chosen by the registry when absent.
        #[arg(long, value_parser = parse_addr)]
        base: Option<u64>,
        /// Permission bits (octal).
        #[arg(long, default_value = "660", value_parser = Mode::parse)]
        mode: Mode,
        /// Switching does not take its lock.
        #[arg(long)]
        not_lockable: bool,
    },
}

fn parse_addr(s: &str) -> Result<u64, String> {
    let t = s.trim_start_matches("0x");
    u64::from_str_radix(t, 16).map_err(|_| format!("{s:?} is not a hex address"))
}

fn dir(args: &Args) -> PathBuf {
    args.dir
        .clone()
        .unwrap_or_else(pmlab_vas::native::default_dir)
}

fn open(args: &Args, create: bool) -> anyhow::Result<NativeSpaces> {
    let d = dir(args);
    NativeSpaces::open_with(&d, Default::default(), create)
        .with_context(|| format!("registry {}", d.display()))
}

/// Runs `pmlab vas`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match &args.cmd {
        Cmd::Create { what } => create(&args, what),
        Cmd::Attach { vas, seg, access } => {
            let mut s = open(&args, false)?;
            let (v, g) = (s.vas_find(vas)?, s.seg_find(seg)?);
            s.seg_attach(AttachTo::Vas(v), g, *access)?;
            println!("attached {seg} to {vas} ({})", access.name());
            Ok(())
        }
        Cmd::Detach { vas, seg } => {
            let mut s = open(&args, false)?;
            let (v, g) = (s.vas_find(vas)?, s.seg_find(seg)?);
            s.seg_detach(AttachTo::Vas(v), g)?;
            println!("detached {seg} from {vas}");
            Ok(())
        }
        Cmd::List => list(&args),
        Cmd::Inspect { name } => inspect(&args, name),
        Cmd::Remove { kind, name } => {
            let mut s = open(&args, false)?;
            match kind.as_str() {
                "vas" => s.vas_ctl(s.vas_find(name)?, VasCtl::Remove).map(|_| ())?,
                "seg" => s.seg_ctl(s.seg_find(name)?, SegCtl::Remove).map(|_| ())?,
                other => bail!("remove: kind {other:?} is neither vas nor seg"),
            }
            println!("removed {kind} {name}");
            Ok(())
        }
        Cmd::Check { repair } => {
            let s = open(&args, false)?;
            let r = check(s.registry(), *repair)?;
            println!(
                "{} VASes, {} segments, {} problems, {} dead holders{}",
                r.vases,
                r.segments,
                r.problems.len(),
                r.dead_holders.len(),
                if *repair { " (cleared)" } else { "" }
            );
            for p in &r.problems {
                println!("  problem: {p}");
            }
            for (seg, pid) in &r.dead_holders {
                println!("  dead holder: pid {pid} on segment {seg}");
            }
            if !r.clean(*repair) {
                bail!("the registry is not consistent");
            }
            Ok(())
        }
        Cmd::Stress(a) => vas_stress::run(a, args.dir.clone()),
        Cmd::StressWorker(a) => vas_stress::worker(a, &dir(&args)),
    }
}

fn create(args: &Args, what: &CreateWhat) -> anyhow::Result<()> {
    let mut s = open(args, true)?;
    match what {
        CreateWhat::Vas { name, mode } => {
            let v = s.vas_create(name, *mode)?;
            println!("created VAS {name} ({v}, mode {mode})");
        }
        CreateWhat::Seg {
            name,
            size,
            base,
            mode,
            not_lockable,
        } => {
            let g = s.seg_alloc(name, *base, *size, *mode)?;
            if *not_lockable {
                s.seg_ctl(g, SegCtl::SetLockable(false))?;
            }
            let i = s.seg_describe(g)?;
            println!(
                "created segment {name} ({g}) at {:#x}, {} bytes, mode {mode}",
                i.base, i.size
            );
        }
    }
    Ok(())
}

fn list(args: &Args) -> anyhow::Result<()> {
    let s = open(args, false)?;
    let reg = s.registry();
    println!(
        "registry {} (window {:#x}..{:#x})",
        reg.dir().display(),
        reg.window().0,
        reg.window().1
    );
    println!(
        "{:<20} {:>6} {:>5} {:>5}  segments",
        "VAS", "mode", "uid", "tag"
    );
    for n in reg.vas_names()? {
        match s.vas_describe(s.vas_find(&n)?) {
            Ok(v) => {
                let segs: Vec<String> = v
                    .segments
                    .iter()
                    .map(|(g, a)| format!("{g}:{}", a.name()))
                    .collect();
                println!(
                    "{:<20} {:>6} {:>5} {:>5}  {}",
                    v.name,
                    v.mode.to_string(),
                    v.uid,
                    v.tlb_tag,
                    segs.join(" ")
                );
            }
            Err(e) => println!("{n:<20} error: {e}"),
        }
    }
    println!(
        "{:<20} {:>16} {:>12} {:>6} {:>5} {:>8}",
        "segment", "base", "bytes", "mode", "uid", "lockable"
    );
    for n in reg.seg_names()? {
        match s.seg_find(&n).and_then(|g| s.seg_describe(g)) {
            Ok(i) => println!(
                "{:<20} {:>#16x} {:>12} {:>6} {:>5} {:>8}",
                i.name,
                i.base,
                i.size,
                i.mode.to_string(),
                i.uid,
                i.lockable
            ),
            Err(e) => println!("{n:<20} error: {e}"),
        }
    }
    Ok(())
}

fn inspect(args: &Args, name: &str) -> anyhow::Result<()> {
    let s = open(args, false)?;
    let mut found = false;
    if let Ok(v) = s.vas_find(name) {
        println!("{}", serde_json::to_string_pretty(&s.vas_describe(v)?)?);
        found = true;
    }
    if let Ok(g) = s.seg_find(name) {
        println!("{}", serde_json::to_string_pretty(&s.seg_describe(g)?)?);
        let lock = pmlab_vas::native::SegLock::open(&s.registry().lock_path(name))?;
        let st = lock.state();
        let alive = |h: &pmlab_vas::native::Holder| if h.alive() { "alive" } else { "DEAD" };
        match st.writer {
            Some(w) => println!("lock: held exclusive by pid {} ({})", w.pid, alive(&w)),
            None if st.readers.is_empty() => println!("lock: free"),
            None => println!(
                "lock: held shared by {}",
                st.readers
                    .iter()
                    .map(|(h, n)| format!("pid {} x{n} ({})", h.pid, alive(h)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
        println!(
            "lock: {} acquisitions, {} dead holders recovered",
            st.acquisitions, st.recoveries
        );
        found = true;
    }
    if !found {
        // Report the lookups' own errors: not found, or a malformed file with its location.
        match (s.vas_find(name), s.seg_find(name)) {
            (Err(e @ pmlab_vas::VasError::BadFormat { .. }), _) | (_, Err(e)) | (Err(e), _) => {
                return Err(e.into());
            }
            _ => {}
        }
    }
    Ok(())
}

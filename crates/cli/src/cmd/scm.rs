//! `pmlab scm`: create, inspect and check storage-class memory regions on this machine.

use std::path::PathBuf;

use anyhow::Context;
use pmlab_native::{CpuPersistFeatures, ReadOnlyRegion, Region, RegionInfo, default_persist_mode};
use pmlab_spine::parse_size;

/// Arguments of `pmlab scm`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Create and format a region (a file on tmpfs, DAX or disk; or a memfd).
    Create(CreateArgs),
    /// Print a region's header, medium and persist mode.
    Info(PathArgs),
    /// Validate a region's header; exits non-zero on a foreign or corrupted region.
    Check(PathArgs),
}

#[derive(clap::Args)]
struct CreateArgs {
    /// The file to create (or, with --memfd, the memfd's name).
    path: PathBuf,
    /// Size with an optional unit: 65536, 64K, 64M, 1G.
    #[arg(long, value_parser = parse_size)]
    size: u64,
    /// Create an anonymous memfd instead of a file. It lives only while a process holds
    /// it, so this formats it, verifies it through a second and a read-only mapping, and
    /// reports; `pmlab fs` creates the memfds it serves itself.
    #[arg(long, conflicts_with = "file")]
    memfd: bool,
    /// Create a file (the default).
    #[arg(long)]
    file: bool,
}

#[derive(clap::Args)]
struct PathArgs {
    /// The region file or DAX device.
    path: PathBuf,
}

/// Runs `pmlab scm`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Create(a) => create(a),
        Command::Info(a) => info(a),
        Command::Check(a) => check(a),
    }
}

fn create(a: CreateArgs) -> anyhow::Result<()> {
    if a.memfd {
        let name = a.path.to_string_lossy().into_owned();
        let region = Region::create_memfd(&name, a.size)?;
        let again = Region::from_fd(region.try_clone_fd()?).context("reopening the memfd")?;
        let ro = ReadOnlyRegion::from_fd(region.read_only_fd()?)
            .context("reopening the memfd read-only")?;
        anyhow::ensure!(again.header() == region.header() && ro.header() == region.header());
        print_info(&region.info());
        println!("memfd verified through a second and a read-only mapping; it is released on exit");
        return Ok(());
    }
    let region = Region::create_file(&a.path, a.size)?;
    print_info(&region.info());
    Ok(())
}

fn open_for_info(path: &std::path::Path) -> anyhow::Result<RegionInfo> {
    // A writable open tells a DAX file (MAP_SYNC) from a page-cache file; without write
    // permission fall back to a read-only look.
    match Region::open(path) {
        Ok(r) => Ok(r.info()),
        Err(pmlab_native::RegionError::Io { op: "open", .. }) => {
            Ok(ReadOnlyRegion::open(path)?.info())
        }
        Err(e) => Err(e.into()),
    }
}

fn info(a: PathArgs) -> anyhow::Result<()> {
    print_info(&open_for_info(&a.path)?);
    Ok(())
}

fn check(a: PathArgs) -> anyhow::Result<()> {
    let ro = ReadOnlyRegion::open(&a.path)?;
    let h = ro.header();
    println!(
        "{}: ok (layout version {}, {} bytes, header checksum {:#010x})",
        a.path.display(),
        h.version,
        h.region_size,
        h.checksum
    );
    Ok(())
}

fn print_info(i: &RegionInfo) {
    let h = &i.header;
    let cpu = CpuPersistFeatures::detect();
    let mode = i
        .persist_mode
        .unwrap_or_else(|| default_persist_mode(i.medium, cpu));
    println!("region        {}", i.source);
    println!("medium        {}", i.medium.name());
    println!("layout        version {}", h.version);
    println!("region size   {} bytes", h.region_size);
    println!(
        "data area     {} bytes at offset {}",
        h.data_size, h.data_offset
    );
    println!("created       {} (Unix seconds)", h.created_unix);
    println!("checksum      {:#010x}", h.checksum);
    println!(
        "cpu           clflush={} clflushopt={} clwb={}",
        cpu.clflush, cpu.clflushopt, cpu.clwb
    );
    println!("persist mode  {mode}");
}

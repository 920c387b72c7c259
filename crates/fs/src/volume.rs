//! A volume on this machine: a directory holding the metadata space (`meta`) and one
//! data space per permission domain (`data.<n>`). Separate files are what lets the kernel
//! protect them separately: a client gets each as its own descriptor, opened read-only
//! or read-write as its rights allow.
//!
//! Each space file is a region of the native substrate: a header page (magic, layout
//! version, sizes, CRC-32; see `pmlab_native::Header`) followed by the space's pages, so
//! that a space is recognised and checked wherever it is mapped. [`space_file_len`]
//! gives the resulting file size.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use pmlab_native::{Region, RegionSource};

use crate::error::{FsError, Result};
use crate::layout::{Params, Superblock};
use crate::map::{Map, ReadOnly, SPACE_HEADER_BYTES, Writable};
use crate::media::PAGE;
use crate::mkfs::{RootOwner, mkfs};

/// Path of the metadata space of the volume at `dir`.
pub fn meta_path(dir: &Path) -> PathBuf {
    dir.join("meta")
}

/// Path of domain `d`'s data space.
pub fn data_path(dir: &Path, d: u16) -> PathBuf {
    dir.join(format!("data.{d}"))
}

/// Size of a space file holding `pages` file-system pages: the region header page plus
/// the pages.
pub fn space_file_len(pages: u64) -> u64 {
    SPACE_HEADER_BYTES + pages * PAGE
}

fn region_error(path: &Path, e: pmlab_native::RegionError) -> FsError {
    FsError::Foreign(format!("{}: {e}", path.display()))
}

fn open(path: &Path, write: bool) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .map_err(|e| FsError::io(format!("open {}", path.display()), e))
}

/// Creates a volume directory at `dir` and builds an empty file system in it.
pub fn create(dir: &Path, p: &Params, owner: RootOwner) -> Result<Superblock> {
    if dir.exists()
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(FsError::Exists(format!(
            "{} exists and is not an empty directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| FsError::io(format!("mkdir {}", dir.display()), e))?;
    // Only the service (the volume's owner) may open the files; clients get descriptors.
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let sb = Superblock::plan(p)?;
    let mp = meta_path(dir);
    let region = Region::create_file(&mp, space_file_len(sb.meta_pages))
        .map_err(|e| region_error(&mp, e))?;
    let mut m = Writable(Map::from_region(region));
    let sb = mkfs(&mut m, p, owner)?;
    m.0.sync()?;
    Ok(sb)
}

/// Opens the metadata space read-only (fsck, inspection).
pub fn open_meta_ro(dir: &Path) -> Result<(File, ReadOnly)> {
    let mp = meta_path(dir);
    if !mp.is_file() {
        return Err(FsError::Foreign(format!(
            "{} has no metadata space ({} is missing)",
            dir.display(),
            mp.display()
        )));
    }
    let f = open(&mp, false)?;
    let m = ReadOnly(Map::of_file(&f, false)?);
    Ok((f, m))
}

/// Opens the metadata space writable (the service).
pub fn open_meta_rw(dir: &Path) -> Result<(File, Writable)> {
    let mp = meta_path(dir);
    if !mp.is_file() {
        return Err(FsError::Foreign(format!(
            "{} has no metadata space ({} is missing)",
            dir.display(),
            mp.display()
        )));
    }
    let f = open(&mp, true)?;
    let m = Writable(Map::of_file(&f, true)?);
    Ok((f, m))
}

/// Opens (creating it if `create`) domain `d`'s data space, sized for `sb`.
pub fn open_data(dir: &Path, sb: &Superblock, d: u16, create: bool) -> Result<File> {
    let p = data_path(dir, d);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(&p)
        .map_err(|e| FsError::io(format!("open {}", p.display()), e))?;
    let want = space_file_len(sb.domain_pages);
    let len = f
        .metadata()
        .map_err(|e| FsError::io(format!("stat {}", p.display()), e))?
        .len();
    if len != want {
        if create && len == 0 {
            // A fresh (or never formatted) space: give it its region header.
            let fd = f
                .try_clone()
                .map_err(|e| FsError::io(format!("dup {}", p.display()), e))?;
            Region::format(fd.into(), RegionSource::Path(p.clone()), want)
                .map_err(|e| region_error(&p, e))?;
        } else {
            return Err(FsError::Corrupt {
                what: "domain data space",
                at: crate::error::Location { page: 0, offset: 0 },
                why: format!("{} holds {len} bytes, expected {want}", p.display()),
            });
        }
    }
    Ok(f)
}

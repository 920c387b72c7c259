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

/// Creates the space file at `path` (which must not exist) with mode 0600 whatever the
/// umask: the volume's files are the service's alone.
fn create_private(path: &Path) -> Result<File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| FsError::io(format!("create {}", path.display()), e))?;
    // The umask can only take bits away; set exactly 0600 whatever it took.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(|e| FsError::io(format!("chmod {}", path.display()), e))?;
    Ok(f)
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
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| FsError::io(format!("chmod {}", dir.display()), e))?;
    let sb = Superblock::plan(p)?;
    let mp = meta_path(dir);
    let f = create_private(&mp)?;
    let region = Region::format(
        f.into(),
        RegionSource::Path(mp.clone()),
        space_file_len(sb.meta_pages),
    )
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

/// Creates domain `d`'s data space afresh, sized for `sb` (a file left by a domain that
/// used the number before is removed first: it may still be mapped by a process that
/// held that domain, which must not reach the new one through it).
pub fn create_data(dir: &Path, sb: &Superblock, d: u16) -> Result<File> {
    let p = data_path(dir, d);
    match std::fs::remove_file(&p) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(FsError::io(format!("remove {}", p.display()), e)),
    }
    create_private(&p)?;
    open_data(dir, sb, d, true)
}

/// Opens domain `d`'s data space for a client's descriptor: read-only, or read-write
/// if `write`.
pub fn open_data_for(dir: &Path, d: u16, write: bool) -> Result<File> {
    open(&data_path(dir, d), write)
}

/// Refuses to serve a volume whose directory or files another user could write, or
/// that this process's user does not own: the service must be their only writer, and a
/// client in a group that may write `meta` could reopen its read-only descriptor
/// read-write through `/proc/self/fd`. The error names the file, its mode and owner.
pub fn check_private(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let mut paths = vec![dir.to_path_buf()];
    let entries =
        std::fs::read_dir(dir).map_err(|e| FsError::io(format!("list {}", dir.display()), e))?;
    for e in entries {
        let e = e.map_err(|e| FsError::io(format!("list {}", dir.display()), e))?;
        paths.push(e.path());
    }
    for p in paths {
        let m = std::fs::symlink_metadata(&p)
            .map_err(|e| FsError::io(format!("stat {}", p.display()), e))?;
        let why = if m.uid() != me {
            format!("is owned by uid {}, not by the service's uid {me}", m.uid())
        } else if m.mode() & 0o022 != 0 {
            format!(
                "has mode {:o}: its group or others may write it",
                m.mode() & 0o7777
            )
        } else {
            continue;
        };
        return Err(FsError::Denied(format!(
            "{} {why}; the service must be the only writer of its volume (run it under \
             the volume's own uid, and chmod go-w the volume directory and its files)",
            p.display()
        )));
    }
    Ok(())
}

/// Opens (creating it if `create`) domain `d`'s data space, sized for `sb`.
pub fn open_data(dir: &Path, sb: &Superblock, d: u16, create: bool) -> Result<File> {
    let p = data_path(dir, d);
    if create && !p.exists() {
        create_private(&p)?;
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
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

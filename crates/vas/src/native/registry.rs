//! The persistent registry of VASes and segments: a directory that outlives every
//! process (the paper's future work on persistence, §7), with the kernel's file
//! permissions as the permission model (§3.2: "use existing security models").
//!
//! ```text
//! DIR/REGISTRY        "pmlab-vas registry 1": marks the directory as a registry
//! DIR/.lock           flock(2) for changes (the kernel drops it if its holder dies)
//! DIR/vas/NAME.toml   a VAS: id, TLB tag hint, its global segments and their access
//! DIR/seg/NAME.seg    a segment: header page + bytes (see segfile)
//! DIR/seg/NAME.lock   its reader-writer lock (see lock)
//! DIR/seg/NAME.create flock(2) held by a client while it builds objects named NAME
//!                     in several steps (see Registry::creation_lock); may stay behind
//! ```
//!
//! A VAS file's and a segment file's owner and mode are the object's owner and mode:
//! reading a VAS file (find, attach) and opening a segment read-write (a writable
//! attachment) are the kernel's decisions. A lock file is writable by everyone who may
//! read its segment, since readers take it too. The object directories are sticky
//! (like /tmp): anyone may create objects, only owners replace or remove theirs.
//! Every change is a new file renamed into place, so a kill at any instant leaves
//! either the old or the new object.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::lock::SegLock;
use super::segfile::{FLAG_LOCKABLE, FLAGS_AT, HEADER_BYTES, SegHeader};
use crate::api::{Access, Mode, check_name};
use crate::error::VasError;

const MARKER: &str = "pmlab-vas registry 1\n";
/// Bytes of global address range each registry places its segments in.
pub const WINDOW_BYTES: u64 = 1 << 40;
/// Windows in the global range.
pub const WINDOWS: u64 = (GLOBAL_HI - GLOBAL_LO) / WINDOW_BYTES;
const VAS_FORMAT: &str = "pmlab-vas 1";
/// Largest VAS file read: far above any real record (about 50 bytes per segment).
const MAX_VAS_FILE: usize = 1 << 20;
/// Global segments are placed in [GLOBAL_LO, GLOBAL_HI); process-private ones above,
/// so the two never collide (§4.1).
pub const GLOBAL_LO: u64 = 0x1000_0000_0000;
/// End of the global segment range.
pub const GLOBAL_HI: u64 = 0x3000_0000_0000;
/// Alignment of segments the registry places: 2 MiB, a large page.
pub const PLACE_ALIGN: u64 = 2 << 20;

/// One global segment of a VAS, as its file lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VasEntry {
    /// Segment name.
    pub segment: String,
    /// How it is mapped.
    pub access: Access,
}

/// A VAS file's contents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VasRecord {
    /// `pmlab-vas 1`.
    pub format: String,
    /// Registry id.
    pub id: u64,
    /// Name (the file's stem).
    pub name: String,
    /// TLB tag requested via `vas_ctl`.
    #[serde(default)]
    pub tlb_tag: bool,
    /// Global segments.
    #[serde(default)]
    pub segments: Vec<VasEntry>,
}

/// Owner and mode of an object's file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileOwner {
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
    /// Permission bits.
    pub mode: Mode,
}

/// One version of a registry file: every change of an object is a new file renamed
/// into place (a new inode), and a chmod or chown changes the change time (a file
/// written in place, as the registry never does, changes its size or times).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> FileStamp {
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// A registry directory.
///
/// Addresses are unique within a registry, which is the global namespace of the
/// processes that use it (the paper's one OS). So that several registries can be used
/// by one process (tests, tools), each places segments in its own 1 TiB window of the
/// global range, chosen when it is created and recorded in its marker.
#[derive(Clone, Debug)]
pub struct Registry {
    dir: PathBuf,
    window: u64,
}

/// An exclusive hold of the registry's change lock (released on drop or death).
pub struct ChangeLock(std::fs::File);

impl Drop for ChangeLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(self.0.as_fd(), rustix::fs::FlockOperation::Unlock);
    }
}

fn owner_of(meta: &std::fs::Metadata) -> FileOwner {
    FileOwner {
        uid: meta.uid(),
        gid: meta.gid(),
        mode: Mode(meta.mode() & 0o777),
    }
}

impl Registry {
    /// Opens the registry in `dir`, creating it if `create` (and it does not exist). A
    /// directory without the marker, or with another marker, is refused.
    pub fn open(dir: &Path, create: bool) -> Result<Registry, VasError> {
        if create && !dir.join("REGISTRY").exists() {
            return Self::create(dir, 0);
        }
        Self::open_existing(dir)
    }

    /// Creates a registry in `dir` placing segments in window `window` (0..32) of the
    /// global range.
    pub fn create(dir: &Path, window: u64) -> Result<Registry, VasError> {
        if window >= WINDOWS {
            return Err(VasError::Invalid {
                field: "window",
                problem: format!("{window}: there are {WINDOWS}"),
            });
        }
        let marker = dir.join("REGISTRY");
        {
            std::fs::create_dir_all(dir).map_err(|e| VasError::io("create registry", dir, e))?;
            for sub in ["vas", "seg"] {
                let d = dir.join(sub);
                std::fs::create_dir_all(&d).map_err(|e| VasError::io("create", &d, e))?;
                std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777))
                    .map_err(|e| VasError::io("chmod", &d, e))?;
            }
            let lock = dir.join(".lock");
            write_new(&lock, b"", 0o666)?;
            write_new(
                &marker,
                format!("{MARKER}window {window}\n").as_bytes(),
                0o644,
            )?;
        }
        Self::open_existing(dir)
    }

    fn open_existing(dir: &Path) -> Result<Registry, VasError> {
        let marker = dir.join("REGISTRY");
        let text = std::fs::read(&marker).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => VasError::NotFound {
                kind: "registry",
                name: format!(
                    "{} (no REGISTRY file; create one with `pmlab vas create`)",
                    dir.display()
                ),
            },
            _ => VasError::io("read", &marker, e),
        })?;
        let text = String::from_utf8_lossy(&text);
        let Some(rest) = text.strip_prefix(MARKER) else {
            return Err(VasError::format(
                &marker,
                "line 1",
                "not a pmlab-vas registry marker",
            ));
        };
        let window = rest
            .trim()
            .strip_prefix("window ")
            .and_then(|w| w.parse::<u64>().ok())
            .filter(|&w| w < WINDOWS)
            .ok_or_else(|| {
                VasError::format(
                    &marker,
                    "line 2",
                    format!("{:?} is not `window N` with N < {WINDOWS}", rest.trim()),
                )
            })?;
        Ok(Registry {
            dir: dir.to_path_buf(),
            window,
        })
    }

    /// The registry's window of the global range: `[lo, hi)`.
    pub fn window(&self) -> (u64, u64) {
        let lo = GLOBAL_LO + self.window * WINDOW_BYTES;
        (lo, lo + WINDOW_BYTES)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Takes the change lock.
    pub fn change_lock(&self) -> Result<ChangeLock, VasError> {
        let p = self.dir.join(".lock");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .open(&p)
            .map_err(|e| VasError::io("open", &p, e))?;
        rustix::fs::flock(f.as_fd(), rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| VasError::io("flock", &p, e.into()))?;
        Ok(ChangeLock(f))
    }

    /// Takes the creation lock of `name`, waiting while another process holds it: a
    /// client that builds several objects under one name in steps (a VAS, its segment,
    /// a second VAS) holds it throughout, so that another client making the same name
    /// at once waits and then finds the objects complete, and one that finds them half
    /// made knows their maker died (the kernel drops a dead holder's flock). The file
    /// is opened read-only (flock needs no more), never through a symbolic link and
    /// never blocking on a FIFO, and must be a regular file.
    pub fn creation_lock(&self, name: &str) -> Result<ChangeLock, VasError> {
        use rustix::fs::{FileType, Mode as FMode, OFlags};
        check_name(name)?;
        let p = self.dir.join("seg").join(format!("{name}.create"));
        let fd = rustix::fs::open(
            &p,
            OFlags::RDONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            FMode::from_raw_mode(0o644),
        )
        .map_err(|e| VasError::io("open creation lock", &p, e.into()))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| VasError::io("stat", &p, e.into()))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(VasError::format(&p, "file type", "not a regular file"));
        }
        rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| VasError::io("flock", &p, e.into()))?;
        Ok(ChangeLock(fd.into()))
    }

    /// Path of VAS `name`'s file.
    pub fn vas_path(&self, name: &str) -> PathBuf {
        self.dir.join("vas").join(format!("{name}.toml"))
    }

    /// Path of segment `name`'s file.
    pub fn seg_path(&self, name: &str) -> PathBuf {
        self.dir.join("seg").join(format!("{name}.seg"))
    }

    /// Path of segment `name`'s lock file.
    pub fn lock_path(&self, name: &str) -> PathBuf {
        self.dir.join("seg").join(format!("{name}.lock"))
    }

    fn names(&self, sub: &str, ext: &str) -> Result<Vec<String>, VasError> {
        let d = self.dir.join(sub);
        let mut v = Vec::new();
        for e in std::fs::read_dir(&d).map_err(|e| VasError::io("list", &d, e))? {
            let e = e.map_err(|e| VasError::io("list", &d, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(ext) {
                if check_name(stem).is_ok() {
                    v.push(stem.to_string());
                }
            }
        }
        v.sort();
        Ok(v)
    }

    /// Names of all VASes.
    pub fn vas_names(&self) -> Result<Vec<String>, VasError> {
        self.names("vas", ".toml")
    }

    /// Names of all segments.
    pub fn seg_names(&self) -> Result<Vec<String>, VasError> {
        self.names("seg", ".seg")
    }

    /// Reads VAS `name` (the kernel checks read permission).
    pub fn read_vas(&self, name: &str) -> Result<(VasRecord, FileOwner), VasError> {
        self.read_vas_stamped(name).map(|(r, o, _)| (r, o))
    }

    /// The stamp of VAS `name`'s file as it is now (one stat), if it exists.
    pub fn vas_stamp(&self, name: &str) -> Option<FileStamp> {
        check_name(name).ok()?;
        std::fs::metadata(self.vas_path(name))
            .ok()
            .map(|m| FileStamp::of(&m))
    }

    /// Reads VAS `name` (the kernel checks read permission), with the stamp of the
    /// file read.
    pub fn read_vas_stamped(
        &self,
        name: &str,
    ) -> Result<(VasRecord, FileOwner, FileStamp), VasError> {
        check_name(name)?;
        let p = self.vas_path(name);
        let mut f =
            std::fs::File::open(&p).map_err(|e| not_found_or(e, "VAS", name, "open", &p))?;
        let meta = f.metadata().map_err(|e| VasError::io("stat", &p, e))?;
        // Sized from the stat just made (read_to_string would stat and seek again); a
        // file too large for any VAS record is refused before anything is allocated.
        let too_large = || {
            VasError::format(
                &p,
                "byte 0 (size)",
                format!("more than {MAX_VAS_FILE} bytes: not a VAS record"),
            )
        };
        let len = usize::try_from(meta.len()).map_err(|_| too_large())?;
        if len > MAX_VAS_FILE {
            return Err(too_large());
        }
        let mut bytes = vec![0u8; len + 1];
        let n = read_up_to(&mut f, &mut bytes).map_err(|e| VasError::io("read", &p, e))?;
        if n > len {
            // It grew since the stat (a writer does not do that: records are renamed
            // into place whole).
            return Err(VasError::format(&p, "byte 0 (size)", "changed while read"));
        }
        bytes.truncate(n);
        let text = String::from_utf8(bytes)
            .map_err(|e| VasError::format(&p, "byte 0", format!("not UTF-8 text: {e}")))?;
        // The text the registry writes is read directly; anything else by the TOML
        // parser (see vasrec). The checks below apply to both.
        let parsed = super::vasrec::parse_canonical(&text).map(Ok);
        let rec: VasRecord = parsed
            .unwrap_or_else(|| toml::from_str(&text))
            .map_err(|e| {
                let at = e
                    .span()
                    .map(|s| {
                        let line = text[..s.start].matches('\n').count() + 1;
                        format!("line {line}")
                    })
                    .unwrap_or_else(|| "line ?".into());
                VasError::format(&p, at, e.message().to_string())
            })?;
        if rec.format != VAS_FORMAT {
            return Err(VasError::format(
                &p,
                "field format",
                format!("{:?}, expected {VAS_FORMAT:?}", rec.format),
            ));
        }
        if rec.name != name {
            return Err(VasError::format(
                &p,
                "field name",
                format!("{:?} does not match the file name", rec.name),
            ));
        }
        Ok((rec, owner_of(&meta), FileStamp::of(&meta)))
    }

    /// Writes VAS `rec` (new file renamed into place). `mode` for a new file; an
    /// existing one keeps its mode and owner.
    pub fn write_vas(&self, rec: &VasRecord, mode: Mode) -> Result<(), VasError> {
        let p = self.vas_path(&rec.name);
        let text = toml::to_string(rec).expect("a VAS record serializes");
        let keep = std::fs::metadata(&p).ok();
        let tmp = self.tmp_path("vas", &rec.name);
        write_new(
            &tmp,
            text.as_bytes(),
            keep.as_ref().map_or(mode.0, |m| m.mode() & 0o777),
        )?;
        if let Some(m) = keep {
            let _ = std::os::unix::fs::chown(&tmp, Some(m.uid()), Some(m.gid()));
        }
        std::fs::rename(&tmp, &p).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            VasError::io("replace VAS file", &p, e)
        })
    }

    fn tmp_path(&self, sub: &str, name: &str) -> PathBuf {
        self.dir
            .join(sub)
            .join(format!(".{name}.{}.tmp", std::process::id()))
    }

    /// Reads segment `name`'s header, flags and owner.
    pub fn read_seg(&self, name: &str) -> Result<(SegHeader, u32, FileOwner), VasError> {
        check_name(name)?;
        let p = self.seg_path(name);
        let mut f =
            std::fs::File::open(&p).map_err(|e| not_found_or(e, "segment", name, "open", &p))?;
        let meta = f.metadata().map_err(|e| VasError::io("stat", &p, e))?;
        let mut b = vec![0u8; FLAGS_AT as usize + 4];
        let n = read_up_to(&mut f, &mut b).map_err(|e| VasError::io("read", &p, e))?;
        b.truncate(n);
        let (h, flags) = SegHeader::decode(&b, meta.len(), &p)?;
        // A header may come from a hostile writer: its range must be one this registry
        // could have placed, so that no attach maps it over other memory of a process.
        let (lo, hi) = self.window();
        if h.base < lo || h.base.checked_add(h.size).is_none_or(|end| end > hi) {
            return Err(VasError::format(
                &p,
                "byte 24 (base/size)",
                format!(
                    "[{:#x}, +{}) lies outside the registry's window [{lo:#x}, {hi:#x})",
                    h.base, h.size
                ),
            ));
        }
        if h.name != name {
            return Err(VasError::format(
                &p,
                "byte 64 (name)",
                format!("{:?} does not match the file name", h.name),
            ));
        }
        Ok((h, flags, owner_of(&meta)))
    }

    /// All segments' headers (a corrupt one is an error naming its file).
    pub fn segments(&self) -> Result<Vec<SegHeader>, VasError> {
        self.seg_names()?
            .iter()
            .map(|n| self.read_seg(n).map(|(h, _, _)| h))
            .collect()
    }

    /// The next free id: one above every id in use. Call under the change lock.
    pub fn next_id(&self) -> Result<u64, VasError> {
        let mut max = 0;
        for n in self.vas_names()? {
            if let Ok((r, _)) = self.read_vas(&n) {
                max = max.max(r.id);
            }
        }
        for h in self.segments()? {
            max = max.max(h.id);
        }
        Ok(max + 1)
    }

    /// The segment whose range meets `[base, base + size)`, other than `except`'s clone
    /// family.
    pub fn overlapping(
        &self,
        base: u64,
        size: u64,
        except: Option<u64>,
    ) -> Result<Option<SegHeader>, VasError> {
        Ok(self.segments()?.into_iter().find(|h| {
            let family = except.is_some_and(|id| h.id == id || h.clone_of == id);
            !family && h.base < base + size && base < h.base + h.size
        }))
    }

    /// A free range of `size` bytes in the global range, above every segment placed.
    pub fn place(&self, size: u64) -> Result<u64, VasError> {
        let (lo, hi) = self.window();
        let top = self
            .segments()?
            .iter()
            .map(|h| h.base + h.size)
            .filter(|&e| e <= hi)
            .max()
            .unwrap_or(lo);
        let base = top.max(lo).next_multiple_of(PLACE_ALIGN);
        if base.checked_add(size).is_none_or(|end| end > hi) {
            return Err(VasError::Refused(format!(
                "no room for {size} bytes in the registry's window [{lo:#x}, {hi:#x})"
            )));
        }
        Ok(base)
    }

    /// Creates segment `h` with mode `mode`: its lock file, then its file with the
    /// header and `contents` (zeros when `None`), renamed into place last so that a
    /// segment that exists is complete.
    pub fn create_seg(
        &self,
        h: &SegHeader,
        mode: Mode,
        lockable: bool,
        contents: Option<&Path>,
    ) -> Result<(), VasError> {
        let p = self.seg_path(&h.name);
        if p.exists() {
            return Err(VasError::Exists {
                kind: "segment",
                name: h.name.clone(),
            });
        }
        let lock_tmp = self.tmp_path("seg", &format!("{}-lock", h.name));
        write_new(&lock_tmp, b"", lock_mode(mode))?;
        SegLock::init(&lock_tmp)?;
        let tmp = self.tmp_path("seg", &h.name);
        let flags = if lockable { FLAG_LOCKABLE } else { 0 };
        write_new(&tmp, &h.encode(flags), mode.0)?;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&tmp)
            .map_err(|e| VasError::io("open", &tmp, e))?;
        f.set_len(HEADER_BYTES + h.size)
            .map_err(|e| VasError::io("size segment", &tmp, e))?;
        if let Some(src) = contents {
            copy_data(src, &f, h.size).map_err(|e| VasError::io("copy segment", src, e))?;
        }
        std::fs::rename(&lock_tmp, self.lock_path(&h.name))
            .map_err(|e| VasError::io("publish lock", &lock_tmp, e))?;
        std::fs::rename(&tmp, &p).map_err(|e| VasError::io("publish segment", &p, e))
    }

    /// Writes a segment's flags word (one aligned 4-byte write: atomic).
    pub fn set_seg_flags(&self, name: &str, flags: u32) -> Result<(), VasError> {
        use std::os::unix::fs::FileExt;
        let p = self.seg_path(name);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .map_err(|e| VasError::io("open for writing", &p, e))?;
        f.write_all_at(&flags.to_le_bytes(), FLAGS_AT)
            .map_err(|e| VasError::io("write flags", &p, e))
    }
}

/// A lock file is writable by whoever may read the segment.
pub fn lock_mode(seg: Mode) -> u32 {
    let m = seg.0;
    let mut out = 0o600;
    if m & 0o040 != 0 {
        out |= 0o060;
    }
    if m & 0o004 != 0 {
        out |= 0o006;
    }
    out
}

fn not_found_or(
    e: std::io::Error,
    kind: &'static str,
    name: &str,
    op: &'static str,
    p: &Path,
) -> VasError {
    if e.kind() == std::io::ErrorKind::NotFound {
        VasError::NotFound {
            kind,
            name: name.to_string(),
        }
    } else {
        VasError::io(op, p, e)
    }
}

fn read_up_to(f: &mut std::fs::File, b: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < b.len() {
        match f.read(&mut b[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Copies a segment's `size` data bytes from the file at `src` into `dst`.
fn copy_data(src: &Path, mut dst: &std::fs::File, size: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut from = std::fs::File::open(src)?;
    from.seek(SeekFrom::Start(HEADER_BYTES))?;
    dst.seek(SeekFrom::Start(HEADER_BYTES))?;
    let copied = std::io::copy(&mut from.take(size), &mut dst)?;
    if copied != size {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "source segment is short",
        ));
    }
    Ok(())
}

/// Creates `p` exclusively with `bytes` and exactly `mode` (the umask does not apply).
pub fn write_new(p: &Path, bytes: &[u8], mode: u32) -> Result<(), VasError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(p)
        .map_err(|e| VasError::io("create", p, e))?;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| VasError::io("chmod", p, e))?;
    f.write_all(bytes).map_err(|e| VasError::io("write", p, e))
}

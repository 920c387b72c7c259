//! Where the structure lives: a segment of a persistent VAS (pointers), a region file
//! mapped with `mmap` (offsets), or, for one-shot commands, anonymous memory.

use std::path::{Path, PathBuf};

use memmap2::{Advice, Mmap, MmapMut, MmapOptions};
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{Access, AttachTo, Mode, SegCtl, SpaceJmp, VasCtl, VasHandle};

use crate::arena::{Arena, Offsets, Pointers};
use crate::crash::{self, Broken};
use crate::error::SamError;
use crate::ingest::{Format, detect};

/// Bytes to reserve for loading `path`: generous, since segments and region files
/// are sparse on tmpfs (only what is written takes memory). A SAM record costs its
/// text plus about 120 bytes of record, pointers and orders; BAM expands about 4x
/// when decompressed.
pub fn arena_size_for(path: &Path) -> Result<u64, SamError> {
    let len = std::fs::metadata(path)
        .map_err(|e| SamError::io("stat", path, e))?
        .len();
    let factor = match detect(path)? {
        Format::Sam => 8,
        Format::Bam => 48,
    };
    let bytes = len.saturating_mul(factor) + (64 << 20);
    Ok(bytes.next_multiple_of(2 << 20))
}

/// The name of the read-only VAS beside VAS `name`: the same segment, attached
/// read-only, for processes that may not write it (and the mark that `name` was made
/// by `pmlab sam load`).
pub fn reader_vas(name: &str) -> String {
    format!("{name}.r")
}

/// The alignments in a segment of a VAS, switched in (segment and VAS share a name;
/// VAS `NAME.r` holds the segment read-only).
pub struct VasStore {
    spaces: NativeSpaces,
    vh: VasHandle,
    writable: bool,
    /// The structure, addressed by pointers.
    pub arena: Arena<Pointers>,
}

impl VasStore {
    /// A new VAS `name` in the registry `dir` with one lockable read-write segment of
    /// `size` bytes (mode `mode`, as the VASes), switched in with its lock held; the
    /// arena is not initialised yet. What a load that died left under this name is
    /// replaced; a finished load or anything else is refused.
    pub fn create(dir: &Path, name: &str, size: u64, mode: Mode) -> Result<Self, SamError> {
        let mut s = NativeSpaces::open(dir)?;
        // Held until this load holds the segment's lock: a second load of the name at
        // once waits here, then finds the objects whole and waits for the lock.
        let creating = if crash::broken(Broken::CreateUnlocked) {
            None
        } else {
            Some(s.registry().creation_lock(name)?)
        };
        if s.vas_find(name).is_ok()
            || s.seg_find(name).is_ok()
            || s.vas_find(&reader_vas(name)).is_ok()
        {
            drop(s);
            Self::replace_dead_load(dir, name)?;
            s = NativeSpaces::open(dir)?;
        }
        // The reader VAS first: it marks the name as ours for `replace_dead_load`.
        let rv = s.vas_create(&reader_vas(name), mode)?;
        crash::pause_point();
        let made = (|| {
            let sid = s.seg_alloc(name, None, size, mode)?;
            s.seg_ctl(sid, SegCtl::SetLockable(true))?;
            s.seg_attach(AttachTo::Vas(rv), sid, Access::ReadOnly)?;
            let vid = s.vas_create(name, mode)?;
            s.seg_attach(AttachTo::Vas(vid), sid, Access::ReadWrite)?;
            Ok::<_, pmlab_vas::VasError>(())
        })();
        if let Err(e) = made {
            drop(s);
            let _ = Self::remove(dir, name);
            return Err(e.into());
        }
        let st = Self::switch_in(s, name, name, true);
        drop(creating);
        st
    }

    /// Removes what a load that died left under `name`, after taking the segment's
    /// lock (which waits for a live loader and clears a dead one). Refuses a finished
    /// load, a name `pmlab sam load` did not make, and anything it may not write.
    fn replace_dead_load(dir: &Path, name: &str) -> Result<(), SamError> {
        let exists = || SamError::Format {
            what: format!("VAS {name}"),
            problem: "exists already (remove it first)".into(),
        };
        let s = NativeSpaces::open_with(dir, Default::default(), false)?;
        if s.vas_find(&reader_vas(name)).is_err() {
            return Err(exists());
        }
        match Self::switch_in(s, name, name, true) {
            Ok(st) => {
                let root = st.arena.root();
                let ours = root.magic == crate::layout::MAGIC || root.magic == [0; 8];
                if !ours || root.complete != 0 {
                    return Err(exists());
                }
            }
            Err(SamError::Vas(e @ pmlab_vas::VasError::PermissionDenied { .. })) => {
                return Err(e.into());
            }
            // Half made: the loader died between creating the parts.
            Err(_) => {}
        }
        Self::remove(dir, name)
    }

    /// Finds VAS `name` in `dir`, attaches it (read-write if `write`, else its reader
    /// VAS read-only: the kernel decides whether this process may write) and switches
    /// in, taking the segment's lock (exclusive or shared), and checks that it holds
    /// complete alignments.
    pub fn open(dir: &Path, name: &str, write: bool) -> Result<Self, SamError> {
        let s = NativeSpaces::open_with(dir, Default::default(), false)?;
        let vas = if write {
            name.to_string()
        } else {
            reader_vas(name)
        };
        let st = Self::switch_in(s, &vas, name, write)?;
        st.arena.validate(&format!("VAS {name}"))?;
        Ok(st)
    }

    /// Whether this store's mapping is writable.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The switch mechanism in use, and the number of mprotects so far.
    pub fn switch_info(&self) -> (pmlab_vas::native::Mechanism, u64) {
        (self.spaces.mechanism(), self.spaces.counters().mprotects)
    }

    fn switch_in(mut s: NativeSpaces, vas: &str, seg: &str, write: bool) -> Result<Self, SamError> {
        let vid = s.vas_find(vas)?;
        let vh = s.vas_attach(vid)?;
        s.vas_switch(vh)?;
        let missing = || SamError::Format {
            what: format!("VAS {vas}"),
            problem: format!("does not hold segment {seg}"),
        };
        // The segment as attached: its header was read once, by the attach.
        let sid = s.segment_in(vh, seg).ok_or_else(missing)?;
        let base = s.segment_base(sid).ok_or_else(missing)?;
        if s.active_access(sid).is_none() {
            return Err(missing());
        }
        let size = s.segment_size(sid).unwrap_or(0);
        // SAFETY: the segment is mapped at its fixed address, accessible (read-write if
        // `write`, else read-only: then nothing writes through the arena) while the VAS
        // is switched in, which it stays until this store is dropped.
        let mut arena = unsafe { Arena::new(Pointers { base: base as u64 }, base, size) };
        arena.set_label(format!("VAS {seg}"));
        Ok(VasStore {
            spaces: s,
            vh,
            writable: write,
            arena,
        })
    }

    /// Removes VAS `name`, its reader VAS and its segment (after a failed load).
    pub fn remove(dir: &Path, name: &str) -> Result<(), SamError> {
        let mut s = NativeSpaces::open_with(dir, Default::default(), false)?;
        for v in [name.to_string(), reader_vas(name)] {
            if let Ok(vid) = s.vas_find(&v) {
                s.vas_ctl(vid, VasCtl::Remove)?;
            }
        }
        if let Ok(sid) = s.seg_find(name) {
            s.seg_ctl(sid, SegCtl::Remove)?;
        }
        Ok(())
    }
}

impl Drop for VasStore {
    fn drop(&mut self) {
        // Leaves the VAS (releasing the segment lock); the data stays in it.
        let _ = self.spaces.vas_detach(self.vh);
    }
}

/// The alignments in a region file mapped with `mmap` (the paper's Figure 12 peer):
/// built with offsets, since the file lands at a different address in each process.
pub struct RegionFile {
    _map: Mapping,
    loading: Option<PathBuf>,
    path: PathBuf,
    writable: bool,
    /// The structure, addressed by offsets.
    pub arena: Arena<Offsets>,
}

/// A region file's mapping: read-write, or read-only for a process the kernel lets
/// only read the file (it holds no writable mapping of it).
enum Mapping {
    ReadWrite(#[allow(dead_code)] MmapMut),
    ReadOnly(#[allow(dead_code)] Mmap),
}

fn map(
    path: &Path,
    file: &std::fs::File,
    size: u64,
    writable: bool,
) -> Result<(Mapping, Arena<Offsets>), SamError> {
    let len = usize::try_from(size).map_err(|_| SamError::Format {
        what: path.display().to_string(),
        problem: format!("{size} bytes do not fit this machine's address space"),
    })?;
    // SAFETY: a file of this tool; other processes change it only through the same
    // structure (the paper's mmap version has no locking either).
    let (m, base) = if writable {
        let mut m = unsafe { MmapOptions::new().len(len).map_mut(file) }
            .map_err(|e| SamError::io("mmap", path, e))?;
        // As the paper: keep the region out of core dumps.
        let _ = m.advise(Advice::DontDump);
        let base = m.as_mut_ptr();
        (Mapping::ReadWrite(m), base)
    } else {
        // SAFETY: as above; nothing writes through a read-only mapping (the arena of a
        // read-only file is used only by the read-only operations).
        let m = unsafe { MmapOptions::new().len(len).map(file) }
            .map_err(|e| SamError::io("mmap", path, e))?;
        let _ = m.advise(Advice::DontDump);
        let base = m.as_ptr().cast_mut();
        (Mapping::ReadOnly(m), base)
    };
    // SAFETY: the mapping lives as long as the returned arena (both in one struct).
    let mut arena = unsafe { Arena::new(Offsets { base }, base, size) };
    arena.set_label(path.display().to_string());
    Ok((m, arena))
}

impl RegionFile {
    /// A new region file of `size` bytes at `path` (refused if it exists), built
    /// under a temporary name and put in place by [`RegionFile::commit`].
    pub fn create(path: &Path, size: u64) -> Result<Self, SamError> {
        if path.exists() {
            return Err(exists(path));
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".loading.{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| SamError::io("create", &tmp, e))?;
        f.set_len(size).map_err(|e| SamError::io("size", &tmp, e))?;
        let (m, arena) = map(&tmp, &f, size, true)?;
        Ok(RegionFile {
            _map: m,
            loading: Some(tmp),
            path: path.to_path_buf(),
            writable: true,
            arena,
        })
    }

    /// Opens an existing region file read-write and checks it. A process the kernel
    /// does not let write it gets `open for writing FILE: Permission denied`.
    pub fn open(path: &Path) -> Result<Self, SamError> {
        Self::open_as(path, true)
    }

    /// Opens an existing region file read-only (a read-only mapping) and checks it:
    /// for flagstat and view by a process that may read the file but not write it.
    pub fn open_read_only(path: &Path) -> Result<Self, SamError> {
        Self::open_as(path, false)
    }

    fn open_as(path: &Path, writable: bool) -> Result<Self, SamError> {
        let what = if writable { "open for writing" } else { "open" };
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| SamError::io(what, path, e))?;
        let size = f
            .metadata()
            .map_err(|e| SamError::io("stat", path, e))?
            .len();
        let (m, arena) = map(path, &f, size, writable)?;
        arena.validate(&path.display().to_string())?;
        Ok(RegionFile {
            _map: m,
            loading: None,
            path: path.to_path_buf(),
            writable,
            arena,
        })
    }

    /// Whether the mapping is writable.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Puts a freshly loaded file in place: a hard link to the final name, which fails
    /// if the name exists (another load of it finished first: that one stays), then
    /// the temporary name removed.
    pub fn commit(mut self) -> Result<(), SamError> {
        crash::pause_point();
        let Some(tmp) = self.loading.take() else {
            return Ok(());
        };
        let placed = if crash::broken(Broken::RenameOver) {
            std::fs::rename(&tmp, &self.path)
        } else {
            std::fs::hard_link(&tmp, &self.path)
        };
        let removed = std::fs::remove_file(&tmp);
        match placed {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(exists(&self.path)),
            Err(e) => Err(SamError::io("link", &tmp, e)),
            Ok(()) if crash::broken(Broken::RenameOver) => Ok(()),
            Ok(()) => removed.map_err(|e| SamError::io("remove", &tmp, e)),
        }
    }
}

fn exists(path: &Path) -> SamError {
    SamError::Format {
        what: path.display().to_string(),
        problem: "exists already (remove it first)".into(),
    }
}

impl Drop for RegionFile {
    fn drop(&mut self) {
        if let Some(tmp) = &self.loading {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Anonymous memory for one-shot commands (`pmlab sam flagstat FILE`).
pub struct Scratch {
    _map: MmapMut,
    /// The structure.
    pub arena: Arena<Offsets>,
}

impl Scratch {
    /// `size` bytes of anonymous memory (only touched pages cost).
    pub fn new(size: u64) -> Result<Self, SamError> {
        let mut m = MmapOptions::new()
            .len(size as usize)
            .map_anon()
            .map_err(|e| SamError::io("mmap", "anonymous memory", e))?;
        let base = m.as_mut_ptr();
        // SAFETY: the mapping lives as long as the arena (one struct).
        let arena = unsafe { Arena::new(Offsets { base }, base, size) };
        Ok(Scratch { _map: m, arena })
    }
}

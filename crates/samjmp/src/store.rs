//! Where the structure lives: a segment of a persistent VAS (pointers), a region file
//! mapped with `mmap` (offsets), or, for one-shot commands, anonymous memory.

use std::path::{Path, PathBuf};

use memmap2::{Advice, MmapMut, MmapOptions};
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{Access, AttachTo, Mode, SegCtl, SpaceJmp, VasCtl, VasHandle};

use crate::arena::{Arena, Offsets, Pointers};
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

/// The alignments in a segment of a VAS, switched in (segment and VAS share a name).
pub struct VasStore {
    spaces: NativeSpaces,
    vh: VasHandle,
    /// The structure, addressed by pointers.
    pub arena: Arena<Pointers>,
}

impl VasStore {
    /// A new VAS `name` in the registry `dir` with one read-write segment of `size`
    /// bytes, switched in; the arena is not initialised yet.
    pub fn create(dir: &Path, name: &str, size: u64) -> Result<Self, SamError> {
        let mut s = NativeSpaces::open(dir)?;
        let vid = s.vas_create(name, Mode(0o660))?;
        let made = (|| {
            let sid = s.seg_alloc(name, None, size, Mode(0o660))?;
            s.seg_attach(AttachTo::Vas(vid), sid, Access::ReadWrite)?;
            Ok::<_, pmlab_vas::VasError>(sid)
        })();
        if let Err(e) = made {
            let _ = s.vas_ctl(vid, VasCtl::Remove);
            return Err(e.into());
        }
        Self::switch_in(s, name)
    }

    /// Finds VAS `name` in `dir`, attaches it and switches in (taking its segment's
    /// lock), and checks that it holds complete alignments.
    pub fn open(dir: &Path, name: &str) -> Result<Self, SamError> {
        let s = NativeSpaces::open_with(dir, Default::default(), false)?;
        let st = Self::switch_in(s, name)?;
        st.arena.validate(&format!("VAS {name}"))?;
        Ok(st)
    }

    fn switch_in(mut s: NativeSpaces, name: &str) -> Result<Self, SamError> {
        let vid = s.vas_find(name)?;
        let sid = s.seg_find(name)?;
        let vh = s.vas_attach(vid)?;
        s.vas_switch(vh)?;
        let base = s.segment_base(sid).ok_or_else(|| SamError::Format {
            what: format!("VAS {name}"),
            problem: format!("does not hold segment {name}"),
        })?;
        let size = s.segment_size(sid).unwrap_or(0);
        // SAFETY: the segment is mapped read-write at its fixed address while the VAS
        // is switched in, which it stays until this store is dropped.
        let arena = unsafe { Arena::new(Pointers { base: base as u64 }, base, size) };
        Ok(VasStore {
            spaces: s,
            vh,
            arena,
        })
    }

    /// Removes VAS `name` and its segment (after a failed load).
    pub fn remove(dir: &Path, name: &str) -> Result<(), SamError> {
        let mut s = NativeSpaces::open_with(dir, Default::default(), false)?;
        if let Ok(vid) = s.vas_find(name) {
            s.vas_ctl(vid, VasCtl::Remove)?;
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
    _map: MmapMut,
    loading: Option<PathBuf>,
    path: PathBuf,
    /// The structure, addressed by offsets.
    pub arena: Arena<Offsets>,
}

fn map(
    path: &Path,
    file: &std::fs::File,
    size: u64,
) -> Result<(MmapMut, Arena<Offsets>), SamError> {
    // SAFETY: a file of this tool; other processes change it only through the same
    // structure (the paper's mmap version has no locking either).
    let mut m = unsafe { MmapOptions::new().len(size as usize).map_mut(file) }
        .map_err(|e| SamError::io("mmap", path, e))?;
    // As the paper: keep the region out of core dumps.
    let _ = m.advise(Advice::DontDump);
    let base = m.as_mut_ptr();
    // SAFETY: the mapping lives as long as the returned arena (both in one struct).
    let arena = unsafe { Arena::new(Offsets { base }, base, size) };
    Ok((m, arena))
}

impl RegionFile {
    /// A new region file of `size` bytes at `path` (refused if it exists), built
    /// under a temporary name and renamed into place by [`RegionFile::commit`].
    pub fn create(path: &Path, size: u64) -> Result<Self, SamError> {
        if path.exists() {
            return Err(SamError::io(
                "create",
                path,
                std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            ));
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
        let (m, arena) = map(&tmp, &f, size)?;
        Ok(RegionFile {
            _map: m,
            loading: Some(tmp),
            path: path.to_path_buf(),
            arena,
        })
    }

    /// Opens an existing region file and checks it.
    pub fn open(path: &Path) -> Result<Self, SamError> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| SamError::io("open", path, e))?;
        let size = f
            .metadata()
            .map_err(|e| SamError::io("stat", path, e))?
            .len();
        let (m, arena) = map(path, &f, size)?;
        arena.validate(&path.display().to_string())?;
        Ok(RegionFile {
            _map: m,
            loading: None,
            path: path.to_path_buf(),
            arena,
        })
    }

    /// Renames a freshly loaded file into place.
    pub fn commit(mut self) -> Result<(), SamError> {
        if let Some(tmp) = self.loading.take() {
            std::fs::rename(&tmp, &self.path).map_err(|e| SamError::io("rename", &tmp, e))?;
        }
        Ok(())
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

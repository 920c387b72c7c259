//! SCM regions: a header-validated, memory-mapped file, memfd or DAX device.
//!
//! A [`Region`] is writable and implements [`pmlab_spine::Memory`] over its data area
//! (spine address 0 is the first data byte; the header page is out of reach of spine
//! writes). A [`ReadOnlyRegion`] maps the same bytes with `PROT_READ` only, so that a
//! client that must not write metadata holds no writable mapping of it.

use std::fs::OpenOptions;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

use pmlab_spine::{
    Addr, FlushKind, Memory, PersistCounters, SpineError, check_bounds, lines_spanned,
};

use crate::error::{RegionError, RegionSource};
use crate::header::{DATA_OFFSET, HEADER_LEN, Header, MIN_REGION_SIZE};
use crate::mapping::{Mapping, Medium, backing_size};
use crate::persist::{CpuPersistFeatures, PersistMode, flush_lines, store_fence};

/// The mapped bytes, the descriptor they come from, and the validated header; shared by
/// the writable and the read-only region.
#[derive(Debug)]
struct Backing {
    map: Mapping,
    fd: OwnedFd,
    source: RegionSource,
    header: Header,
    medium: Medium,
}

impl Backing {
    fn open(fd: OwnedFd, source: RegionSource, writable: bool) -> Result<Backing, RegionError> {
        let (size, is_dev) = backing_size(fd.as_fd(), &source)?;
        if size < HEADER_LEN as u64 {
            return Err(RegionError::BadSize {
                source_name: source,
                size,
                problem: format!("shorter than the {HEADER_LEN}-byte header: not a pmlab region"),
            });
        }
        let len = usize::try_from(size).map_err(|_| RegionError::BadSize {
            source_name: source.clone(),
            size,
            problem: "larger than the address space".into(),
        })?;
        let (map, medium) = Mapping::new(fd.as_fd(), len, writable, is_dev, &source)?;
        let header = Header::decode(map.bytes(), size, &source)?;
        Ok(Backing {
            map,
            fd,
            source,
            header,
            medium,
        })
    }

    fn data(&self) -> &[u8] {
        &self.map.bytes()[self.header.data_offset as usize..]
    }

    fn info(&self, persist_mode: Option<PersistMode>) -> RegionInfo {
        RegionInfo {
            source: self.source.clone(),
            medium: self.medium,
            persist_mode,
            header: self.header,
        }
    }
}

/// What `pmlab scm info` prints about a region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    /// Where the region lives.
    pub source: RegionSource,
    /// What is behind the mapping.
    pub medium: Medium,
    /// The persist mode in use (`None` for a read-only region, which never persists).
    pub persist_mode: Option<PersistMode>,
    /// The validated header.
    pub header: Header,
}

/// A writable SCM region.
///
/// Spine addresses are offsets into the data area, which starts at
/// [`DATA_OFFSET`] in the backing object. Persist operations use the mode chosen at open
/// (see [`Region::persist_mode`]) and are counted.
#[derive(Debug)]
pub struct Region {
    backing: Backing,
    mode: PersistMode,
    counters: PersistCounters,
    /// Data-area byte range flushed since the last fence in `Msync` mode.
    msync_pending: Option<(usize, usize)>,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn check_new_size(size: u64, src: &RegionSource) -> Result<(), RegionError> {
    let problem = if size < MIN_REGION_SIZE {
        format!("smaller than the minimum of {MIN_REGION_SIZE} bytes (header page + one data page)")
    } else if size & (DATA_OFFSET - 1) != 0 {
        format!("not a multiple of the {DATA_OFFSET}-byte page")
    } else {
        return Ok(());
    };
    Err(RegionError::BadSize {
        source_name: src.clone(),
        size,
        problem,
    })
}

/// The persist mode a medium needs on this CPU.
pub fn default_persist_mode(medium: Medium, cpu: CpuPersistFeatures) -> PersistMode {
    match medium {
        Medium::PageCache => PersistMode::Msync,
        Medium::Tmpfs | Medium::DaxDevice | Medium::DaxFile => cpu.best_mode(),
    }
}

impl Region {
    /// Creates a new region file of `size` bytes at `path` (which must not exist) and
    /// formats it. A device-DAX character device is formatted in place instead; then
    /// `size` must equal the device's size.
    pub fn create_file(path: &Path, size: u64) -> Result<Region, RegionError> {
        let src = RegionSource::Path(path.to_path_buf());
        let is_dev = std::fs::metadata(path)
            .map(|m| std::os::unix::fs::FileTypeExt::is_char_device(&m.file_type()))
            .unwrap_or(false);
        let file = if is_dev {
            OpenOptions::new().read(true).write(true).open(path)
        } else {
            check_new_size(size, &src)?;
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(path)
        }
        .map_err(|e| RegionError::io(&src, "create", e))?;
        Self::format(file.into(), src, size)
    }

    /// Creates an anonymous memory file (`memfd_create`, close-on-exec) of `size` bytes
    /// and formats it. Pass its descriptor ([`Region::try_clone_fd`]) to other processes.
    pub fn create_memfd(name: &str, size: u64) -> Result<Region, RegionError> {
        let src = RegionSource::Memfd(name.to_string());
        check_new_size(size, &src)?;
        let fd = rustix::fs::memfd_create(
            name,
            rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
        )
        .map_err(|e| RegionError::io(&src, "memfd_create", e))?;
        Self::format(fd, src, size)
    }

    /// Formats the object behind `fd` as a fresh region of `size` bytes (resizing it,
    /// unless it is a device, whose size must then match). Everything in it is lost.
    pub fn format(fd: OwnedFd, source: RegionSource, size: u64) -> Result<Region, RegionError> {
        let (actual, is_dev) = backing_size(fd.as_fd(), &source)?;
        if is_dev {
            if actual != size {
                return Err(RegionError::BadSize {
                    source_name: source,
                    size,
                    problem: format!("the device holds {actual} bytes; give exactly that size"),
                });
            }
        } else {
            check_new_size(size, &source)?;
            rustix::fs::ftruncate(&fd, size)
                .map_err(|e| RegionError::io(&source, "ftruncate", e))?;
        }
        let len = usize::try_from(size).map_err(|_| RegionError::BadSize {
            source_name: source.clone(),
            size,
            problem: "larger than the address space".into(),
        })?;
        let (mut map, medium) = Mapping::new(fd.as_fd(), len, true, is_dev, &source)?;
        let header = Header::new(size, unix_now());
        // SAFETY: the mapping was made writable just above.
        let bytes = unsafe { map.bytes_mut() };
        bytes[..HEADER_LEN as usize].copy_from_slice(&header.encode());
        let mode = default_persist_mode(medium, CpuPersistFeatures::detect());
        let mut region = Region {
            backing: Backing {
                map,
                fd,
                source,
                header,
                medium,
            },
            mode,
            counters: PersistCounters::default(),
            msync_pending: None,
        };
        region.persist_header()?;
        Ok(region)
    }

    fn persist_header(&mut self) -> Result<(), RegionError> {
        if self.mode == PersistMode::Msync {
            return self
                .backing
                .map
                .msync(0, HEADER_LEN as usize)
                .map_err(|e| RegionError::io(&self.backing.source, "msync", e));
        }
        // SAFETY: the header lies inside the live mapping.
        unsafe { flush_lines(self.mode, self.backing.map.ptr(), HEADER_LEN as usize) };
        store_fence(self.mode);
        Ok(())
    }

    /// Opens and validates an existing region file or DAX device for writing.
    pub fn open(path: &Path) -> Result<Region, RegionError> {
        let src = RegionSource::Path(path.to_path_buf());
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| RegionError::io(&src, "open", e))?;
        Self::from_fd_named(file.into(), src)
    }

    /// Opens and validates the region behind a descriptor (a memfd received from another
    /// process, say) for writing. The descriptor must be open read-write.
    pub fn from_fd(fd: OwnedFd) -> Result<Region, RegionError> {
        let src = RegionSource::Fd(fd.as_raw_fd());
        Self::from_fd_named(fd, src)
    }

    /// [`Region::from_fd`] with a name for error messages.
    pub fn from_fd_named(fd: OwnedFd, source: RegionSource) -> Result<Region, RegionError> {
        let backing = Backing::open(fd, source, true)?;
        let mode = default_persist_mode(backing.medium, CpuPersistFeatures::detect());
        Ok(Region {
            backing,
            mode,
            counters: PersistCounters::default(),
            msync_pending: None,
        })
    }

    /// The persist mode in use: chosen at open from the medium and CPUID.
    pub fn persist_mode(&self) -> PersistMode {
        self.mode
    }

    /// Switches to another persist mode (to compare instructions). Refused when the CPU
    /// lacks the instruction, or when a CPU mode is asked for a page-cache file, where it
    /// would not make anything durable.
    pub fn set_persist_mode(&mut self, mode: PersistMode) -> Result<(), RegionError> {
        let problem = if !CpuPersistFeatures::detect().supports(mode) {
            Some("this CPU does not have the instruction (CPUID)".to_string())
        } else if self.backing.medium == Medium::PageCache && mode != PersistMode::Msync {
            Some("the region is a page-cache file; only msync makes it durable".to_string())
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(RegionError::Unsupported {
                source_name: self.backing.source.clone(),
                mode,
                problem,
            });
        }
        self.fence();
        self.mode = mode;
        Ok(())
    }

    /// Maps every page of the region now, so that no load or store of it takes a page
    /// fault later. A region on tmpfs stands for SCM, whose pages exist and are mapped
    /// from the start (Aerie's SCM manager maps them once); left to demand paging, tmpfs
    /// allocates, zeroes and maps each page at its first touch, a fault that costs more
    /// than a whole 4 KiB write and that SCM never pays. It commits the region's whole
    /// size in memory, so only users that want SCM's behaviour ask for it. Refused by
    /// kernels before 5.14 (`MADV_POPULATE_*`), which then keep demand paging.
    pub fn populate(&self) -> std::io::Result<()> {
        self.backing.map.populate(true)
    }

    /// What is behind the mapping.
    pub fn medium(&self) -> Medium {
        self.backing.medium
    }

    /// The validated header.
    pub fn header(&self) -> &Header {
        &self.backing.header
    }

    /// Where the region lives.
    pub fn source(&self) -> &RegionSource {
        &self.backing.source
    }

    /// Everything `pmlab scm info` prints.
    pub fn info(&self) -> RegionInfo {
        self.backing.info(Some(self.mode))
    }

    /// The data area, for fast reads.
    ///
    /// Another process sharing the region may change these bytes concurrently; callers
    /// that share a region must coordinate (as the file system's locks do).
    pub fn data(&self) -> &[u8] {
        self.backing.data()
    }

    /// The data area, for fast in-place writes. Stores made through it are not counted
    /// and not durable until [`Memory::flush`] + [`Memory::fence`] (or [`Memory::persist`])
    /// cover them.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let off = self.backing.header.data_offset as usize;
        // SAFETY: a `Region` is always mapped writable.
        let bytes = unsafe { self.backing.map.bytes_mut() };
        &mut bytes[off..]
    }

    /// The first byte of the data area as a raw pointer, for callers that share the
    /// region with other processes and must store without a `&mut` borrow (or show that
    /// a store faults, as protection tests do). Valid while the region lives.
    pub fn data_ptr(&self) -> *mut u8 {
        // Derived from the mapping's own pointer, not from a shared slice, so that
        // writing through it is allowed.
        self.backing
            .map
            .ptr()
            .wrapping_add(self.backing.header.data_offset as usize)
    }

    /// Writes every dirty page of the whole region back with `msync(MS_SYNC)`, whatever
    /// the persist mode: for a page-cache file after stores that no flush covered. A no-op
    /// in effect on tmpfs and DAX, where the mapping is the memory.
    pub fn sync_all(&self) -> Result<(), RegionError> {
        self.backing
            .map
            .msync(0, usize::MAX)
            .map_err(|e| RegionError::io(&self.backing.source, "msync", e))
    }

    /// A new descriptor for the same object, open read-write (for `SCM_RIGHTS`).
    pub fn try_clone_fd(&self) -> Result<OwnedFd, RegionError> {
        self.backing
            .fd
            .try_clone()
            .map_err(|e| RegionError::io(&self.backing.source, "dup", e))
    }

    /// A new descriptor for the same object opened `O_RDONLY` (through `/proc/self/fd`),
    /// for clients that must only map it read-only. For a memfd, also call
    /// [`Region::seal_future_writes`], or the receiver could reopen it read-write.
    pub fn read_only_fd(&self) -> Result<OwnedFd, RegionError> {
        let p = format!("/proc/self/fd/{}", self.backing.fd.as_raw_fd());
        let f = OpenOptions::new()
            .read(true)
            .open(&p)
            .map_err(|e| RegionError::io(&self.backing.source, "reopen read-only", e))?;
        Ok(f.into())
    }

    /// Seals a memfd with `F_SEAL_FUTURE_WRITE` (Linux 5.1+): existing writable mappings,
    /// this one included, keep working, but nobody can make a new writable mapping or
    /// `write(2)` it — so descriptors passed to clients are read-only in effect.
    pub fn seal_future_writes(&self) -> Result<(), RegionError> {
        rustix::fs::fcntl_add_seals(&self.backing.fd, rustix::fs::SealFlags::FUTURE_WRITE).map_err(
            |e| {
                RegionError::io(
                    &self.backing.source,
                    "fcntl(F_ADD_SEALS, F_SEAL_FUTURE_WRITE)",
                    e,
                )
            },
        )
    }

    /// Stores `data` at `addr` so that the next [`Memory::fence`] makes it durable,
    /// with no flush to issue for it: in a CPU flush mode (`clwb`, `clflushopt`,
    /// `clflush`) on x86_64 the whole cache lines it covers are written with
    /// non-temporal stores (`crate::stream`), and a partial line at either end by an
    /// ordinary store and a flush of that line; in the other modes, or elsewhere, the
    /// whole range by an ordinary store and a flush. Every line counts as one flush in
    /// [`Memory::persist_counters`] and is charged to the SCM write model either way.
    /// Large copies are faster so (each line goes to memory once, not read for
    /// ownership first and written back after); the lines are not left in the cache.
    pub fn write_streaming(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.size())?;
        if !self.mode.is_cpu_flush() {
            self.write(addr, data)?;
            return self.flush(addr, data.len() as u64, FlushKind::Clwb);
        }
        let dst = self.data_ptr().wrapping_add(addr as usize);
        // SAFETY: bounds were checked; `&mut self` keeps every other access away.
        self.counters.flushes += unsafe { crate::stream::copy_streaming(self.mode, dst, data) };
        Ok(())
    }

    /// [`Region::write_streaming`] through a shared reference, for threads that copy
    /// into disjoint ranges of one region at once (libFS copies file data outside its
    /// state lock). Durable once the writing thread executes
    /// [`Region::fence_shared`]. Only in a CPU flush mode, where a copy needs no
    /// state of the region: in another mode it stores nothing and returns `Ok(false)`,
    /// and the caller writes through `&mut` as before. The lines are charged to the
    /// SCM write model but not counted in [`Memory::persist_counters`] (a plain
    /// counter, not shared between threads).
    ///
    /// # Safety
    /// While it runs, no reference into `[addr, addr + data.len())` of the data area
    /// ([`Region::data`], [`Region::data_mut`]) may be live in this process. Other
    /// threads' stores there through raw pointers race with it as any two processes'
    /// stores to shared memory do: the bytes are then either's, never undefined
    /// behaviour of this process's references.
    pub unsafe fn write_streaming_shared(
        &self,
        addr: Addr,
        data: &[u8],
    ) -> Result<bool, SpineError> {
        check_bounds(addr, data.len() as u64, self.size())?;
        if !self.mode.is_cpu_flush() {
            return Ok(false);
        }
        // SAFETY: bounds were checked; the range is the caller's alone (the contract).
        unsafe {
            let dst = self.data_ptr().add(addr as usize);
            crate::stream::copy_streaming(self.mode, dst, data);
        }
        Ok(true)
    }

    /// Orders this thread's stores and write-backs before its later ones (`sfence` in
    /// a CPU flush mode): what [`Region::write_streaming_shared`] wrote is then durable.
    pub fn fence_shared(&self) {
        crate::persist::store_fence(self.mode);
    }

    fn data_addr(&self, addr: Addr) -> usize {
        (self.backing.header.data_offset + addr) as usize
    }
}

impl AsFd for Region {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.backing.fd.as_fd()
    }
}

impl Memory for Region {
    fn size(&self) -> u64 {
        self.backing.header.data_size
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        check_bounds(addr, buf.len() as u64, self.size())?;
        let a = addr as usize;
        buf.copy_from_slice(&self.data()[a..a + buf.len()]);
        Ok(())
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.size())?;
        let a = addr as usize;
        self.data_mut()[a..a + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// `kind` names the ordering the caller relies on: [`FlushKind::Clflush`] executes
    /// `clflush` (ordered without a fence); the weakly ordered kinds execute this
    /// region's mode, which a following fence orders. In `Msync` mode the pages are
    /// written back at the next fence.
    fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError> {
        check_bounds(addr, len, self.size())?;
        if len == 0 {
            return Ok(());
        }
        self.counters.flushes += lines_spanned(addr, len);
        let start = self.data_addr(addr);
        match self.mode {
            PersistMode::Msync => {
                let end = start + len as usize;
                self.msync_pending = Some(match self.msync_pending {
                    Some((lo, hi)) => (lo.min(start), hi.max(end)),
                    None => (start, end),
                });
                // SAFETY: bounds were checked; no instruction runs in this mode, only
                // the SCM write model's charge.
                unsafe { flush_lines(self.mode, self.backing.map.ptr().add(start), len as usize) };
            }
            PersistMode::Portable => {
                // SAFETY: as above.
                unsafe { flush_lines(self.mode, self.backing.map.ptr().add(start), len as usize) };
            }
            mode => {
                let mode = if kind == FlushKind::Clflush {
                    PersistMode::Clflush
                } else {
                    mode
                };
                // SAFETY: bounds were checked; the range lies in the live mapping.
                unsafe { flush_lines(mode, self.backing.map.ptr().add(start), len as usize) };
            }
        }
        Ok(())
    }

    fn fence(&mut self) {
        self.counters.fences += 1;
        if let Some((lo, hi)) = self.msync_pending.take() {
            // The spine's fence cannot fail; an msync error (EIO on a dying disk) is
            // reported the way the kernel reports lost write-back: on stderr, and the
            // next fsync/msync of the file fails again.
            if let Err(e) = self.backing.map.msync(lo, hi) {
                eprintln!(
                    "pmlab-native: region {}: msync failed: {e}",
                    self.backing.source
                );
            }
        }
        store_fence(self.mode);
    }

    fn persist_counters(&self) -> PersistCounters {
        self.counters
    }
}

/// A region mapped `PROT_READ` only: a client holding one cannot store into it.
#[derive(Debug)]
pub struct ReadOnlyRegion {
    backing: Backing,
}

impl ReadOnlyRegion {
    /// Opens and validates a region file or DAX device read-only.
    pub fn open(path: &Path) -> Result<ReadOnlyRegion, RegionError> {
        let src = RegionSource::Path(path.to_path_buf());
        let file = OpenOptions::new()
            .read(true)
            .open(path)
            .map_err(|e| RegionError::io(&src, "open", e))?;
        Self::from_fd_named(file.into(), src)
    }

    /// Opens and validates the region behind a descriptor (read-only or read-write; the
    /// mapping is `PROT_READ` either way).
    pub fn from_fd(fd: OwnedFd) -> Result<ReadOnlyRegion, RegionError> {
        let src = RegionSource::Fd(fd.as_raw_fd());
        Self::from_fd_named(fd, src)
    }

    /// [`ReadOnlyRegion::from_fd`] with a name for error messages.
    pub fn from_fd_named(fd: OwnedFd, source: RegionSource) -> Result<ReadOnlyRegion, RegionError> {
        Ok(ReadOnlyRegion {
            backing: Backing::open(fd, source, false)?,
        })
    }

    /// Size of the data area in bytes.
    pub fn size(&self) -> u64 {
        self.backing.header.data_size
    }

    /// The data area.
    pub fn data(&self) -> &[u8] {
        self.backing.data()
    }

    /// Copies `buf.len()` bytes of the data area starting at `addr`.
    pub fn read(&self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        check_bounds(addr, buf.len() as u64, self.size())?;
        let a = addr as usize;
        buf.copy_from_slice(&self.data()[a..a + buf.len()]);
        Ok(())
    }

    /// The first byte of the data area as a raw pointer; the mapping is `PROT_READ`, so
    /// a store through it faults (SIGSEGV). Valid while the region lives.
    pub fn data_ptr(&self) -> *const u8 {
        self.backing
            .map
            .ptr()
            .wrapping_add(self.backing.header.data_offset as usize)
    }

    /// Reads a little-endian `u64` of the data area.
    pub fn read_u64(&self, addr: Addr) -> Result<u64, SpineError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Maps every page of the region now, so that no load of it takes a page
    /// fault later. A region on tmpfs stands for SCM, whose pages exist and are mapped
    /// from the start (Aerie's SCM manager maps them once); left to demand paging, tmpfs
    /// allocates, zeroes and maps each page at its first touch, a fault that costs more
    /// than a whole 4 KiB write and that SCM never pays. It commits the region's whole
    /// size in memory, so only users that want SCM's behaviour ask for it. Refused by
    /// kernels before 5.14 (`MADV_POPULATE_*`), which then keep demand paging.
    pub fn populate(&self) -> std::io::Result<()> {
        self.backing.map.populate(false)
    }

    /// What is behind the mapping.
    pub fn medium(&self) -> Medium {
        self.backing.medium
    }

    /// The validated header.
    pub fn header(&self) -> &Header {
        &self.backing.header
    }

    /// Where the region lives.
    pub fn source(&self) -> &RegionSource {
        &self.backing.source
    }

    /// Everything `pmlab scm info` prints (no persist mode: it never persists).
    pub fn info(&self) -> RegionInfo {
        self.backing.info(None)
    }
}

impl AsFd for ReadOnlyRegion {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.backing.fd.as_fd()
    }
}

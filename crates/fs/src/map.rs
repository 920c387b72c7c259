//! Memory-mapped volume spaces: the service's writable view of a volume and a client's
//! read-only (or, for permitted data domains, writable) views.
//!
//! A [`Map`] is a thin wrapper over a region of the native substrate (`pmlab-native`):
//! each space file carries the region header page (magic, layout version, sizes,
//! checksum), which is validated on every map, so a client handed a foreign or damaged
//! descriptor gets an error naming the field instead of garbage. Offsets here are
//! offsets into the region's data area, i.e. file-system page `p` is at `p * PAGE`.
//!
//! Persisting uses the region's mode, chosen at map time from the medium and CPUID:
//! `clwb`, else `clflushopt`, else `clflush`, each ordered by `sfence`, on tmpfs and
//! DAX; `msync` for a file on an ordinary disk file system, where a CPU flush would only
//! reach the page cache. Every written-back line goes through the native persist path
//! and so is charged to the SCM write model (`pmlab_native::scm_model`) when it is on.

use std::os::fd::{AsFd, BorrowedFd};

use pmlab_native::{Medium, PersistMode, ReadOnlyRegion, Region, RegionError};
use pmlab_spine::{Addr, FlushKind, Memory, PersistCounters, SpineError, check_bounds};

use crate::error::{FsError, Result};
use crate::media::MediaRead;

/// Bytes in front of a space's first file-system page: the native region header page.
pub const SPACE_HEADER_BYTES: u64 = pmlab_native::DATA_OFFSET;

enum Inner {
    Writable(Region),
    ReadOnly(ReadOnlyRegion),
}

/// A shared mapping of a whole space file (a native region).
pub struct Map {
    inner: Inner,
    /// For a client's mapping of a data space: the SIGBUS guard that lets it survive
    /// another client cutting the file short ([`crate::guard`]).
    guard: Option<crate::guard::Guard>,
    /// The thread populating a data space's page tables (joined before the mapping
    /// goes, so it never touches an address range mapped to something else).
    populating: Option<std::thread::JoinHandle<()>>,
    /// Set when that thread is done (see [`Map::populated`]).
    populated: Option<Populated>,
    /// The data space file (device, inode) this mapping counts in [`MAPPED_SPACES`].
    space: Option<(u64, u64)>,
}

/// The data spaces this process maps, with how many of its mappings of each are live.
///
/// Only the first live mapping of a space in a process is populated. A libFS client
/// is usually a process of its own; a benchmark's or server's threads, each with a
/// client of its own, share one address space, and populating each one's mapping of
/// the whole space (gigabytes at the paper's sizes) built that many page tables of it
/// and held the process's memory-map lock for seconds, stalling every thread's page
/// faults and allocations behind it: fifty FileBench threads took seconds per
/// iteration. The other mappings fault their pages in on first touch, from the page
/// cache the first one filled.
///
/// Each entry also holds the populating thread's signal, which every mapping of the
/// space shares.
#[allow(clippy::type_complexity)]
static MAPPED_SPACES: std::sync::Mutex<std::collections::BTreeMap<(u64, u64), (usize, Populated)>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Counts a new mapping of the data space `f` in [`MAPPED_SPACES`]: its key, whether it
/// is the first live one (which populates), and the space's populating signal.
fn register_space(f: &std::fs::File) -> (Option<(u64, u64)>, bool, Populated) {
    use std::os::unix::fs::MetadataExt;
    let Ok(md) = f.metadata() else {
        return (None, true, Populated::default());
    };
    let key = (md.dev(), md.ino());
    let mut spaces = MAPPED_SPACES.lock().unwrap_or_else(|e| e.into_inner());
    let e = spaces
        .entry(key)
        .or_insert_with(|| (0, Populated::default()));
    e.0 += 1;
    (Some(key), e.0 == 1, e.1.clone())
}

/// Populates `[at, at+len)` from a thread of its own, which sets `done` when finished
/// (at once if no thread could be started).
fn spawn_populate(
    at: usize,
    len: usize,
    writable: bool,
    done: Populated,
) -> Option<std::thread::JoinHandle<()>> {
    let advice = if writable {
        libc::MADV_POPULATE_WRITE
    } else {
        libc::MADV_POPULATE_READ
    };
    let signal = done.clone();
    let t = std::thread::Builder::new()
        .name("pmlab-populate".into())
        .spawn(move || {
            let page = 4096;
            let lo = at / page * page;
            // SAFETY: the range lies in a mapping the Map owns, and the Map joins this
            // thread before unmapping it; populating neither moves nor changes the
            // mapping. An older kernel refuses (EINVAL), and the space is then
            // demand-paged, as correct and slower.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, at + len - lo, advice);
            }
            signal.set();
        })
        .ok();
    if t.is_none() {
        done.set();
    }
    t
}

impl Drop for Map {
    fn drop(&mut self) {
        if let Some(t) = self.populating.take() {
            let _ = t.join();
        }
        if let Some(k) = self.space.take() {
            let mut m = MAPPED_SPACES.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((n, _)) = m.get_mut(&k) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&k);
                }
            }
        }
    }
}

/// Whether a data space's populating thread is done, and a way to wait for it without
/// holding whatever owns the [`Map`] (a client's state, which its revocations need).
#[derive(Clone, Default)]
pub struct Populated(std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Populated {
    fn set(&self) {
        let (done, cv) = &*self.0;
        *done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }

    /// Blocks until the populating thread is done.
    pub fn wait(&self) {
        let (done, cv) = &*self.0;
        let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
        while !*d {
            d = cv.wait(d).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A native region error as a file-system error: a bad header or size means the file
/// is not (or no longer) a space of a volume; the message names the offset and field.
fn region_error(e: RegionError) -> FsError {
    match e {
        RegionError::Io {
            source_name,
            op,
            error,
        } => FsError::io(format!("space {source_name}: {op}"), error),
        RegionError::BadSize { .. } | RegionError::Header { .. } => FsError::Foreign(e.to_string()),
        RegionError::Unsupported { .. } => FsError::Denied(e.to_string()),
    }
}

impl Map {
    /// Maps the space behind `fd`, writable or read-only, validating its region header;
    /// `len` must be its data size (the header page excluded), which [`Map::len`] then
    /// returns. A read-only mapping of an fd opened read-only can never be made writable
    /// by the holder: the kernel refuses.
    pub fn new(fd: BorrowedFd<'_>, len: usize, writable: bool) -> Result<Map> {
        let map = Self::map_fd(fd, writable)?;
        if map.len() != len {
            return Err(FsError::Foreign(format!(
                "the space holds {} data bytes, expected {len}",
                map.len()
            )));
        }
        Ok(map)
    }

    /// Maps a whole space file.
    pub fn of_file(f: &std::fs::File, writable: bool) -> Result<Map> {
        Self::map_fd(f.as_fd(), writable)
    }

    /// Maps a domain's data space for a client, guarded against SIGBUS: another
    /// client that may write the domain holds a descriptor it could cut the file short
    /// with, and a reader of this mapping must survive that ([`crate::guard`]).
    ///
    /// A data space on tmpfs is populated as the metadata space is (SCM is present from
    /// the start), but by a thread of its own: populating gigabytes takes seconds, and a
    /// client that maps a domain in the middle of an operation holds its state locked,
    /// so it would leave its revocations unanswered for that long (fifty clients of one
    /// volume, each mapping its domain in turn, got one another disconnected). Until the
    /// thread is done, an access to a page not yet mapped is an ordinary page fault.
    pub fn of_data_file(f: &std::fs::File, writable: bool) -> Result<Map> {
        let own = f
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| FsError::io("dup a space descriptor", e))?;
        let inner = if writable {
            Inner::Writable(Region::from_fd(own).map_err(region_error)?)
        } else {
            Inner::ReadOnly(ReadOnlyRegion::from_fd(own).map_err(region_error)?)
        };
        let tmpfs = match &inner {
            Inner::Writable(r) => r.medium() == Medium::Tmpfs,
            Inner::ReadOnly(r) => r.medium() == Medium::Tmpfs,
        };
        let mut m = Map {
            inner,
            guard: None,
            populating: None,
            populated: None,
            space: None,
        };
        m.guard = crate::guard::Guard::register(m.as_ptr(), m.len());
        let (space, first, signal) = register_space(f);
        m.space = space;
        m.populated = Some(signal.clone());
        if tmpfs && first {
            m.populating = spawn_populate(m.as_ptr() as usize, m.len(), writable, signal);
        } else if first {
            signal.set();
        }
        Ok(m)
    }

    /// The signal of the thread populating this data space in this process (started by
    /// its first live mapping here, on tmpfs; set at once elsewhere): a benchmark waits
    /// on it before its timed phase, since SCM is present from the start and the thread
    /// would otherwise compete for the cores with what is timed.
    pub fn populated(&self) -> Option<Populated> {
        self.populated.clone()
    }

    /// Fails if a SIGBUS hit this mapping (its file was cut short under it): what was
    /// read or written through it since is not the file's, and the mapping must be
    /// dropped and made again once the service has restored the file's size.
    pub fn intact(&self) -> Result<()> {
        if self.guard.as_ref().is_some_and(|g| g.hit()) {
            return Err(FsError::io(
                "data space",
                std::io::Error::other(
                    "another client cut the domain's data space short under this mapping (SIGBUS caught)",
                ),
            ));
        }
        Ok(())
    }

    /// Copies bytes out of a data space, failing (rather than dying of SIGBUS) if the
    /// file was cut short under the mapping.
    pub fn read_data(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.read_at(off, buf)?;
        self.intact()
    }

    fn map_fd(fd: BorrowedFd<'_>, writable: bool) -> Result<Map> {
        // The region keeps its own descriptor so that the caller's may be closed.
        let own = fd
            .try_clone_to_owned()
            .map_err(|e| FsError::io("dup a space descriptor", e))?;
        // A space on tmpfs stands for SCM, so it is mapped the way SCM would be: every
        // page present from the start (see `Region::populate`). An older kernel refuses,
        // and the space is then demand-paged, which is slower but just as correct.
        let inner = if writable {
            let r = Region::from_fd(own).map_err(region_error)?;
            if r.medium() == Medium::Tmpfs {
                let _ = r.populate();
            }
            Inner::Writable(r)
        } else {
            let r = ReadOnlyRegion::from_fd(own).map_err(region_error)?;
            if r.medium() == Medium::Tmpfs {
                let _ = r.populate();
            }
            Inner::ReadOnly(r)
        };
        Ok(Map {
            inner,
            guard: None,
            populating: None,
            populated: None,
            space: None,
        })
    }

    /// Wraps a region already open for writing (a freshly formatted space).
    pub fn from_region(region: Region) -> Map {
        Map {
            inner: Inner::Writable(region),
            guard: None,
            populating: None,
            populated: None,
            space: None,
        }
    }

    /// Whether threads may copy through this mapping at once, outside whatever lock
    /// owns it ([`Map::read_at`], [`Map::write_streaming_shared`]): a read-only
    /// mapping, or a writable one whose writes need no state of the region (a CPU
    /// flush mode). A writable mapping in another mode writes through `&mut`.
    pub fn shares_copies(&self) -> bool {
        match &self.inner {
            Inner::Writable(r) => r.persist_mode().is_cpu_flush(),
            Inner::ReadOnly(_) => true,
        }
    }

    /// Whether the mapping is writable.
    pub fn writable(&self) -> bool {
        matches!(self.inner, Inner::Writable(_))
    }

    /// Length of the data area in bytes.
    pub fn len(&self) -> usize {
        self.data().len()
    }

    /// Whether the mapping is empty (never: a region has at least one data page).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How stores are made durable (`None` for a read-only mapping, which never persists).
    pub fn persist_mode(&self) -> Option<PersistMode> {
        match &self.inner {
            Inner::Writable(r) => Some(r.persist_mode()),
            Inner::ReadOnly(_) => None,
        }
    }

    fn data(&self) -> &[u8] {
        match &self.inner {
            Inner::Writable(r) => r.data(),
            Inner::ReadOnly(r) => r.data(),
        }
    }

    /// The first byte of the data area. Writing through it on a read-only mapping faults
    /// (SIGSEGV): the protection tests use exactly that.
    pub fn as_ptr(&self) -> *mut u8 {
        match &self.inner {
            Inner::Writable(r) => r.data_ptr(),
            Inner::ReadOnly(r) => r.data_ptr().cast_mut(),
        }
    }

    /// Copies bytes out.
    pub fn read_at(&self, off: u64, buf: &mut [u8]) -> std::result::Result<(), SpineError> {
        check_bounds(off, buf.len() as u64, self.len() as u64)?;
        // Through the raw pointer, not a slice of the whole space: other threads of
        // this process may be writing other ranges of it meanwhile
        // ([`Map::write_streaming_shared`]).
        // SAFETY: bounds were checked against the live mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.as_ptr().add(off as usize),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        Ok(())
    }

    fn region_mut(&mut self) -> Result<&mut Region> {
        match &mut self.inner {
            Inner::Writable(r) => Ok(r),
            Inner::ReadOnly(_) => Err(FsError::Denied("the mapping is read-only".into())),
        }
    }

    /// Copies bytes in; refused (not faulted) on a read-only mapping, and failing if the
    /// file was cut short under the mapping (see [`Map::intact`]).
    pub fn write_at(&mut self, off: u64, data: &[u8]) -> Result<()> {
        self.region_mut()?.write(off, data)?;
        self.intact()
    }

    /// Copies bytes in so that the next [`Map::fence`] makes them durable, with no
    /// flush to issue ([`Region::write_streaming`]: non-temporal stores for whole
    /// lines); refused on a read-only mapping, and failing if the file was cut short
    /// under the mapping.
    pub fn write_streaming(&mut self, off: u64, data: &[u8]) -> Result<()> {
        self.region_mut()?.write_streaming(off, data)?;
        self.intact()
    }

    /// [`Map::write_streaming`] through a shared reference, for threads that copy file
    /// data into disjoint ranges of one data space at once (libFS copies outside its
    /// state lock; see `client::copies`): durable once the writing thread calls
    /// [`Map::fence_shared`]. `Ok(false)`, having stored nothing, where that cannot be
    /// done (a read-only mapping, or a persist mode that needs the region's own state,
    /// as `msync`): the caller then writes through `&mut`.
    ///
    /// # Safety
    /// No reference into `[off, off + data.len())` of the space may be live in this
    /// process while it runs (libFS reads and writes data spaces only through raw
    /// pointers: [`Map::read_at`]).
    pub unsafe fn write_streaming_shared(&self, off: u64, data: &[u8]) -> Result<bool> {
        let Inner::Writable(r) = &self.inner else {
            return Ok(false);
        };
        // SAFETY: the caller's contract.
        let stored = unsafe { r.write_streaming_shared(off, data)? };
        self.intact()?;
        Ok(stored)
    }

    /// Orders this thread's earlier [`Map::write_streaming_shared`] copies (sfence):
    /// they are durable when it returns.
    pub fn fence_shared(&self) {
        if let Inner::Writable(r) = &self.inner {
            r.fence_shared();
        }
    }

    /// Writes back `[off, off+len)` (clipped to the mapping) without a fence: several
    /// ranges are written back, then one [`Map::fence`] orders them all.
    pub fn flush_range(&mut self, off: u64, len: u64) {
        if let Inner::Writable(r) = &mut self.inner {
            let end = off.saturating_add(len).min(r.size());
            if off < end {
                r.flush(off, end - off, FlushKind::Clwb)
                    .expect("the range was clipped to the region");
            }
        }
    }

    /// Orders every write-back issued before it (sfence).
    pub fn fence(&mut self) {
        if let Inner::Writable(r) = &mut self.inner {
            r.fence();
        }
    }

    /// Writes back `[off, off+len)` (clipped to the mapping) and orders it with a fence.
    /// Nothing to do on a read-only mapping, which holds no stores of its own.
    pub fn persist_range(&mut self, off: u64, len: u64) {
        if let Inner::Writable(r) = &mut self.inner {
            let end = off.saturating_add(len).min(r.size());
            if off < end {
                r.flush(off, end - off, FlushKind::Clwb)
                    .expect("the range was clipped to the region");
            }
            r.fence();
        }
    }

    /// Writes every dirty page back with `msync(MS_SYNC)`: needed only for stores that
    /// no [`Map::persist_range`] covered, on a file on an ordinary disk file system.
    pub fn sync(&self) -> Result<()> {
        match &self.inner {
            Inner::Writable(r) => r.sync_all().map_err(region_error),
            Inner::ReadOnly(_) => Ok(()),
        }
    }
}

/// A read-only view: only reads are possible.
pub struct ReadOnly(pub Map);

/// A read-only view of a map borrowed shared: reads need no exclusive hold of it
/// ([`Map::read_at`] copies through the raw mapping).
pub struct SharedReader<'a>(pub &'a Map);

impl MediaRead for SharedReader<'_> {
    fn media_size(&self) -> u64 {
        self.0.len() as u64
    }
    fn media_read(&mut self, addr: Addr, buf: &mut [u8]) -> std::result::Result<(), SpineError> {
        self.0.read_at(addr, buf)
    }
}

impl MediaRead for ReadOnly {
    fn media_size(&self) -> u64 {
        SharedReader(&self.0).media_size()
    }
    fn media_read(&mut self, addr: Addr, buf: &mut [u8]) -> std::result::Result<(), SpineError> {
        SharedReader(&self.0).media_read(addr, buf)
    }
}

/// A writable view, implementing the spine's memory interface (over a read-only map,
/// every write is refused as out of reach).
pub struct Writable(pub Map);

impl Writable {
    /// The region to store into; a read-only map has no writable space at all (size 0).
    fn region(&mut self, addr: Addr, len: u64) -> std::result::Result<&mut Region, SpineError> {
        match &mut self.0.inner {
            Inner::Writable(r) => Ok(r),
            Inner::ReadOnly(_) => Err(SpineError::OutOfBounds { addr, len, size: 0 }),
        }
    }
}

impl Memory for Writable {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> std::result::Result<(), SpineError> {
        self.0.read_at(addr, buf)
    }
    fn write(&mut self, addr: Addr, data: &[u8]) -> std::result::Result<(), SpineError> {
        self.region(addr, data.len() as u64)?.write(addr, data)
    }
    fn flush(
        &mut self,
        addr: Addr,
        len: u64,
        kind: FlushKind,
    ) -> std::result::Result<(), SpineError> {
        self.region(addr, len)?.flush(addr, len, kind)
    }
    fn fence(&mut self) {
        if let Inner::Writable(r) = &mut self.0.inner {
            r.fence();
        }
    }
    fn persist_counters(&self) -> PersistCounters {
        match &self.0.inner {
            Inner::Writable(r) => r.persist_counters(),
            Inner::ReadOnly(_) => PersistCounters::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident bytes of the mapping that holds `addr`, from `/proc/self/smaps`.
    fn resident_bytes(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((lo, hi)) = range.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = lo <= addr && addr < hi;
            } else if inside && let Some(kb) = line.strip_prefix("Rss:") {
                let kb = kb.trim().trim_end_matches("kB").trim();
                return kb.parse::<u64>().unwrap() * 1024;
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    /// A benchmark waits on the populating signal before timing: when the wait returns,
    /// every page of the data space must be mapped (resident), or the populating would
    /// still compete with what is timed. A second mapping of the space in the process
    /// shares the first one's signal.
    #[test]
    fn populated_signal_is_set_only_once_the_whole_space_is_mapped() {
        let dir = tempfile::tempdir_in("/dev/shm").expect("/dev/shm is a tmpfs");
        let path = dir.path().join("data.0");
        let size = 64 << 20;
        drop(pmlab_native::Region::create_file(&path, size).unwrap());
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let m = Map::of_data_file(&f, true).unwrap();
        let second = Map::of_data_file(&f, false).unwrap();
        assert!(
            second.populating.is_none(),
            "only the first mapping populates"
        );
        second.populated().expect("a shared signal").wait();
        let rss = resident_bytes(m.as_ptr() as usize);
        assert!(
            rss >= m.len() as u64,
            "{rss} bytes resident of a {}-byte space after the wait",
            m.len()
        );
        m.populated().expect("a signal").wait();
    }
}

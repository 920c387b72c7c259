//! A shared memory mapping of a whole file descriptor, and what kind of medium is
//! behind it.

use std::os::fd::BorrowedFd;
use std::ptr::NonNull;

use rustix::fs::{FileType, fstat, fstatfs};
use rustix::mm::{MapFlags, MsyncFlags, ProtFlags};

use crate::error::{RegionError, RegionSource};

/// What is behind a region's mapping, which decides how stores become durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Medium {
    /// tmpfs, hugetlbfs, ramfs or a memfd: the mapping is the memory itself; CPU flushes
    /// reach it (durable while the machine runs, as emulated SCM).
    Tmpfs,
    /// A device-DAX character device (`/dev/daxX.Y`): the mapping is the memory itself.
    DaxDevice,
    /// A file on a DAX file system mapped with `MAP_SYNC`: CPU flushes make it durable.
    DaxFile,
    /// A file on an ordinary file system: only `msync` makes it durable.
    PageCache,
}

impl Medium {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Medium::Tmpfs => "tmpfs",
            Medium::DaxDevice => "dax-device",
            Medium::DaxFile => "dax-file",
            Medium::PageCache => "page-cache",
        }
    }
}

const TMPFS_MAGIC: u64 = 0x0102_1994;
const HUGETLBFS_MAGIC: u64 = 0x9584_58f6;
const RAMFS_MAGIC: u64 = 0x8584_58f6;

/// Size of the object behind `fd` and whether it is a character device (device DAX).
pub(crate) fn backing_size(
    fd: BorrowedFd<'_>,
    src: &RegionSource,
) -> Result<(u64, bool), RegionError> {
    let st = fstat(fd).map_err(|e| RegionError::io(src, "fstat", e))?;
    if FileType::from_raw_mode(st.st_mode) == FileType::CharacterDevice {
        let (maj, min) = (rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev));
        let sys = format!("/sys/dev/char/{maj}:{min}/size");
        let text = std::fs::read_to_string(&sys)
            .map_err(|e| RegionError::io(src, "read device-DAX size", e))?;
        let size = text
            .trim()
            .parse::<u64>()
            .map_err(|_| RegionError::BadSize {
                source_name: src.clone(),
                size: 0,
                problem: format!("{sys} holds {:?}, not a byte count", text.trim()),
            })?;
        return Ok((size, true));
    }
    Ok((st.st_size as u64, false))
}

/// A `MAP_SHARED` mapping of bytes `[0, len)` of a file descriptor.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; the region types hand out access only
// through `&self` (reads) and `&mut self` (writes), like a `Vec<u8>`.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd`, writable or `PROT_READ` only, and reports the medium.
    /// A writable mapping first tries `MAP_SHARED_VALIDATE | MAP_SYNC`, which only DAX
    /// file systems accept; that is how a DAX file is told from a page-cache file.
    pub(crate) fn new(
        fd: BorrowedFd<'_>,
        len: usize,
        writable: bool,
        is_char_device: bool,
        src: &RegionSource,
    ) -> Result<(Mapping, Medium), RegionError> {
        let prot = if writable {
            ProtFlags::READ | ProtFlags::WRITE
        } else {
            ProtFlags::READ
        };
        let fs_type = fstatfs(fd)
            .map_err(|e| RegionError::io(src, "fstatfs", e))?
            .f_type as u64;
        let in_memory = matches!(fs_type, TMPFS_MAGIC | HUGETLBFS_MAGIC | RAMFS_MAGIC);
        if writable && !in_memory {
            // SAFETY: a fresh mapping at an address the kernel chooses.
            let synced = unsafe {
                rustix::mm::mmap(
                    std::ptr::null_mut(),
                    len,
                    prot,
                    MapFlags::SHARED_VALIDATE | MapFlags::SYNC,
                    fd,
                    0,
                )
            };
            if let Ok(p) = synced {
                let medium = if is_char_device {
                    Medium::DaxDevice
                } else {
                    Medium::DaxFile
                };
                return Ok((Self::from_raw(p, len), medium));
            }
        }
        // SAFETY: a fresh mapping at an address the kernel chooses.
        let p =
            unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0) }
                .map_err(|e| RegionError::io(src, "mmap", e))?;
        let medium = if in_memory {
            Medium::Tmpfs
        } else if is_char_device {
            Medium::DaxDevice
        } else {
            Medium::PageCache
        };
        Ok((Self::from_raw(p, len), medium))
    }

    fn from_raw(p: *mut std::ffi::c_void, len: usize) -> Mapping {
        Mapping {
            ptr: NonNull::new(p.cast()).expect("mmap never returns null on success"),
            len,
        }
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is live for &self's lifetime and len bytes long.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// # Safety
    /// The mapping must be writable.
    pub(crate) unsafe fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is live, len bytes long, writable (caller), and &mut self
        // makes this the only reference handed out.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Faults every page of the mapping in now (`MADV_POPULATE_WRITE` or `_READ`, Linux
    /// 5.14 and later). On an older kernel this is refused, and the pages are left to
    /// demand paging as before: populating only moves cost, it changes no contents.
    pub(crate) fn populate(&self, writable: bool) -> std::io::Result<()> {
        let advice = if writable {
            rustix::mm::Advice::LinuxPopulateWrite
        } else {
            rustix::mm::Advice::LinuxPopulateRead
        };
        // SAFETY: the whole live mapping; populating neither moves nor changes it.
        unsafe { rustix::mm::madvise(self.ptr.as_ptr().cast(), self.len, advice) }?;
        Ok(())
    }

    /// `msync(MS_SYNC)` of the pages overlapping `[start, end)`.
    pub(crate) fn msync(&self, start: usize, end: usize) -> std::io::Result<()> {
        let page = rustix::param::page_size();
        let lo = start / page * page;
        let hi = end.min(self.len);
        if hi <= lo {
            return Ok(());
        }
        // SAFETY: [lo, hi) lies inside the live mapping and lo is page-aligned.
        unsafe { rustix::mm::msync(self.ptr.as_ptr().add(lo).cast(), hi - lo, MsyncFlags::SYNC) }?;
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we own this mapping and nothing borrows it any more.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

//! Memory-mapped files: the service's writable view of a volume and a client's
//! read-only (or, for permitted data domains, writable) views.
//!
//! The native substrate crate will provide regions with selectable persist primitives;
//! until the file system adopts it, this module maps with `mmap(MAP_SHARED)` and makes
//! ranges durable with `clflush` + `sfence` (correct on DAX and on tmpfs alike; a
//! volume on a block-backed file additionally needs [`Map::sync`]).

use std::os::fd::{AsFd, BorrowedFd};
use std::ptr::NonNull;

use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};
use pmlab_spine::{
    Addr, FlushKind, Memory, PersistCounters, SpineError, check_bounds, lines_spanned,
};

use crate::error::{FsError, Result};
use crate::media::MediaRead;

/// A shared mapping of a whole file.
pub struct Map {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
    counters: PersistCounters,
}

// SAFETY: the mapping is plain shared memory; concurrent access is governed by the
// file system's leases, and the struct owns the mapping exclusively.
unsafe impl Send for Map {}

impl Map {
    /// Maps `len` bytes of `fd`, writable or read-only. A read-only mapping of an fd
    /// opened read-only can never be made writable by the holder: the kernel refuses.
    pub fn new(fd: BorrowedFd<'_>, len: usize, writable: bool) -> Result<Map> {
        let prot = if writable {
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE
        } else {
            ProtFlags::PROT_READ
        };
        let n = std::num::NonZeroUsize::new(len)
            .ok_or_else(|| FsError::Foreign("cannot map an empty file".into()))?;
        // SAFETY: a fresh shared mapping at a kernel-chosen address aliases nothing.
        let p = unsafe { mmap(None, n, prot, MapFlags::MAP_SHARED, fd, 0) }
            .map_err(|e| FsError::io("mmap", e.into()))?;
        Ok(Map {
            ptr: p.cast(),
            len,
            writable,
            counters: PersistCounters::default(),
        })
    }

    /// Maps a whole file.
    pub fn of_file(f: &std::fs::File, writable: bool) -> Result<Map> {
        let len = f.metadata().map_err(|e| FsError::io("stat", e))?.len() as usize;
        Map::new(f.as_fd(), len, writable)
    }

    /// Whether the mapping is writable.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: empty files are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first byte. Writing through it on a read-only mapping faults (SIGSEGV): the
    /// protection tests use exactly that.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Copies bytes out.
    pub fn read_at(&self, off: u64, buf: &mut [u8]) -> std::result::Result<(), SpineError> {
        check_bounds(off, buf.len() as u64, self.len as u64)?;
        // SAFETY: bounds checked; the mapping lives as long as self.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(off as usize),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        Ok(())
    }

    /// Copies bytes in; refused (not faulted) on a read-only mapping.
    pub fn write_at(&mut self, off: u64, data: &[u8]) -> Result<()> {
        if !self.writable {
            return Err(FsError::Denied("the mapping is read-only".into()));
        }
        check_bounds(off, data.len() as u64, self.len as u64)?;
        // SAFETY: bounds checked, the mapping is writable.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.ptr.as_ptr().add(off as usize),
                data.len(),
            )
        };
        Ok(())
    }

    /// Writes back `[off, off+len)` with clflush and orders it with sfence.
    pub fn persist_range(&mut self, off: u64, len: u64) {
        self.flush_lines(off, len);
        fence();
    }

    fn flush_lines(&mut self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let end = (off + len).min(self.len as u64);
        let mut a = off & !63;
        while a < end {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the line lies inside the mapping.
            unsafe {
                core::arch::x86_64::_mm_clflush(self.ptr.as_ptr().add(a as usize))
            };
            a += 64;
        }
        self.counters.flushes += lines_spanned(off, len);
    }

    /// msync(MS_SYNC) of the whole mapping: needed only when the file lives on a block
    /// device rather than in memory.
    pub fn sync(&self) -> Result<()> {
        // SAFETY: the range is exactly our mapping.
        unsafe {
            nix::sys::mman::msync(self.ptr.cast(), self.len, nix::sys::mman::MsFlags::MS_SYNC)
        }
        .map_err(|e| FsError::io("msync", e.into()))
    }
}

fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: we own the mapping.
        let _ = unsafe { munmap(self.ptr.cast(), self.len) };
    }
}

/// A read-only view: only reads are possible.
pub struct ReadOnly(pub Map);

impl MediaRead for ReadOnly {
    fn media_size(&self) -> u64 {
        self.0.len as u64
    }
    fn media_read(&mut self, addr: Addr, buf: &mut [u8]) -> std::result::Result<(), SpineError> {
        self.0.read_at(addr, buf)
    }
}

/// A writable view, implementing the spine's memory interface.
pub struct Writable(pub Map);

impl Memory for Writable {
    fn size(&self) -> u64 {
        self.0.len as u64
    }
    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> std::result::Result<(), SpineError> {
        self.0.read_at(addr, buf)
    }
    fn write(&mut self, addr: Addr, data: &[u8]) -> std::result::Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.0.len as u64)?;
        self.0
            .write_at(addr, data)
            .map_err(|_| SpineError::OutOfBounds {
                addr,
                len: data.len() as u64,
                size: 0,
            })
    }
    fn flush(
        &mut self,
        addr: Addr,
        len: u64,
        _kind: FlushKind,
    ) -> std::result::Result<(), SpineError> {
        check_bounds(addr, len, self.0.len as u64)?;
        self.0.flush_lines(addr, len);
        Ok(())
    }
    fn fence(&mut self) {
        fence();
        self.0.counters.fences += 1;
    }
    fn persist_counters(&self) -> PersistCounters {
        self.0.counters
    }
}

//! A segment mapped at its fixed address in this process.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::mm::{MapFlags, ProtFlags};

use super::lock::SegLock;
use super::segfile::HEADER_BYTES;
use crate::error::VasError;

/// A segment mapped in this process (by one or more of its handles).
#[derive(Debug)]
pub struct Mapped {
    /// Registry (or private) name.
    pub name: String,
    /// Fixed address.
    pub base: u64,
    /// Bytes.
    pub size: u64,
    /// The descriptor mapped; read-write only if some attachment needs it and the
    /// kernel allowed it.
    pub fd: OwnedFd,
    /// Whether `fd` (and so the mapping) is writable.
    pub writable: bool,
    /// Offset of the bytes in the file.
    pub offset: u64,
    /// Protection currently set (mprotect path).
    pub prot: ProtFlags,
    /// Handles of this process that hold it.
    pub users: u32,
    /// Its lock (global segments).
    pub lock: Option<SegLock>,
    /// Whether switching takes the lock.
    pub lockable: bool,
    /// Its protection key (pkeys path).
    pub pkey: Option<u32>,
    /// A process-private segment.
    pub private: bool,
    /// Drop its page-table entries when it becomes inaccessible (see
    /// `NativeSpaces::set_zap_on_switch`).
    pub zap: bool,
    /// Unmapped already (while leaving a VAS that is being detached); its entry stays
    /// until its last user lets go, and nothing maps or protects the range again.
    pub unmapped: bool,
}

/// Maps `size` bytes of `fd` from `offset` at exactly `base`, inaccessible, never
/// replacing an existing mapping (`MAP_FIXED_NOREPLACE`).
pub fn map_fixed(
    fd: &OwnedFd,
    base: u64,
    size: u64,
    offset: u64,
    path: &Path,
) -> Result<(), VasError> {
    // SAFETY: MAP_FIXED_NOREPLACE never replaces a mapping; the range is ours if it
    // succeeds at `base`.
    let r = unsafe {
        rustix::mm::mmap(
            base as *mut std::ffi::c_void,
            size as usize,
            ProtFlags::empty(),
            MapFlags::SHARED | MapFlags::FIXED_NOREPLACE,
            fd.as_fd(),
            offset,
        )
    };
    match r {
        Ok(p) if p as u64 == base => Ok(()),
        Ok(p) => {
            // A kernel older than 4.17 ignores the flag and treats the address as a hint.
            // SAFETY: the mapping just made elsewhere is ours.
            let _ = unsafe { rustix::mm::munmap(p, size as usize) };
            Err(VasError::AddressTaken {
                base,
                end: base + size,
                by: "an existing mapping (this kernel lacks MAP_FIXED_NOREPLACE)".into(),
            })
        }
        Err(rustix::io::Errno::EXIST) => Err(VasError::AddressTaken {
            base,
            end: base + size,
            by: "an existing mapping of this process".into(),
        }),
        Err(e) => Err(VasError::io("map segment", path, e.into())),
    }
}

/// Replaces the mapping at `base` by one of `fd` (to upgrade it to a writable
/// descriptor), keeping protection `prot`.
pub fn remap(
    fd: &OwnedFd,
    base: u64,
    size: u64,
    offset: u64,
    prot: ProtFlags,
    path: &Path,
) -> Result<(), VasError> {
    let at = Fixed { base, size, offset };
    map_over(fd, at, prot, MapFlags::SHARED, path, "remap segment")
}

/// The deliberately broken variant of the `resident` mechanism (tests only): replaces
/// the mapping at `base` by a private, read-write copy of `fd`'s pages — a writable
/// mapping of a segment the process may only read, which the security tests must catch.
pub fn remap_private(
    fd: &OwnedFd,
    base: u64,
    size: u64,
    offset: u64,
    path: &Path,
) -> Result<(), VasError> {
    let at = Fixed { base, size, offset };
    let rw = ProtFlags::READ | ProtFlags::WRITE;
    map_over(
        fd,
        at,
        rw,
        MapFlags::PRIVATE,
        path,
        "remap segment privately",
    )
}

/// A segment's own range, `size` bytes at `base`, of its file from `offset`.
struct Fixed {
    base: u64,
    size: u64,
    offset: u64,
}

/// Maps `fd` over the segment's own range `at`, in place (`MAP_FIXED` | `flags`).
fn map_over(
    fd: &OwnedFd,
    at: Fixed,
    prot: ProtFlags,
    flags: MapFlags,
    path: &Path,
    what: &'static str,
) -> Result<(), VasError> {
    // SAFETY: [base, base + size) is this segment's own mapping, replaced in place.
    unsafe {
        rustix::mm::mmap(
            at.base as *mut std::ffi::c_void,
            at.size as usize,
            prot,
            flags | MapFlags::FIXED,
            fd.as_fd(),
            at.offset,
        )
    }
    .map(|_| ())
    .map_err(|e| VasError::io(what, path, e.into()))
}

impl Mapped {
    /// Sets the protection of the whole segment (no call if unchanged).
    pub fn protect(&mut self, prot: ProtFlags) -> Result<bool, VasError> {
        if self.prot == prot || self.unmapped {
            return Ok(false);
        }
        if self.zap && prot.is_empty() {
            // SAFETY: the range is this segment's shared mapping: dropping its entries
            // loses no data (the pages stay in the file), later touches fault them in.
            unsafe {
                rustix::mm::madvise(
                    self.base as *mut _,
                    self.size as usize,
                    rustix::mm::Advice::LinuxDontNeed,
                )
            }
            .map_err(|e| VasError::io("madvise", Path::new(&self.name), e.into()))?;
        }
        // SAFETY: the range is this segment's mapping.
        unsafe {
            rustix::mm::mprotect(
                self.base as *mut _,
                self.size as usize,
                rustix::mm::MprotectFlags::from_bits_retain(prot.bits()),
            )
        }
        .map_err(|e| VasError::io("mprotect", Path::new(&self.name), e.into()))?;
        self.prot = prot;
        Ok(true)
    }

    /// Unmaps it (once: the range may hold another mapping afterwards).
    pub fn unmap(&mut self) {
        if std::mem::replace(&mut self.unmapped, true) {
            return;
        }
        // SAFETY: the range is this segment's mapping and no handle uses it any more.
        let _ = unsafe { rustix::mm::munmap(self.base as *mut _, self.size as usize) };
    }
}

/// The offset of a registry segment's bytes in its file.
pub const GLOBAL_OFFSET: u64 = HEADER_BYTES;

//! How a result becomes visible to the next process: written in full, made durable,
//! then named by one 8-byte store into the root, itself made durable.
//!
//! A process may die (SIGKILL, a crash) at any store. Everything an operation makes is
//! new memory from the arena's bump allocator, and the root names it only after it is
//! complete and written back: a process that dies before the root store leaves the old
//! result named (the allocator's `used` mark may have moved past a half-written block,
//! which is lost space, never a torn result); one that dies after it leaves the new
//! one. The root store is an aligned 8-byte atomic store (no tearing), preceded by a
//! release fence so the compiler and CPU keep the contents first.
//!
//! Durability on storage-class memory (a DAX-mounted registry) comes from writing the
//! block's cache lines back (clwb, else clflushopt, else clflush: chosen at run time,
//! [`persist_mode`]) and a store fence before the root store, and the root's line after
//! it. On tmpfs the write-back is harmless and the ordering is what matters.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering, fence};

use pmlab_native::{CpuPersistFeatures, MappedRange, PersistMode};
use pmlab_spine::Memory;

use crate::arena::{Addressing, Arena};
use crate::crash::{self, Broken};
use crate::error::SamError;
use crate::layout::{Ref, Root};

/// A root slot that names a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// `complete`: the load finished (value 1).
    Complete,
    /// The coordinate order.
    ByCoord,
    /// The name order.
    ByName,
    /// The index head.
    Index,
    /// The flagstat counters.
    Flagstat,
    /// The last view's selection.
    LastView,
}

impl Slot {
    fn offset(self) -> usize {
        match self {
            Slot::Complete => std::mem::offset_of!(Root, complete),
            Slot::ByCoord => std::mem::offset_of!(Root, by_coord),
            Slot::ByName => std::mem::offset_of!(Root, by_name),
            Slot::Index => std::mem::offset_of!(Root, index),
            Slot::Flagstat => std::mem::offset_of!(Root, flagstat),
            Slot::LastView => std::mem::offset_of!(Root, last_view),
        }
    }
}

/// The write-back instruction this CPU has (detected once, at run time).
pub fn persist_mode() -> PersistMode {
    static MODE: OnceLock<PersistMode> = OnceLock::new();
    *MODE.get_or_init(|| CpuPersistFeatures::detect().best_mode())
}

/// Bytes copied between crash points when a block is written.
const CHUNK: usize = 64 << 10;

impl<A: Addressing> Arena<A> {
    /// Writes back `len` bytes at arena offset `off` and fences.
    pub fn persist_offsets(&mut self, off: u64, len: u64) -> Result<(), SamError> {
        // SAFETY: the arena is mapped read-write for its lifetime; the mode was
        // detected on this CPU.
        let mut m = unsafe { MappedRange::new(self.base(), self.size(), persist_mode()) };
        m.persist(off, len).map_err(|e| SamError::Format {
            what: self.label().to_string(),
            problem: format!("write-back of {len} bytes at {off}: {e}"),
        })
    }

    fn offset_of_ref(&self, r: Ref) -> u64 {
        self.addressing().ptr(r) as u64 - self.base() as u64
    }

    /// Names `value` in root slot `slot`: a release fence, one atomic 8-byte store,
    /// and the root's line written back.
    pub fn publish(&mut self, slot: Slot, value: u64) -> Result<(), SamError> {
        crash::point();
        fence(Ordering::Release);
        // SAFETY: the root lies at the arena's (8-aligned) start, and every slot is an
        // aligned u64 field of it; AtomicU64 has u64's layout.
        let cell = unsafe { &*self.base().add(slot.offset()).cast::<AtomicU64>() };
        cell.store(value, Ordering::Release);
        self.persist_offsets(slot.offset() as u64, 8)?;
        crash::point();
        Ok(())
    }

    /// Stores `items` in new memory and publishes them in `slot` (see the module
    /// comment for the order; the `publish-first` broken variant names them first).
    pub fn put_published<T: Copy>(&mut self, slot: Slot, items: &[T]) -> Result<Ref, SamError> {
        let bytes = std::mem::size_of_val(items);
        let r = self.alloc(bytes as u64, std::mem::align_of::<T>().max(8) as u64)?;
        let early = crash::broken(Broken::PublishFirst);
        if early {
            self.publish(slot, r)?;
        }
        let dst = self.addressing().ptr(r);
        // SAFETY: `alloc` returned room for `bytes` bytes at `dst`; `T` is plain data.
        let src = unsafe { std::slice::from_raw_parts(items.as_ptr().cast::<u8>(), bytes) };
        for (i, piece) in src.chunks(CHUNK).enumerate() {
            // SAFETY: inside the block just allocated.
            unsafe {
                std::ptr::copy_nonoverlapping(piece.as_ptr(), dst.add(i * CHUNK), piece.len())
            };
            crash::point();
        }
        if !early {
            let off = self.offset_of_ref(r);
            self.persist_offsets(off, bytes as u64)?;
            self.publish(slot, r)?;
        }
        Ok(r)
    }
}

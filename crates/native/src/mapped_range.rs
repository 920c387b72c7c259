//! The spine's memory over a range that something else mapped: a SpaceJMP segment at
//! its fixed address (`pmlab-vas` maps it and decides who may write it), reached by
//! the transaction protocols like any region, with the same persist instructions.

use pmlab_spine::{
    Addr, FlushKind, Memory, PersistCounters, SpineError, check_bounds, lines_spanned,
};

use crate::persist::{PersistMode, flush_lines, store_fence};

/// [`Memory`] over `[ptr, ptr + len)`, a shared mapping owned elsewhere. Addresses are
/// offsets from `ptr`. Stores go straight to the mapping; flushes execute `mode`'s
/// write-back instruction (a CPU mode this CPU supports, or `Portable`).
#[derive(Debug)]
pub struct MappedRange {
    ptr: *mut u8,
    len: u64,
    mode: PersistMode,
    counters: PersistCounters,
}

impl MappedRange {
    /// A memory over `[ptr, ptr + len)`.
    ///
    /// # Safety
    /// The range must stay mapped readable for as long as the value is used, and
    /// writable whenever [`Memory::write`] is called; `mode` must be `Portable` or a CPU
    /// mode this CPU supports ([`crate::CpuPersistFeatures::supports`]). `Msync` is
    /// treated as `Portable` (the owner of the mapping syncs it).
    pub unsafe fn new(ptr: *mut u8, len: u64, mode: PersistMode) -> MappedRange {
        let mode = if mode == PersistMode::Msync {
            PersistMode::Portable
        } else {
            mode
        };
        MappedRange {
            ptr,
            len,
            mode,
            counters: PersistCounters::default(),
        }
    }

    /// The write-back instruction flushes execute.
    pub fn persist_mode(&self) -> PersistMode {
        self.mode
    }
}

impl Memory for MappedRange {
    fn size(&self) -> u64 {
        self.len
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        check_bounds(addr, buf.len() as u64, self.len)?;
        // SAFETY: in bounds of the live mapping (constructor's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.add(addr as usize), buf.as_mut_ptr(), buf.len())
        };
        Ok(())
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.len)?;
        let to = self.ptr.wrapping_add(addr as usize);
        if let Ok(word) = <[u8; 8]>::try_from(data) {
            // One word, the most common store (a pointer, a counter): a move, not a
            // call to memcpy.
            // SAFETY: in bounds of the live, writable mapping (constructor's contract).
            unsafe { to.cast::<[u8; 8]>().write_unaligned(word) };
            return Ok(());
        }
        // SAFETY: in bounds of the live, writable mapping (constructor's contract).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), to, data.len()) };
        Ok(())
    }

    fn write_in_place(&mut self, addr: Addr, len: u64) -> Result<Option<&mut [u8]>, SpineError> {
        check_bounds(addr, len, self.len)?;
        // SAFETY: in bounds of the live, writable mapping (constructor's contract); the
        // slice borrows `self`, so no other access through this value overlaps it.
        Ok(Some(unsafe {
            std::slice::from_raw_parts_mut(self.ptr.add(addr as usize), len as usize)
        }))
    }

    fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError> {
        check_bounds(addr, len, self.len)?;
        if len == 0 {
            return Ok(());
        }
        self.counters.flushes += lines_spanned(addr, len);
        let mode = if kind == FlushKind::Clflush && self.mode.is_cpu_flush() {
            PersistMode::Clflush
        } else {
            self.mode
        };
        // SAFETY: in bounds of the live mapping; the mode is one this CPU has.
        unsafe { flush_lines(mode, self.ptr.add(addr as usize), len as usize) };
        Ok(())
    }

    fn fence(&mut self) {
        self.counters.fences += 1;
        store_fence(self.mode);
    }

    fn persist_counters(&self) -> PersistCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuPersistFeatures;

    #[test]
    fn reads_writes_and_counts_over_a_borrowed_buffer() {
        let mut buf = vec![0u8; 256];
        let mode = CpuPersistFeatures::detect().best_mode();
        // SAFETY: buf outlives m and is writable.
        {
            let mut m = unsafe { MappedRange::new(buf.as_mut_ptr(), 256, mode) };
            m.write_u64(64, 7).unwrap();
            m.persist(60, 8).unwrap();
            assert_eq!(m.read_u64(64).unwrap(), 7);
            assert!(m.write_u64(250, 1).is_err());
            assert_eq!(m.persist_counters().flushes, 2);
            assert_eq!(m.persist_counters().fences, 1);
        }
        assert_eq!(buf[64], 7);
    }
}

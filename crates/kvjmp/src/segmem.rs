//! The segment as the transactions' memory, and the two ways a SET can reach it:
//! through the redo protocol (the store) or straight in place (the deliberately broken
//! variant the kill test must catch).

use std::sync::atomic::{AtomicU64, Ordering};

use pmlab_native::{MappedRange, PersistMode};
use pmlab_spine::{Addr, FlushKind, Memory, PersistCounters, SpineError};
use pmlab_tx::{Protocol, RedoProtocol, TxError, TxMemory};

use crate::heap::SegTx;
use crate::persist::Persist;

/// Stores left before this process kills itself with SIGKILL (0: never). The kill
/// tests arm it to die at a chosen store inside a SET, lock held.
static KILL_AT_STORE: AtomicU64 = AtomicU64::new(0);

/// Makes this process SIGKILL itself at its `n`-th store to a store's segment from now
/// (`n` >= 1), for the kill tests.
pub fn arm_kill_at_store(n: u64) {
    KILL_AT_STORE.store(n, Ordering::Relaxed);
}

fn count_store() {
    let left = KILL_AT_STORE.load(Ordering::Relaxed);
    if left == 0 {
        return;
    }
    if left == 1 {
        // SAFETY: raise has no memory-safety preconditions.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    KILL_AT_STORE.store(left - 1, Ordering::Relaxed);
}

/// The segment's bytes as spine memory (offsets from the segment's first byte),
/// flushed and fenced as the client's persistence domain asks.
pub struct SegMem(MappedRange, Persist);

impl SegMem {
    /// Memory over the mapped segment `[base, base + size)`.
    ///
    /// # Safety
    /// The segment must stay mapped while the value is used, and writable when it is
    /// written (the caller holds the exclusive lock, switched into a read-write VAS).
    pub unsafe fn new(base: *mut u8, size: u64, mode: PersistMode, persist: Persist) -> SegMem {
        // SAFETY: forwarded to the caller.
        SegMem(unsafe { MappedRange::new(base, size, mode) }, persist)
    }
}

impl Memory for SegMem {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        self.0.read(addr, buf)
    }
    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        count_store();
        self.0.write(addr, data)
    }
    fn write_in_place(&mut self, addr: Addr, len: u64) -> Result<Option<&mut [u8]>, SpineError> {
        // One store, as a `write` of the bytes the caller leaves there: the kill tests
        // count it the same way.
        count_store();
        self.0.write_in_place(addr, len)
    }
    fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError> {
        match self.1 {
            Persist::Power => self.0.flush(addr, len, kind),
            // Nothing to write back: the process domain ends at the shared mapping.
            Persist::Process => pmlab_spine::check_bounds(addr, len, self.0.size()),
        }
    }
    fn fence(&mut self) {
        match self.1 {
            Persist::Power => self.0.fence(),
            // Program order is all a killed process's successor needs (see
            // `crate::persist`); the compiler must not move stores across a step.
            Persist::Process => std::sync::atomic::compiler_fence(Ordering::SeqCst),
        }
    }
    fn persist_counters(&self) -> PersistCounters {
        self.0.persist_counters()
    }
}

fn zero_and_flush(mem: &mut SegMem, addr: Addr, len: u64) -> Result<(), TxError> {
    const CHUNK: usize = 64 * 1024;
    let zeros = [0u8; CHUNK];
    let mut at = addr;
    while at < addr + len {
        let n = (addr + len - at).min(CHUNK as u64);
        mem.write(at, &zeros[..n as usize])?;
        at += n;
    }
    mem.flush(addr, len, FlushKind::Clwb)?;
    Ok(())
}

impl SegTx for RedoProtocol<SegMem> {
    fn zero_unlogged(&mut self, addr: Addr, len: u64) -> Result<(), TxError> {
        zero_and_flush(self.memory_mut(), addr, len)
    }
}

/// The broken variant: every store of a SET goes straight to the segment, with no
/// log, so a SET killed half-way leaves half of it.
pub struct InPlace(pub SegMem);

impl TxMemory for InPlace {
    fn tx_read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        Ok(self.0.read(addr, buf)?)
    }
    fn tx_write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        self.0.write(addr, data)?;
        Ok(self.0.persist(addr, data.len() as u64)?)
    }
}

impl SegTx for InPlace {
    fn zero_unlogged(&mut self, addr: Addr, len: u64) -> Result<(), TxError> {
        zero_and_flush(&mut self.0, addr, len)
    }
}

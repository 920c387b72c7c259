//! The spine: the one memory interface that everything above pmlab's substrates uses.
//!
//! Two substrates implement [`Memory`]: the machine model (`pmlab-model`), which counts
//! and can crash, and the native substrate (`pmlab-native`), which maps a real region and
//! issues real persist instructions. Transactions, the file system and the workloads are
//! written once against this trait and run on both.
//!
//! Addresses are byte offsets into the substrate's persistent space, starting at 0.
//! Durability follows the x86 persistency model: a store becomes durable once the line
//! holding it has been written back (by eviction, or by a flush) and, for flushes issued
//! with [`FlushKind::Clwb`] or [`FlushKind::Clflushopt`], a later [`Memory::fence`] has
//! ordered it. [`Memory::persist`] is the usual "flush a range, then fence".

use thiserror::Error;

mod page;
mod size;
pub use page::{Asid, BadPageSize, PageSize};
pub use size::parse_size;

/// A byte address in a substrate's space.
pub type Addr = u64;

/// The size of a cache line as the persist primitives see it.
pub const LINE: u64 = 64;

/// How a range is written back to the persistence domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushKind {
    /// `clflush`: writes back and invalidates; ordered with respect to other stores and
    /// flushes without a fence.
    Clflush,
    /// `clflushopt`: writes back and invalidates; weakly ordered, needs a fence.
    Clflushopt,
    /// `clwb`: writes back and keeps the line valid; weakly ordered, needs a fence.
    Clwb,
}

/// An access outside the substrate's space, or one it cannot serve.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SpineError {
    /// The access `[addr, addr + len)` does not lie inside a space of `size` bytes.
    #[error("access of {len} bytes at {addr:#x} is outside the {size}-byte space")]
    OutOfBounds {
        /// First byte of the access.
        addr: Addr,
        /// Length of the access in bytes.
        len: u64,
        /// Size of the space.
        size: u64,
    },
}

/// Checks that `[addr, addr + len)` lies inside a space of `size` bytes.
pub fn check_bounds(addr: Addr, len: u64, size: u64) -> Result<(), SpineError> {
    match addr.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(SpineError::OutOfBounds { addr, len, size }),
    }
}

/// Counts of the persist operations a substrate executed; both substrates keep them so
/// that a protocol's flush and fence cost is visible natively too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PersistCounters {
    /// Cache lines flushed (one per line, whatever the [`FlushKind`]).
    pub flushes: u64,
    /// Fences executed.
    pub fences: u64,
}

/// The memory interface: read, write, flush a range, fence.
pub trait Memory {
    /// Size of the space in bytes.
    fn size(&self) -> u64;

    /// Copies `buf.len()` bytes starting at `addr` into `buf`.
    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError>;

    /// Stores `data` at `addr`. The store is visible to later reads at once; it is
    /// durable only as the module documentation says.
    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError>;

    /// Writes back every line that overlaps `[addr, addr + len)`.
    fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError>;

    /// Orders all earlier flushes and stores before any later ones (`sfence`).
    fn fence(&mut self);

    /// Persist operations executed so far.
    fn persist_counters(&self) -> PersistCounters;

    /// Makes `[addr, addr + len)` durable: `clwb` every line, then one fence.
    fn persist(&mut self, addr: Addr, len: u64) -> Result<(), SpineError> {
        self.flush(addr, len, FlushKind::Clwb)?;
        self.fence();
        Ok(())
    }

    /// The bytes `[addr, addr + len)` for the caller to store into directly: one store
    /// of those bytes, as a [`Memory::write`] of what the caller leaves in them would
    /// be, on a substrate whose stores need no bookkeeping (a plain mapping). It saves
    /// building bytes in a buffer only to copy them. `Ok(None)`, the default, is the
    /// answer of a substrate that must see every store's data (the machine model
    /// traces and buffers them): the caller then builds the bytes and writes them.
    /// The slice holds the memory's current contents.
    fn write_in_place(&mut self, addr: Addr, len: u64) -> Result<Option<&mut [u8]>, SpineError> {
        check_bounds(addr, len, self.size())?;
        Ok(None)
    }

    /// Reads a little-endian `u64` at `addr`.
    fn read_u64(&mut self, addr: Addr) -> Result<u64, SpineError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Writes a little-endian `u64` at `addr`.
    fn write_u64(&mut self, addr: Addr, value: u64) -> Result<(), SpineError> {
        self.write(addr, &value.to_le_bytes())
    }
}

/// Number of lines that `[addr, addr + len)` overlaps.
pub fn lines_spanned(addr: Addr, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let first = addr / LINE;
    let last = (addr + len - 1) / LINE;
    last - first + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert!(check_bounds(0, 8, 8).is_ok());
        assert!(check_bounds(1, 8, 8).is_err());
        assert!(check_bounds(u64::MAX, 2, u64::MAX).is_err());
    }

    #[test]
    fn spanned() {
        assert_eq!(lines_spanned(0, 0), 0);
        assert_eq!(lines_spanned(0, 64), 1);
        assert_eq!(lines_spanned(63, 2), 2);
        assert_eq!(lines_spanned(64, 129), 3);
    }
}

/// A plain volatile memory backed by a `Vec<u8>`: every store is immediately "durable".
///
/// It is the reference for functional behaviour (what a structure computes, not how it
/// survives crashes); crash testing uses the machine model's persistence domain.
#[derive(Clone, Debug)]
pub struct VecMemory {
    bytes: Vec<u8>,
    counters: PersistCounters,
}

impl VecMemory {
    /// A zero-filled memory of `size` bytes.
    pub fn new(size: usize) -> Self {
        Self {
            bytes: vec![0; size],
            counters: PersistCounters::default(),
        }
    }

    /// The whole contents.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl Memory for VecMemory {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        check_bounds(addr, buf.len() as u64, self.size())?;
        let a = addr as usize;
        buf.copy_from_slice(&self.bytes[a..a + buf.len()]);
        Ok(())
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.size())?;
        let a = addr as usize;
        self.bytes[a..a + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn flush(&mut self, addr: Addr, len: u64, _kind: FlushKind) -> Result<(), SpineError> {
        check_bounds(addr, len, self.size())?;
        self.counters.flushes += lines_spanned(addr, len);
        Ok(())
    }

    fn write_in_place(&mut self, addr: Addr, len: u64) -> Result<Option<&mut [u8]>, SpineError> {
        check_bounds(addr, len, self.size())?;
        Ok(Some(&mut self.bytes[addr as usize..(addr + len) as usize]))
    }

    fn fence(&mut self) {
        self.counters.fences += 1;
    }

    fn persist_counters(&self) -> PersistCounters {
        self.counters
    }
}

#[cfg(test)]
mod vec_memory_tests {
    use super::*;

    #[test]
    fn round_trip_and_counters() {
        let mut m = VecMemory::new(256);
        m.write_u64(8, 0xdead_beef).unwrap();
        assert_eq!(m.read_u64(8).unwrap(), 0xdead_beef);
        m.persist(60, 8).unwrap();
        assert_eq!(
            m.persist_counters(),
            PersistCounters {
                flushes: 2,
                fences: 1
            }
        );
        assert!(m.write(250, &[0; 8]).is_err());
        m.write_in_place(16, 4)
            .unwrap()
            .unwrap()
            .copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(&m.bytes()[15..21], &[0, 1, 2, 3, 4, 0]);
        assert!(m.write_in_place(250, 8).is_err());
    }
}

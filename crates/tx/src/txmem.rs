//! What a transaction offers to structures that update persistent memory inside it.

use pmlab_spine::{Addr, Memory};

use crate::error::TxError;
use crate::redo::RedoTx;
use crate::undo::UndoTx;

/// Reads and writes inside a transaction: the writes become durable atomically at
/// commit and vanish at abort. Structures written against this trait (the allocator's
/// [`crate::Allocator::alloc_in`], say) work with either logging scheme.
pub trait TxMemory {
    /// Reads `buf.len()` bytes at `addr` as the transaction sees them.
    fn tx_read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError>;

    /// Writes `data` at `addr` as part of the transaction.
    fn tx_write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError>;

    /// Reads a little-endian `u64`.
    fn tx_read_u64(&mut self, addr: Addr) -> Result<u64, TxError> {
        let mut b = [0u8; 8];
        self.tx_read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Writes a little-endian `u64`.
    fn tx_write_u64(&mut self, addr: Addr, value: u64) -> Result<(), TxError> {
        self.tx_write(addr, &value.to_le_bytes())
    }
}

impl<M: Memory + ?Sized> TxMemory for RedoTx<'_, M> {
    fn tx_read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        self.read(addr, buf)
    }

    fn tx_write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        self.write(addr, data)
    }
}

impl<M: Memory> TxMemory for UndoTx<'_, M> {
    fn tx_read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        self.read(addr, buf)
    }

    fn tx_write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        self.write(addr, data)
    }
}

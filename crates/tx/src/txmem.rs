//! What a transaction offers to structures that update persistent memory inside it.

use pmlab_spine::{Addr, Memory};

use crate::error::TxError;
use crate::protocol::Protocol;
use crate::ranges::WriteSet;
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

/// Every transaction protocol is a transactional memory while a transaction runs.
impl<P: Protocol> TxMemory for P {
    fn tx_read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        self.read(addr, buf)
    }

    fn tx_write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        self.write(addr, data)
    }
}

/// The stores of a transaction combined before they reach the protocol: structures
/// that update many fields (a tree rotation, a node split) write them here, and
/// [`Staged::finish`] hands the protocol one [`Protocol::declare`] of every changed
/// range and one store per range, in address order. Under undo logging that is one
/// snapshot fence per operation instead of one per field, as a PMDK program that
/// adds its ranges before storing; other protocols see the same bytes stored.
#[derive(Debug, Default)]
pub struct Batch {
    writes: WriteSet,
    ranges: Vec<(Addr, u64)>,
}

impl Batch {
    /// An empty batch (keep it across transactions to reuse its buffers).
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Stages stores for `p`'s running transaction.
    pub fn on<'a, P: Protocol>(&'a mut self, p: &'a mut P) -> Staged<'a, P> {
        self.writes.clear();
        Staged { p, batch: self }
    }
}

/// A [`Batch`] in use over a protocol: reads see the staged stores.
pub struct Staged<'a, P: Protocol> {
    p: &'a mut P,
    batch: &'a mut Batch,
}

impl<P: Protocol> Staged<'_, P> {
    /// Declares every staged range to the protocol and stores them, in address order.
    /// The batch is empty afterwards (and can stage more).
    pub fn finish(&mut self) -> Result<(), TxError> {
        if self.batch.writes.is_empty() {
            return Ok(());
        }
        self.batch.ranges.clear();
        let ranges = self.batch.writes.iter().map(|(a, d)| (a, d.len() as u64));
        self.batch.ranges.extend(ranges);
        self.p.declare(&self.batch.ranges)?;
        for (addr, data) in self.batch.writes.iter() {
            self.p.write(addr, data)?;
        }
        self.batch.writes.clear();
        Ok(())
    }

    /// The protocol underneath.
    pub fn protocol(&mut self) -> &mut P {
        self.p
    }
}

impl<P: Protocol> TxMemory for Staged<'_, P> {
    fn tx_read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        self.p.read(addr, buf)?;
        self.batch.writes.overlay(addr, buf);
        Ok(())
    }

    fn tx_write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        if !data.is_empty() {
            self.batch.writes.insert(addr, data);
        }
        Ok(())
    }
}

//! Building a workload's structure before it is measured: natively, in a plain memory,
//! through a protocol that writes in place — a bulk load. The structure's image then
//! boots the machine each protocol is measured on, so every protocol starts from the
//! same bytes and none pays (or counts) the load.

use pmlab_spine::{Addr, Memory, VecMemory};
use pmlab_tx::{Area, Protocol, Recovery, TxError, TxId, TxStats};

/// Transactions that write in place and keep the old bytes in DRAM for an abort; no
/// durability at all (the loader of a structure, never a protocol under test).
pub struct BulkLoad {
    mem: VecMemory,
    data: Area,
    in_tx: bool,
    undo: Vec<(Addr, Vec<u8>)>,
    committed: TxId,
    stats: TxStats,
}

impl BulkLoad {
    /// A loader over a zeroed memory of `size` bytes whose transactions may write
    /// `data`.
    pub fn new(size: u64, data: Area) -> Self {
        BulkLoad {
            mem: VecMemory::new(size as usize),
            data,
            in_tx: false,
            undo: Vec::new(),
            committed: 0,
            stats: TxStats::default(),
        }
    }

    fn check(&self, op: &'static str, addr: Addr, len: u64) -> Result<(), TxError> {
        if self.data.contains(addr, len) {
            return Ok(());
        }
        Err(TxError::OutsideData {
            op,
            addr,
            len,
            lo: self.data.base,
            hi: self.data.end(),
        })
    }
}

impl Protocol for BulkLoad {
    type Mem = VecMemory;

    fn name(&self) -> &'static str {
        "bulk-load"
    }

    fn recover(&mut self) -> Result<Recovery, TxError> {
        Ok(Recovery::default())
    }

    fn begin(&mut self) -> Result<(), TxError> {
        if self.in_tx {
            return Err(TxError::InTransaction);
        }
        self.in_tx = true;
        Ok(())
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        self.check("read", addr, buf.len() as u64)?;
        Ok(self.mem.read(addr, buf)?)
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        if !self.in_tx {
            return Err(TxError::NoTransaction { op: "write" });
        }
        self.check("write", addr, data.len() as u64)?;
        let mut old = vec![0u8; data.len()];
        self.mem.read(addr, &mut old)?;
        self.undo.push((addr, old));
        self.mem.write(addr, data)?;
        self.stats.writes += 1;
        Ok(())
    }

    fn commit(&mut self) -> Result<TxId, TxError> {
        if !self.in_tx {
            return Err(TxError::NoTransaction { op: "commit" });
        }
        self.undo.clear();
        self.in_tx = false;
        self.committed += 1;
        self.stats.commits += 1;
        Ok(self.committed)
    }

    fn abort(&mut self) -> Result<(), TxError> {
        if !self.in_tx {
            return Err(TxError::NoTransaction { op: "abort" });
        }
        for (addr, old) in self.undo.drain(..).rev() {
            self.mem.write(addr, &old)?;
        }
        self.in_tx = false;
        self.stats.aborts += 1;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TxError> {
        Ok(())
    }

    fn durable(&self) -> TxId {
        self.committed
    }

    fn in_transaction(&self) -> bool {
        self.in_tx
    }

    fn stats(&self) -> TxStats {
        self.stats
    }

    fn memory(&self) -> &VecMemory {
        &self.mem
    }

    fn memory_mut(&mut self) -> &mut VecMemory {
        &mut self.mem
    }

    fn into_memory(self) -> VecMemory {
        self.mem
    }
}

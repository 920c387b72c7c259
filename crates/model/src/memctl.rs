//! The memory controller: one FIFO queue per bank.
//!
//! Lines are interleaved over the banks (line `n` lives in bank `n mod banks`), and a
//! bank serves its requests one at a time, in arrival order, each occupying the bank for
//! the device's whole access latency (LOC's Table I gives one latency, 168 cycles, and
//! eight banks; it gives no separate bank busy time, so a bank is busy for the whole
//! access). Independent write-backs to different banks therefore overlap, writes to one
//! bank queue behind each other, and a read waits for the writes queued before it in its
//! bank (there is no read priority: the queues are FIFO).
//!
//! Requests are issued in nondecreasing time by the one in-order core, so a queue is
//! fully described by the cycle its bank becomes free; the controller never drops a
//! request (the queues are unbounded, as the paper states no queue depth).
//!
//! A persist barrier waits for exactly the writes it orders: every write returns the
//! cycle it completes, and the caller waits for the latest of the ones it cares about
//! (see [`crate::Machine::persist_barrier`] and [`Memory::fence`](pmlab_spine::Memory::fence)).

use pmlab_spine::LINE;
use serde::{Deserialize, Serialize};

/// What the controller counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemCtlStats {
    /// Line reads served.
    pub reads: u64,
    /// Line writes served.
    pub writes: u64,
    /// Cycles requests spent waiting for a busy bank (queueing delay, summed).
    pub queue_cycles: u64,
}

/// Per-bank FIFO queues in front of the memory device.
#[derive(Clone, Debug)]
pub struct MemoryController {
    /// `free[b]`: the cycle bank `b` finishes the last request queued to it.
    free: Vec<u64>,
    read_cycles: u64,
    write_cycles: u64,
    stats: MemCtlStats,
}

impl MemoryController {
    /// `banks` banks; a read occupies its bank `read_cycles`, a write `write_cycles`.
    pub fn new(banks: u64, read_cycles: u64, write_cycles: u64) -> Self {
        Self {
            free: vec![0; banks.max(1) as usize],
            read_cycles,
            write_cycles,
            stats: MemCtlStats::default(),
        }
    }

    /// The bank holding physical address `paddr`.
    pub fn bank_of(&self, paddr: u64) -> usize {
        ((paddr / LINE) % self.free.len() as u64) as usize
    }

    /// Number of banks.
    pub fn banks(&self) -> usize {
        self.free.len()
    }

    /// Cycles of one read.
    pub fn read_cycles(&self) -> u64 {
        self.read_cycles
    }

    /// Cycles of one write.
    pub fn write_cycles(&self) -> u64 {
        self.write_cycles
    }

    /// Queues a line read arriving at cycle `now`; returns the cycle its data is back.
    pub fn read(&mut self, now: u64, paddr: u64) -> u64 {
        self.stats.reads += 1;
        self.serve(now, paddr, self.read_cycles)
    }

    /// Queues a line write arriving at cycle `now`; returns the cycle it completes (is
    /// in the device).
    pub fn write(&mut self, now: u64, paddr: u64) -> u64 {
        self.stats.writes += 1;
        self.serve(now, paddr, self.write_cycles)
    }

    fn serve(&mut self, now: u64, paddr: u64, cycles: u64) -> u64 {
        let b = self.bank_of(paddr);
        let start = now.max(self.free[b]);
        self.stats.queue_cycles += start - now;
        self.free[b] = start + cycles;
        start + cycles
    }

    /// The cycle the last queued request of every bank completes.
    pub fn idle_at(&self) -> u64 {
        self.free.iter().copied().max().unwrap_or(0)
    }

    /// Counters so far.
    pub fn stats(&self) -> &MemCtlStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banks_overlap_and_queues_serialize() {
        let mut c = MemoryController::new(8, 168, 168);
        // Eight consecutive lines: eight banks, all done 168 cycles after arrival.
        let done: Vec<u64> = (0..8).map(|i| c.write(100, i * 64)).collect();
        assert_eq!(done, vec![268; 8]);
        // The ninth line is bank 0 again: it waits for the first.
        assert_eq!(c.write(100, 8 * 64), 268 + 168);
        // A read of bank 1 arriving at 200 waits until 268.
        assert_eq!(c.read(200, 64 + 8 * 64), 268 + 168);
        // A read of an idle bank much later is not delayed.
        assert_eq!(c.read(1000, 2 * 64), 1168);
        assert_eq!(c.stats().queue_cycles, 168 + 68);
        assert_eq!((c.stats().reads, c.stats().writes), (2, 9));
        assert_eq!(c.idle_at(), 1168);
    }

    #[test]
    fn a_line_keeps_its_bank() {
        let c = MemoryController::new(8, 1, 1);
        assert_eq!(c.bank_of(0), c.bank_of(63));
        assert_eq!(c.bank_of(64 * 9 + 5), 1);
    }
}

//! The core every protocol of paper 001 runs on: the machine (its clock, memory
//! controller and images) and the tagged cache hierarchy, with the cost model of an
//! in-order core.
//!
//! # Cost model
//!
//! LOC's evaluation runs gem5's TimingSimpleCPU at 1 GHz (§V-A): one instruction per
//! cycle, and a memory access costs the latency of the level that serves it. Here:
//!
//! - every line a read or write touches is one access: one cycle to issue plus the
//!   latencies of the levels looked in (L1 1, L2 8, LLC 21 cycles, Table I); a miss
//!   in every level reaches the memory controller after them and waits for its bank
//!   (168 cycles per access, 8 banks, FIFO queues: `pmlab_model::memctl`);
//! - the workload's computation, which the transaction interface does not see, is
//!   charged per operation of the workload ([`ComputeModel`]): a fixed number of
//!   instructions per read or write call (the address arithmetic, comparison and loop
//!   around each access) and per transaction (the driver drawing its operation, the
//!   calls into the transaction library);
//! - write-backs between cache levels are free (they leave through write buffers);
//!   write-backs to memory occupy their bank but do not stall the core;
//! - a transactional instruction (`TxBegin`, `TxCommit`, `TxAbort`, `TxFlush`) and a
//!   `clflush` or `mfence` take one cycle to issue, plus whatever they wait for.

use pmlab_model::Machine;
use pmlab_spine::LINE;

use crate::hierarchy::{Hierarchy, Overflow};
use crate::ledger::{CycleLedger, Wait};

/// The instructions of the workload's own computation, charged per operation.
///
/// Estimates, not fitted to any result: a TimingSimpleCPU executes the address
/// arithmetic, compare and branch around each access of a data-structure operation in a
/// handful of instructions, and a transaction's driver draws its random operation and
/// calls into the library in a few dozen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ComputeModel {
    /// Instructions per read or write call.
    pub per_access: u64,
    /// Instructions per transaction.
    pub per_tx: u64,
}

impl Default for ComputeModel {
    fn default() -> Self {
        ComputeModel {
            per_access: 4,
            per_tx: 20,
        }
    }
}

/// What the core counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CoreStats {
    /// Line accesses (reads and writes of the workload, and the protocols' own).
    pub accesses: u64,
    /// Line accesses that went to memory.
    pub memory_reads: u64,
    /// Cycles the core stalled on persistence (barriers, flushes, window ends).
    pub persist_stall_cycles: u64,
    /// Cycles the core's memory reads waited for their bank, busy with requests queued
    /// before them (mostly the protocols' log and home writes): a read's time to data
    /// beyond the unloaded access.
    pub read_queue_cycles: u64,
}

/// The machine and the tagged hierarchy.
pub struct Core {
    /// The machine: clock, memory controller, coherent and durable images.
    pub m: Machine,
    /// The tagged cache hierarchy.
    pub h: Hierarchy,
    /// `cum[i]`: cycles of looking in levels `0..=i`.
    cum: Vec<u64>,
    /// The workload's computation.
    pub compute: ComputeModel,
    stats: CoreStats,
    ledger: CycleLedger,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// Why a machine cannot carry these protocols.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// No cache levels.
    #[error("the machine has no caches; the hardware protocols extend its cache tags")]
    NoCaches,
    /// Blocks other than 64 bytes.
    #[error("cache level {0} has {1}-byte blocks; the protocols track 64-byte lines")]
    BlockSize(usize, u64),
    /// Memory too large for the log's 32-bit line addresses.
    #[error("{0} bytes of memory: the log's BLK-TAG holds 32-bit line numbers (256 GiB)")]
    TooLarge(u64),
}

impl Core {
    /// A core over `m`, with a hierarchy of the machine's cache levels (sizes,
    /// associativities and latencies; always LRU).
    pub fn new(m: Machine, compute: ComputeModel) -> Result<Core, CoreError> {
        let levels = &m.config().caches;
        if levels.is_empty() {
            return Err(CoreError::NoCaches);
        }
        if let Some((i, c)) = levels.iter().enumerate().find(|(_, c)| c.block_size != 64) {
            return Err(CoreError::BlockSize(i, c.block_size));
        }
        if m.config().memory_size > (1u64 << 32) * LINE {
            return Err(CoreError::TooLarge(m.config().memory_size));
        }
        let h = Hierarchy::new(&levels.iter().map(|c| (c.size, c.assoc)).collect::<Vec<_>>());
        let mut sum = 0;
        let cum = levels
            .iter()
            .map(|c| {
                sum += c.latency_cycles;
                sum
            })
            .collect();
        let ledger = CycleLedger::new(levels.len());
        Ok(Core {
            m,
            h,
            cum,
            compute,
            stats: CoreStats::default(),
            ledger,
        })
    }

    /// Counters so far.
    pub fn stats(&self) -> &CoreStats {
        &self.stats
    }

    /// Where the core's cycles went since it was made: its total is exactly the cycles
    /// the clock moved through this core.
    pub fn ledger(&self) -> &CycleLedger {
        &self.ledger
    }

    /// Cycles of reaching the LLC (L2 and LLC latencies: a line moving from the upper
    /// levels into it).
    pub fn llc_cycles(&self) -> u64 {
        self.cum[self.cum.len() - 1] - self.cum[0]
    }

    /// One access of `line`: issue, the levels looked in, and a memory read on a miss,
    /// waiting for its bank. Returns the level that served it.
    pub fn access(&mut self, line: u64) -> Result<usize, Overflow> {
        self.stats.accesses += 1;
        self.m.count_instructions(1);
        let served = self.h.access(line)?;
        self.ledger.served[served] += 1;
        if served == self.cum.len() {
            self.stats.memory_reads += 1;
            let now = self.m.cycles();
            let arrival = now + 1 + self.cum[served - 1];
            let ready = self.m.port_read(arrival, line * LINE);
            let unloaded = self.m.memory_controller().read_cycles();
            let queued = (ready - arrival).saturating_sub(unloaded);
            self.stats.read_queue_cycles += queued;
            self.ledger.read_queue += queued;
            self.ledger.level_cycles[served] += ready - now - queued;
            self.m.stall_until(ready);
        } else {
            let cycles = 1 + self.cum[served];
            self.ledger.level_cycles[served] += cycles;
            self.m.advance_cycles(cycles);
        }
        Ok(served)
    }

    /// Charges `n` instructions of computation.
    pub fn compute(&mut self, n: u64) {
        self.ledger.compute += n;
        self.m.count_instructions(n);
        self.m.advance_cycles(n);
    }

    /// One transactional or flush instruction's issue cycle.
    pub fn instruction(&mut self) {
        self.protocol_cycles(1);
    }

    /// `n` instructions of the protocol's own (not the workload's computation).
    pub fn protocol_cycles(&mut self, n: u64) {
        self.ledger.instructions += n;
        self.m.count_instructions(n);
        self.m.advance_cycles(n);
    }

    /// Waits until `cycle` for persistence, counting the stall under `why`.
    pub fn persist_wait(&mut self, cycle: u64, why: Wait) {
        let now = self.m.cycles();
        if cycle > now {
            self.stats.persist_stall_cycles += cycle - now;
            self.ledger.add_wait(why, cycle - now);
        }
        self.m.persist_barrier(cycle);
    }

    /// The newest data of `line` (the coherent image).
    pub fn line_data(&self, line: u64) -> [u8; 64] {
        let a = (line * LINE) as usize;
        self.m.current_image()[a..a + 64]
            .try_into()
            .expect("a line is 64 bytes")
    }

    /// Copies from the coherent image.
    pub fn view(&self, addr: u64, buf: &mut [u8]) {
        let a = addr as usize;
        buf.copy_from_slice(&self.m.current_image()[a..a + buf.len()]);
    }

    /// Stores into the coherent image.
    pub fn set_view(&mut self, addr: u64, data: &[u8]) {
        self.m.coherent_write(addr, data);
    }

    /// Splits `[addr, addr + len)` into `(line, offset in line, offset in the buffer,
    /// bytes)` pieces.
    pub fn pieces(addr: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
        let mut off = 0usize;
        std::iter::from_fn(move || {
            if off >= len {
                return None;
            }
            let a = addr + off as u64;
            let in_line = (a % LINE) as usize;
            let n = (LINE as usize - in_line).min(len - off);
            let item = (a / LINE, in_line, off, n);
            off += n;
            Some(item)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Wait;
    use pmlab_model::MachineConfig;

    #[test]
    fn a_read_counts_the_cycles_it_queues_behind_a_write() {
        let m = Machine::new(MachineConfig::loc(1 << 20)).unwrap();
        let mut c = Core::new(m, ComputeModel::default()).unwrap();
        // A write of line 13 (bank 5) issued at cycle 0 holds the bank until 168.
        assert_eq!(c.m.port_write(0, 13 * LINE, &[0u8; 64]), 168);
        // Line 5 (bank 5 too) misses everywhere: it reaches the controller at
        // 1 + 30 = 31, waits until 168 for the bank, and is back at 336.
        assert_eq!(c.access(5), Ok(3));
        assert_eq!(c.m.cycles(), 336);
        assert_eq!(c.stats().read_queue_cycles, 168 - 31);
        // Line 6 (bank 6, idle) queues behind nothing.
        c.access(6).unwrap();
        assert_eq!(c.stats().read_queue_cycles, 137);
    }

    #[test]
    fn the_ledger_books_each_cycle_by_hand() {
        let m = Machine::new(MachineConfig::loc(1 << 20)).unwrap();
        let mut c = Core::new(m, ComputeModel::default()).unwrap();
        // A write of line 13 holds bank 5 until 168.
        let w = c.m.port_write(0, 13 * LINE, &[0u8; 64]);
        c.compute(3); // 0 -> 3: computation
        c.instruction(); // 3 -> 4: a protocol instruction
        // Line 5 (bank 5) misses: it reaches the controller at 4 + 1 + 30 = 35, waits
        // for the bank until 168 (133 queued), is back at 336: 199 unloaded cycles.
        assert_eq!(c.access(5), Ok(3));
        assert_eq!(c.m.cycles(), 336);
        c.access(5).unwrap(); // an L1 hit: 2 cycles, 338
        c.h.invalidate_upper(5);
        c.access(5).unwrap(); // an LLC hit: 1 + 1 + 8 + 21 = 31 cycles, 369
        c.persist_wait(w, Wait::Fence); // 168 has passed: nothing
        c.persist_wait(400, Wait::Window); // 31 cycles
        c.persist_wait(410, Wait::Checkpoint); // 10 cycles
        assert_eq!(c.m.cycles(), 410);
        let l = c.ledger();
        assert_eq!(l.compute, 3);
        assert_eq!(l.instructions, 1);
        assert_eq!(l.served, vec![1, 0, 1, 1]);
        assert_eq!(l.level_cycles, vec![2, 0, 31, 199]);
        assert_eq!(l.read_queue, 133);
        assert_eq!(l.wait(Wait::Window), 31);
        assert_eq!(l.wait(Wait::Checkpoint), 10);
        assert_eq!(l.wait(Wait::Fence), 0);
        assert_eq!(l.total(), 410);
        let names: Vec<String> = l.parts().into_iter().map(|(n, _)| n).collect();
        assert_eq!(&names[2..7], ["l1", "l2", "llc", "memory", "read_queue"]);
    }

    #[test]
    fn access_costs_follow_table_one() {
        let m = Machine::new(MachineConfig::loc(1 << 20)).unwrap();
        let mut c = Core::new(m, ComputeModel::default()).unwrap();
        assert_eq!(c.access(5), Ok(3));
        assert_eq!(c.m.cycles(), 1 + 30 + 168, "issue, three levels, memory");
        assert_eq!(c.access(5), Ok(0));
        assert_eq!(c.m.cycles(), 199 + 2);
        // Line 13 shares bank 5 with line 5 but the read of line 5 is long done.
        assert_eq!(c.access(13), Ok(3));
        assert_eq!(c.m.cycles(), 201 + 199);
        c.compute(10);
        assert_eq!(c.m.cycles(), 410);
        assert_eq!(c.llc_cycles(), 29);
        let p: Vec<_> = Core::pieces(60, 70).collect();
        assert_eq!(p, vec![(0, 60, 0, 4), (1, 0, 4, 64), (2, 0, 68, 2)]);
    }
}

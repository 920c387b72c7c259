//! The memory port: how hardware beside the core's caches reaches the machine's memory
//! controller and persistence domain.
//!
//! A hardware transaction protocol (`pmlab-hwtx`) models its own cache hierarchy, whose
//! lines carry transaction tags the machine's tag-only caches do not have; it uses the
//! machine for what the machine is: the clock, the memory controller with its bank
//! queues, the coherent image loads see, and the durable image a crash leaves. Through
//! this port:
//!
//! - [`Machine::port_read`] queues a line read and returns the cycle its data is back;
//! - [`Machine::port_write`] queues the writes of one or more consecutive lines, which
//!   reach memory *together* when the last completes: until then they are pending (a
//!   crash may or may not include them), and they land, in the durable image and in the
//!   recording, as the clock passes their completion (the controller's acknowledgment);
//! - [`Machine::persist_barrier`] waits for exactly the writes it is given (the latest
//!   completion among them), not for every write in flight;
//! - [`Machine::nv_write`] is durable at once: a write into non-volatile storage beside
//!   memory (a non-volatile cache's arrays), kept in the durable image at an address the
//!   caller reserves, so that crash images include it;
//! - [`Machine::coherent_write`] changes only the coherent image (a store into the
//!   protocol's caches).
//!
//! The port and the machine's own caches must not be used for the same lines: the
//! machine's caches do not see the port's writes.

use pmlab_spine::LINE;

use super::Machine;
use crate::persist::{Event, PointKind};

impl Machine {
    /// Charges `n` cycles of the core's own work (no instructions counted) and lands the
    /// port writes completed meanwhile.
    pub fn advance_cycles(&mut self, n: u64) {
        self.stats.cycles += n;
        self.retire_port_writes();
    }

    /// Counts `n` instructions without charging cycles (their cycles are charged with
    /// [`Machine::advance_cycles`] by a core that overlaps them with something else).
    pub fn count_instructions(&mut self, n: u64) {
        self.stats.instructions += n;
    }

    /// Waits until cycle `cycle` (nothing if it has passed) and lands the port writes
    /// completed by then.
    pub fn stall_until(&mut self, cycle: u64) {
        self.stats.cycles = self.stats.cycles.max(cycle);
        self.retire_port_writes();
    }

    /// Waits for the port writes completing at or before `done` (the latest completion
    /// among the writes the barrier orders); an alias of [`Machine::stall_until`] that
    /// says why.
    pub fn persist_barrier(&mut self, done: u64) {
        self.stall_until(done);
    }

    /// Queues a read of the line at `paddr` arriving at the controller at cycle `at`
    /// (not before now); returns the cycle its data is back. The core does not wait.
    pub fn port_read(&mut self, at: u64, paddr: u64) -> u64 {
        self.device.note_read();
        self.ctl.read(at.max(self.stats.cycles), paddr)
    }

    /// Queues a write of `data` (whole lines) at line-aligned `paddr`, arriving at the
    /// controller at cycle `at` (not before now); each line goes to its bank, and all of
    /// them reach memory together when the last completes. Returns that cycle. The core
    /// does not wait (see [`Machine::persist_barrier`]).
    pub fn port_write(&mut self, at: u64, paddr: u64, data: &[u8]) -> u64 {
        self.port_write_lines(at, paddr, data, false)
    }

    /// [`Machine::port_write`] with the lines queued one after another, each when the
    /// one before it completed (a writer with one write in flight); still one write
    /// that lands whole when the last line completes.
    pub fn port_write_serial(&mut self, at: u64, paddr: u64, data: &[u8]) -> u64 {
        self.port_write_lines(at, paddr, data, true)
    }

    fn port_write_lines(&mut self, at: u64, paddr: u64, data: &[u8], serial: bool) -> u64 {
        debug_assert!(paddr.is_multiple_of(LINE) && (data.len() as u64).is_multiple_of(LINE));
        let at = at.max(self.stats.cycles);
        let mut done = at;
        for i in 0..(data.len() as u64).div_ceil(LINE) {
            let arrival = if serial { done } else { at };
            done = done.max(self.ctl.write(arrival, paddr + i * LINE));
        }
        self.device.note_write(paddr, data.len() as u64);
        let id = self.durable.add_pending(paddr, data);
        if self.recording.is_some() {
            self.log(Event::Pending {
                addr: paddr,
                data: data.into(),
            });
        }
        self.inflight.push(std::cmp::Reverse((done, id)));
        self.outstanding_until = self.outstanding_until.max(done);
        self.point(PointKind::Port);
        done
    }

    /// Writes `data` at `addr` into non-volatile storage beside memory (mapped into the
    /// durable image there): durable at once, and in the coherent image too. No memory
    /// timing: the caller charges its own.
    pub fn nv_write(&mut self, addr: u64, data: &[u8]) {
        let a = addr as usize;
        self.current[a..a + data.len()].copy_from_slice(data);
        self.durable.write(addr, data);
        if self.recording.is_some() {
            self.log(Event::Write {
                addr,
                data: data.into(),
            });
        }
        self.point(PointKind::Port);
    }

    /// Stores `data` at `addr` in the coherent image only: what loads see, not yet
    /// anywhere durable.
    pub fn coherent_write(&mut self, addr: u64, data: &[u8]) {
        let a = addr as usize;
        self.current[a..a + data.len()].copy_from_slice(data);
    }

    /// Lands every port write whose completion has passed, in completion order.
    fn retire_port_writes(&mut self) {
        while let Some(&std::cmp::Reverse((done, id))) = self.inflight.peek() {
            if done > self.stats.cycles {
                break;
            }
            self.inflight.pop();
            self.durable.land(id);
            if self.recording.is_some() {
                self.log(Event::Land { id });
                self.point(PointKind::Port);
            }
        }
    }

    /// Port writes queued and not yet landed.
    pub fn port_writes_in_flight(&self) -> usize {
        self.inflight.len()
    }
}

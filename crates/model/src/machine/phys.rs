//! Physical accesses: the machine's memory as its frames, without translation.
//!
//! Hardware engines and OS code that work on frames rather than on a process's virtual
//! pages — a page-consolidation engine, a log controller, a TLB miss handler writing its
//! tables — reach memory this way. The accesses go through the caches and are counted,
//! timed and recorded exactly like translated ones; only the TLB is not consulted.

use pmlab_spine::{Addr, FlushKind, Memory, PersistCounters, SpineError};

use super::Machine;

/// The machine's memory addressed physically ([`Machine::phys`]).
#[derive(Debug)]
pub struct Phys<'a> {
    m: &'a mut Machine,
}

impl Machine {
    /// The memory addressed physically.
    pub fn phys(&mut self) -> Phys<'_> {
        Phys { m: self }
    }
}

impl Phys<'_> {
    /// A non-temporal store at a physical address (see [`Machine::write_nt`]).
    pub fn write_nt(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        self.m.write_nt_in(addr, data, false)
    }

    /// The machine underneath.
    pub fn machine(&mut self) -> &mut Machine {
        self.m
    }
}

impl Memory for Phys<'_> {
    fn size(&self) -> u64 {
        self.m.size()
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        self.m.read_in(addr, buf, false)
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        self.m.write_in(addr, data, false)
    }

    fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError> {
        self.m.flush_in(addr, len, kind, false)
    }

    fn fence(&mut self) {
        self.m.fence();
    }

    fn persist_counters(&self) -> PersistCounters {
        self.m.persist_counters()
    }
}

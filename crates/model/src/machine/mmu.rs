//! The memory-management unit's hooks: a software-managed TLB.
//!
//! Without a handler the machine walks its page tables on a TLB miss, as x86 hardware
//! does. With a [`TlbMissHandler`] installed the machine behaves like a machine with a
//! software-managed TLB (MIPS, SPARC; the OS of OSP's design updates its consistent
//! state table on TLB misses, paper 000 §2.4): on a miss the handler supplies the
//! translation (or declines, and the page tables are walked), every entry that leaves
//! the TLB is reported to it, and a *marked* store ([`Machine::write_marked`]) lets it
//! change the entry's line map before the store is routed. The handler runs on the
//! machine itself and reaches memory through physical accesses ([`Machine::phys`]),
//! whose costs and durable effects are the machine's like any others.

use std::any::Any;

use pmlab_spine::{Addr, Asid, LINE, SpineError, check_bounds};

use super::Machine;
use crate::tlb::{Departed, Translation};

/// A software TLB miss handler (see the module documentation).
///
/// While one of its methods runs the handler is out of the machine: a virtual access
/// that misses the TLB then is a bug in the handler, and the machine panics.
pub trait TlbMissHandler: Send + Any {
    /// The translation of `vpn` in `asid` after a TLB miss, or `None` to walk the page
    /// tables. Room for it has been made: any entry it replaced was reported first.
    fn refill(&mut self, m: &mut Machine, asid: Asid, vpn: u64) -> Option<Translation>;

    /// An entry left the TLB (replaced, invalidated or flushed).
    fn departed(&mut self, m: &mut Machine, gone: Departed);

    /// A marked store is about to write line `line` (0-based, 64-byte lines) of `vpn`,
    /// whose entry holds `t`; the returned translation replaces the entry's and routes
    /// the store. The default changes nothing.
    fn marked_store(
        &mut self,
        m: &mut Machine,
        asid: Asid,
        vpn: u64,
        line: u64,
        t: Translation,
    ) -> Translation {
        let _ = (m, asid, vpn, line);
        t
    }

    /// The handler as `Any`, so its owner can reach its concrete type.
    fn as_any(&self) -> &dyn Any;

    /// The handler as `Any`, mutably.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl Machine {
    /// Installs `handler` as the software TLB miss handler (or removes it with
    /// `None`); returns the previous one. Entries already in the TLB stay.
    pub fn set_miss_handler(
        &mut self,
        handler: Option<Box<dyn TlbMissHandler>>,
    ) -> Option<Box<dyn TlbMissHandler>> {
        assert!(
            !self.handler_running,
            "the miss handler cannot be replaced while it runs"
        );
        std::mem::replace(&mut self.miss_handler, handler)
    }

    /// The installed miss handler, if it is a `T`.
    pub fn miss_handler<T: TlbMissHandler>(&self) -> Option<&T> {
        self.miss_handler.as_ref()?.as_any().downcast_ref()
    }

    /// The installed miss handler, if it is a `T`, mutably.
    pub fn miss_handler_mut<T: TlbMissHandler>(&mut self) -> Option<&mut T> {
        self.miss_handler.as_mut()?.as_any_mut().downcast_mut()
    }

    /// Runs `f` on the installed miss handler (if it is a `T`) and this machine. While
    /// `f` runs the handler is out of the machine, as during its own callbacks: `f`
    /// reaches memory physically.
    pub fn with_miss_handler<T: TlbMissHandler, R>(
        &mut self,
        f: impl FnOnce(&mut T, &mut Machine) -> R,
    ) -> Option<R> {
        self.report_departed();
        let mut h = self.take_handler()?;
        let r = h.as_any_mut().downcast_mut::<T>().map(|t| f(t, self));
        self.put_handler(h);
        r
    }

    fn take_handler(&mut self) -> Option<Box<dyn TlbMissHandler>> {
        let h = self.miss_handler.take()?;
        self.handler_running = true;
        Some(h)
    }

    fn put_handler(&mut self, h: Box<dyn TlbMissHandler>) {
        self.handler_running = false;
        self.miss_handler = Some(h);
    }

    /// Replaces the TLB with one of `config` (or none); the old one's entries are
    /// reported to the miss handler as departed.
    pub fn reconfigure_tlb(
        &mut self,
        config: Option<crate::TlbConfig>,
    ) -> Result<(), crate::ConfigError> {
        if let Some(c) = &config {
            c.validate()?;
        }
        if let Some(t) = &mut self.tlb {
            t.flush();
        }
        self.report_departed();
        self.config.translation.tlb = config.clone();
        self.tlb = config.map(crate::Tlb::new);
        Ok(())
    }

    /// The translation the TLB holds for `vpn` of the current space, without a lookup.
    pub fn tlb_entry(&self, vpn: u64) -> Option<Translation> {
        self.tlb.as_ref()?.peek(self.asid, vpn)
    }

    /// Every entry the TLB holds, as (address space, page, translation).
    pub fn tlb_entries(&self) -> Vec<Departed> {
        self.tlb
            .as_ref()
            .map(|t| t.resident().collect())
            .unwrap_or_default()
    }

    /// The translation of `vpn` in the current space: a TLB lookup, and on a miss the
    /// handler's refill or a page walk (charged), installed in the TLB.
    pub(super) fn translation_of(&mut self, vpn: u64) -> Option<Translation> {
        self.report_departed();
        let asid = self.asid;
        let Some(tlb) = &mut self.tlb else {
            return self.walk(vpn);
        };
        if let Some(t) = tlb.lookup_translation(asid, vpn) {
            return Some(t);
        }
        self.stats.cycles += tlb.config().walk_cycles;
        tlb.make_room(vpn);
        self.report_departed();
        let t = self.walk(vpn)?;
        let tlb = self.tlb.as_mut().expect("the TLB is still there");
        if self.pages.stale_translations() {
            tlb.flush();
        }
        tlb.insert_translation(asid, vpn, t);
        self.report_departed();
        Some(t)
    }

    /// The handler's refill, or the page tables.
    fn walk(&mut self, vpn: u64) -> Option<Translation> {
        assert!(
            !self.handler_running,
            "virtual access to page {vpn:#x} missed the TLB inside the miss handler"
        );
        let asid = self.asid;
        if let Some(mut h) = self.take_handler() {
            let t = h.refill(self, asid, vpn);
            self.put_handler(h);
            if t.is_some() {
                return t;
            }
        }
        self.pages.translate(asid, vpn).map(Translation::frame)
    }

    /// Tells the handler (if any, and not running) about entries that left the TLB.
    pub(super) fn report_departed(&mut self) {
        if let Some(t) = &mut self.tlb {
            t.take_departed(&mut self.departed);
        }
        if self.departed.is_empty() || self.handler_running {
            return;
        }
        let gone = std::mem::take(&mut self.departed);
        match self.take_handler() {
            Some(mut h) => {
                for d in gone {
                    h.departed(self, d);
                }
                self.put_handler(h);
            }
            None => drop(gone),
        }
    }

    /// A marked store (e.g. a transactional store): like [`pmlab_spine::Memory::write`],
    /// but before each line is routed the miss handler may change the page's entry
    /// ([`TlbMissHandler::marked_store`]). Without a handler it is a plain store.
    pub fn write_marked(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.config.memory_size)?;
        self.chaos_tick();
        for (va, off, n) in Self::line_pieces(addr, data.len() as u64) {
            let vpn = va >> self.page_shift;
            let offset = va & ((1 << self.page_shift) - 1);
            let t = self.translation_of(vpn).ok_or_else(|| self.unmapped(va))?;
            let t = match self.take_handler() {
                Some(mut h) => {
                    let asid = self.asid;
                    let t = h.marked_store(self, asid, vpn, offset / LINE, t);
                    self.put_handler(h);
                    if let Some(tlb) = &mut self.tlb {
                        tlb.set_lines(asid, vpn, t.lines);
                    }
                    t
                }
                None => t,
            };
            let pa = (t.frame_of_line(offset / LINE) << self.page_shift) | offset;
            if pa >= self.config.memory_size {
                return Err(self.unmapped(va));
            }
            self.store_line(pa, &data[off..off + n]);
        }
        Ok(())
    }

    /// Changes the line map of `vpn`'s entry in the current space (if resident).
    pub fn set_tlb_lines(&mut self, vpn: u64, lines: Option<crate::LineMap>) -> bool {
        let asid = self.asid;
        self.tlb
            .as_mut()
            .is_some_and(|t| t.set_lines(asid, vpn, lines))
    }
}

//! OSP's machine feature: the software TLB miss handler that extends the TLB entries
//! (two frames, committed and updated bitmaps), routes transactional stores, and runs
//! commit, abort and page consolidation (paper 000 §2).

use pmlab_model::{Departed, Machine, TlbMissHandler, Translation};
use pmlab_spine::{Asid, FlushKind, LINE, Memory};
use pmlab_tx::TxError;

use super::backend::{Backend, Record};
use super::config::{Consolidation, OspConfig, OspFault};
use super::layout::PAGE;
use super::state::{Shadow, State, Where};
use crate::flushes::Source;

/// Where a consolidation runs, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// In the TLB miss that evicted the page (or when a transaction that updated an
    /// evicted page ends): on the critical path.
    Miss,
    /// In the background engine of asynchronous consolidation.
    Background,
    /// During recovery.
    Recovery,
}

/// OSP's hardware and OS state, installed in the machine as its TLB miss handler.
pub(crate) struct Osp {
    pub cfg: OspConfig,
    pub st: State,
    pub backend: Backend,
    /// Set during recovery: consolidations write no journal records.
    pub recovering: bool,
}

/// Iterates the set bits of `bits`, lowest first.
pub(crate) fn bits(mut bits: u64) -> impl Iterator<Item = u64> {
    std::iter::from_fn(move || {
        if bits == 0 {
            return None;
        }
        let i = bits.trailing_zeros() as u64;
        bits &= bits - 1;
        Some(i)
    })
}

/// Copies line `line` of frame `from` to the same line of frame `to`.
pub(crate) fn copy_line(m: &mut Machine, from: u64, to: u64, line: u64) {
    let mut buf = [0u8; LINE as usize];
    let mut p = m.phys();
    p.read(State::line_addr(from, line), &mut buf)
        .expect("OSP's frames lie inside the machine");
    p.write(State::line_addr(to, line), &buf)
        .expect("OSP's frames lie inside the machine");
}

/// Writes back the line at physical address `addr`.
pub(crate) fn clwb(m: &mut Machine, addr: u64) {
    m.phys()
        .flush(addr, LINE, FlushKind::Clwb)
        .expect("OSP's state lies inside the machine");
}

impl Osp {
    fn fault(&self, f: OspFault) -> bool {
        self.cfg.fault == Some(f)
    }

    /// Makes sure the pages `vpns` a transactional store is about to reach can get a
    /// second frame: drains frames out of limbo, consolidates queued pages, and gives
    /// up (the caller aborts) only if the transaction itself holds them all.
    pub fn ensure_frames(&mut self, m: &mut Machine, vpns: &[u64]) -> Result<(), TxError> {
        let need = vpns
            .iter()
            .filter(|v| !self.st.pages.contains_key(v))
            .count();
        loop {
            if self.st.frames.free_count() >= need {
                return Ok(());
            }
            if self.st.frames.limbo_count() > 0 {
                self.backend
                    .drain(m, &mut self.st, Source::Consolidation, self.cfg.fault)?;
                self.st.frames.release_limbo();
                continue;
            }
            if let Some(v) = self.st.queue.pop_front() {
                self.consolidate(m, v, Path::Miss);
                continue;
            }
            return Err(TxError::LogFull {
                kind: "OSP spare-frame",
                needed: need as u64 * PAGE,
                capacity: self.st.frames.free_count() as u64 * PAGE,
            });
        }
    }

    /// Writes back every line the running transaction updated (one data flush each).
    fn write_back_data(&mut self, m: &mut Machine) {
        let mut n = 0;
        for &v in &self.st.tx_pages {
            let s = self.st.pages[&v];
            for i in bits(s.updated) {
                clwb(m, State::line_addr(s.frame(i, true), i));
                n += 1;
            }
        }
        self.st.flushes.add(Source::Data, n);
        m.fence();
    }

    /// Commits the running transaction (paper 000 §2.4): its updated lines are
    /// written back, its pages' new committed bitmaps made durable at once, and then
    /// applied (`committed ^= updated`, `updated = 0`).
    pub fn commit(&mut self, m: &mut Machine) -> Result<(), TxError> {
        if self.st.tx_pages.is_empty() {
            return Ok(());
        }
        let late = self.fault(OspFault::CommitBeforeData);
        if !late {
            self.write_back_data(m);
        }
        let records: Vec<Record> = self
            .st
            .tx_pages
            .iter()
            .map(|v| {
                let s = &self.st.pages[v];
                Record::Commit {
                    vpn: *v,
                    p0: s.p0,
                    p1: s.p1,
                    updated: s.updated,
                    cb_after: s.committed ^ s.updated,
                }
            })
            .collect();
        self.backend
            .commit(m, &mut self.st, &records, self.cfg.fault)?;
        if late {
            self.write_back_data(m);
        }
        self.st.stats.commits += 1;
        self.st.stats.tx_pages += records.len() as u64;
        for v in std::mem::take(&mut self.st.tx_pages) {
            let s = self
                .st
                .pages
                .get_mut(&v)
                .expect("a page of the transaction");
            self.st.stats.tx_lines += u64::from(s.updated.count_ones());
            s.committed ^= s.updated;
            s.updated = 0;
            self.settle(m, v);
        }
        Ok(())
    }

    /// Aborts the running transaction: its updated bitmaps are cleared (§2.3).
    pub fn abort(&mut self, m: &mut Machine) {
        for v in std::mem::take(&mut self.st.tx_pages) {
            self.st
                .pages
                .get_mut(&v)
                .expect("a page of the transaction")
                .updated = 0;
            self.settle(m, v);
        }
    }

    /// After a transaction ended: a resident page's entry routes by its new bitmaps; a
    /// page that left the TLB during the transaction is consolidated (or queued).
    fn settle(&mut self, m: &mut Machine, v: u64) {
        let s = self.st.pages[&v];
        match s.place {
            Where::Resident => {
                m.set_tlb_lines(v, s.translation().lines);
            }
            Where::Evicted => self.left_tlb(m, v),
            Where::Queued => unreachable!("a queued page has no uncommitted lines"),
        }
    }

    /// A page with two frames and no uncommitted lines left the TLB.
    fn left_tlb(&mut self, m: &mut Machine, v: u64) {
        match self.cfg.consolidation {
            Consolidation::OnEviction => self.consolidate(m, v, Path::Miss),
            Consolidation::Async { queue } => {
                self.st.pages.get_mut(&v).expect("a page").place = Where::Queued;
                self.st.queue.push_back(v);
                if self.st.queue.len() > queue {
                    let old = self.st.queue.pop_front().expect("a full queue");
                    self.consolidate(m, old, Path::Miss);
                }
            }
        }
    }

    /// The background engine of asynchronous consolidation, between transactions:
    /// consolidates the oldest waiting pages down to half the queue.
    pub fn background(&mut self, m: &mut Machine) {
        if let Consolidation::Async { queue } = self.cfg.consolidation {
            while self.st.queue.len() > queue / 2 {
                let v = self.st.queue.pop_front().expect("a queued page");
                self.consolidate(m, v, Path::Background);
            }
        }
    }
}

impl TlbMissHandler for Osp {
    fn refill(&mut self, _m: &mut Machine, _asid: Asid, vpn: u64) -> Option<Translation> {
        if !self.st.layout.is_data(vpn) {
            return None;
        }
        self.st.stats.refills += 1;
        if let Some(s) = self.st.pages.get_mut(&vpn) {
            if s.place == Where::Queued {
                self.st.queue.retain(|&q| q != vpn);
                self.st.stats.queue_hits += 1;
            }
            s.place = Where::Resident;
            return Some(s.translation());
        }
        Some(Translation::frame(self.st.pte_of(vpn)))
    }

    fn departed(&mut self, m: &mut Machine, gone: Departed) {
        let Some(s) = self.st.pages.get_mut(&gone.vpn) else {
            return;
        };
        self.st.stats.evictions += 1;
        if s.updated != 0 {
            s.place = Where::Evicted;
            self.st.stats.evicted_in_tx += 1;
            return;
        }
        self.left_tlb(m, gone.vpn);
    }

    /// A transactional store to line `line` of `vpn` (§2.3): the first one in a
    /// transaction copies the line's committed version into the other frame (in the
    /// cache: no flush) and sets its updated bit; the store then goes to that frame.
    fn marked_store(
        &mut self,
        m: &mut Machine,
        _asid: Asid,
        vpn: u64,
        line: u64,
        t: Translation,
    ) -> Translation {
        if !self.st.layout.is_data(vpn) {
            return t;
        }
        let st = &mut self.st;
        if !st.pages.contains_key(&vpn) {
            // The protocol made sure of a free frame before the store.
            let p1 = st.frames.take().expect("a spare frame was ensured");
            let p0 = st.pte_of(vpn);
            st.pages.insert(
                vpn,
                Shadow {
                    p0,
                    p1,
                    committed: 0,
                    updated: 0,
                    place: Where::Resident,
                },
            );
        }
        let s = st.pages.get_mut(&vpn).expect("inserted");
        if s.updated >> line & 1 == 0 {
            if s.updated == 0 {
                st.tx_pages.push(vpn);
            }
            let (from, to) = (s.frame(line, false), s.frame(line, true));
            s.updated |= 1 << line;
            copy_line(m, from, to, line);
        }
        st.pages[&vpn].translation()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

//! The super-page variant (paper 000 §2.4): "We reserve a super page for each address
//! space to store the consistent state table. Super pages are themselves updated with
//! OSP semantics. When a transaction is committed, we persist the new updates, update
//! the consistent state table stored in the super page, and perform a single-page
//! transaction commit for the super page."
//!
//! The table is one 4 KiB page of 128 tuple slots (two per line), with two frames and
//! its own committed bitmap, kept in the superblock's second line (the "persistent
//! super page table"). A commit writes its pages' tuples into the super page's other
//! versions of their lines (the first write to a line copies it, as any OSP store),
//! writes those lines back, fences, and commits the super page by one 8-byte store of
//! its new committed bitmap, written back: `lines + 1` CPU flushes. (The paper does
//! not size the super page; one 4 KiB page keeps its bitmap one 8-byte word, so that
//! its commit is a single atomic store.)
//!
//! A consolidation frees its page's slot at the next super-page commit; the page-map
//! word, if it changed, is written back first, so that no durable table can lose the
//! tuple before the page map says where the page went.

use pmlab_model::Machine;
use pmlab_spine::{LINE, Memory};
use pmlab_tx::TxError;
use rustc_hash::FxHashMap;

use super::backend::{Durable, Record, Tuple};
use super::config::OspFault;
use super::engine::{bits, clwb, copy_line};
use super::layout::{Layout, SUPER_TUPLES, TUPLE};
use super::state::State;
use crate::flushes::Source;

/// Where the super page's committed bitmap is, from the state area's base.
pub(crate) const SCB_AT: u64 = LINE;

/// The super page's volatile state.
pub(crate) struct SuperPage {
    /// Its committed bitmap (line `j`'s committed version is in frame `scb >> j & 1`).
    scb: u64,
    /// Lines written since the last super-page commit.
    su: u64,
    slots: FxHashMap<u64, u64>,
    free_slots: Vec<u64>,
    /// Slots of consolidated pages, cleared at the next super-page commit.
    removals: Vec<u64>,
}

impl SuperPage {
    /// An empty table after a fresh format or a recovery.
    pub fn fresh(scb: u64) -> Self {
        SuperPage {
            scb,
            su: 0,
            slots: FxHashMap::default(),
            free_slots: (0..SUPER_TUPLES).rev().collect(),
            removals: Vec::new(),
        }
    }

    fn frame(&self, layout: &Layout, line: u64, new: bool) -> u64 {
        let bit = (self.scb >> line & 1 == 1) ^ new;
        layout.super_frames[bit as usize]
    }

    /// Writes `words` into slot `slot` of the table's next version.
    fn write_slot(&mut self, m: &mut Machine, layout: &Layout, slot: u64, words: [u64; 4]) {
        let line = slot / 2;
        if self.su >> line & 1 == 0 {
            let (from, to) = (
                self.frame(layout, line, false),
                self.frame(layout, line, true),
            );
            copy_line(m, from, to, line);
            self.su |= 1 << line;
        }
        let mut b = [0u8; TUPLE as usize];
        for (i, w) in words.iter().enumerate() {
            b[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
        let at = State::line_addr(self.frame(layout, line, true), line) + (slot % 2) * TUPLE;
        m.phys()
            .write(at, &b)
            .expect("the super page lies inside the machine");
    }

    /// Commits the super page: its written lines, then its bitmap; `source` counts.
    fn commit_page(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        source: Source,
    ) -> Result<(), TxError> {
        for line in bits(self.su) {
            clwb(
                m,
                State::line_addr(self.frame(&st.layout, line, true), line),
            );
        }
        st.flushes.add(source, u64::from(self.su.count_ones()));
        m.fence();
        self.scb ^= self.su;
        self.su = 0;
        let at = st.layout.meta.base + SCB_AT;
        m.phys().write_u64(at, self.scb)?;
        clwb(m, at);
        m.fence();
        st.flushes.add(source, 1);
        self.free_slots.append(&mut self.removals);
        st.frames.release_limbo();
        Ok(())
    }

    fn write_removals(&mut self, m: &mut Machine, layout: &Layout) {
        for slot in self.removals.clone() {
            self.write_slot(m, layout, slot, [0; 4]);
        }
    }

    /// A transaction's tuples and the waiting removals, in one super-page commit.
    pub fn commit(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        records: &[Record],
        _fault: Option<OspFault>,
    ) -> Result<(), TxError> {
        let layout = st.layout;
        self.write_removals(m, &layout);
        for r in records {
            let Record::Commit {
                vpn,
                p0,
                p1,
                cb_after,
                ..
            } = *r
            else {
                continue;
            };
            let slot = match self.slots.get(&vpn) {
                Some(&s) => s,
                None => {
                    let s = self.free_slots.pop().ok_or(TxError::LogFull {
                        kind: "OSP super page",
                        needed: (SUPER_TUPLES + 1) * TUPLE,
                        capacity: SUPER_TUPLES * TUPLE,
                    })?;
                    self.slots.insert(vpn, s);
                    s
                }
            };
            self.write_slot(m, &layout, slot, [vpn + 1, p0, p1, cb_after]);
        }
        self.commit_page(m, st, Source::Journal)
    }

    /// Commits the waiting removals alone.
    pub fn drain(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        source: Source,
        _fault: Option<OspFault>,
    ) -> Result<(), TxError> {
        if self.removals.is_empty() {
            return Ok(());
        }
        let layout = st.layout;
        self.write_removals(m, &layout);
        self.commit_page(m, st, source)
    }

    /// Page `vpn` was consolidated: a changed page-map word is made durable now, and
    /// the slot is cleared at the next commit. Whether the old frame waits in limbo.
    pub fn consolidated(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        vpn: u64,
        named: bool,
        moved: bool,
        stale: bool,
    ) -> bool {
        if stale {
            // The broken variant: the table keeps the tuple; the slot is forgotten.
            if let Some(s) = self.slots.remove(&vpn) {
                self.free_slots.push(s);
            }
            return false;
        }
        if moved {
            st.flush_pte_lines(m, Source::Consolidation);
            m.fence();
        }
        if let Some(s) = self.slots.remove(&vpn) {
            self.removals.push(s);
        }
        named
    }

    /// After recovery consolidated every page: every line of the table empty, in one
    /// super-page commit.
    pub fn reset(&mut self, m: &mut Machine, st: &mut State) -> Result<(), TxError> {
        let layout = st.layout;
        let mut b = [0u8; LINE as usize];
        for line in 0..SUPER_TUPLES / 2 {
            let at = State::line_addr(self.frame(&layout, line, false), line);
            m.phys().read(at, &mut b)?;
            if b.iter().any(|&x| x != 0) {
                self.write_slot(m, &layout, 2 * line, [0; 4]);
                self.write_slot(m, &layout, 2 * line + 1, [0; 4]);
            }
        }
        *self = SuperPage {
            su: self.su,
            ..SuperPage::fresh(self.scb)
        };
        self.commit_page(m, st, Source::Journal)
    }

    /// Reads the super page's committed version of the table and the page map.
    pub fn load(m: &mut Machine, layout: &Layout) -> Result<(SuperPage, Durable), TxError> {
        let scb = m.phys().read_u64(layout.meta.base + SCB_AT)?;
        let sp = SuperPage::fresh(scb);
        let pte = super::recover::read_page_map(m, layout)?;
        let mut tuples = FxHashMap::default();
        let mut b = [0u8; LINE as usize];
        for line in 0..SUPER_TUPLES / 2 {
            let at = State::line_addr(sp.frame(layout, line, false), line);
            m.phys().read(at, &mut b)?;
            for half in 0..2 {
                let w = |i: usize| {
                    let o = half * 32 + 8 * i;
                    u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
                };
                if w(0) == 0 {
                    continue;
                }
                let (v, p0, p1) = (w(0) - 1, w(1), w(2));
                if !layout.is_data(v) || !layout.is_frame(p0) || !layout.is_frame(p1) {
                    return Err(TxError::Corrupt {
                        structure: "OSP super page",
                        addr: at,
                        offset: half as u64 * TUPLE,
                        field: "tuple",
                        problem: format!(
                            "<V {v:#x}, P0 {p0:#x}, P1 {p1:#x}> is not a data page's tuple"
                        ),
                    });
                }
                tuples.insert(v, Tuple { p0, p1, cb: w(3) });
            }
        }
        let replayed = tuples.len() as u64;
        Ok((
            sp,
            Durable {
                tuples,
                pte,
                replayed,
            },
        ))
    }
}

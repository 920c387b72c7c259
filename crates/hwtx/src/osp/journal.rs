//! The lightweight journal (paper 000 §2.4): "we only need to record the updated
//! bitmap as well as a small amount of other information (e.g., virtual page number
//! which can be used to uniquely identify a tuple in the consistent state table)".
//!
//! Each commit appends one *group*: a 64-byte record per updated page — its VPN, its
//! updated bitmap, and (the small amount of other information) its two frames and the
//! committed bitmap the commit produces, so that replaying a record sets the tuple
//! rather than toggling it and replay is idempotent — written with non-temporal stores
//! and drained once: one write-combining buffer flush, one CPU flush, per commit
//! whatever the number of pages. The group also carries the consolidations done since
//! the previous one ("the page now lives in frame T alone"), whose old frames stay in
//! limbo until then. Every line of a group holds the group number, the group's size
//! and the line's index in it, so recovery tells a whole group from a torn one.
//!
//! The table itself (the tuples of every page with a committed line in its second
//! frame) is written to NVM only at a *checkpoint*, when the journal is full: the
//! table goes into the inactive one of two regions, the page-map lines changed since
//! the last checkpoint are written back, and one 8-byte store switches the checkpoint
//! word to the new region and the last group it covers; the journal starts over.
//! Recovery starts from the checkpoint and replays the whole groups after it, in order.
//! (The paper leaves the journal's life open; this keeps the per-commit cost at one
//! CPU flush, which is what makes it lightweight.)

use pmlab_model::Machine;
use pmlab_spine::{LINE, Memory};
use pmlab_tx::TxError;
use rustc_hash::FxHashMap;

use super::backend::{Durable, Record, Tuple};
use super::engine::clwb;
use super::layout::{CKPT_AT, Layout, TUPLE};
use super::state::State;
use crate::flushes::Source;

const COMMIT: u64 = 1;
const CONSOLIDATE: u64 = 2;

/// The journal's volatile state.
pub(crate) struct Journal {
    /// The next free record.
    pos: u64,
    /// The last group made durable.
    group: u64,
    /// The active checkpoint region.
    region: usize,
    /// Consolidations waiting for the next group.
    pending: Vec<Record>,
}

fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"))
}

fn put(b: &mut [u8], i: usize, v: u64) {
    b[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
}

fn encode(b: &mut [u8], group: u64, count: u64, idx: u64, r: &Record) {
    put(b, 0, group);
    put(b, 1, count | idx << 32);
    let w = match *r {
        Record::Commit {
            vpn,
            p0,
            p1,
            updated,
            cb_after,
        } => [COMMIT, vpn, p0, p1, updated, cb_after],
        Record::Consolidate { vpn, target } => [CONSOLIDATE, vpn, target, 0, 0, 0],
    };
    for (i, v) in w.iter().enumerate() {
        put(b, 2 + i, *v);
    }
}

fn corrupt(at: u64, offset: u64, field: &'static str, problem: String) -> TxError {
    TxError::Corrupt {
        structure: "OSP journal",
        addr: at,
        offset,
        field,
        problem,
    }
}

impl Journal {
    /// An empty journal after a fresh format.
    pub fn fresh() -> Self {
        Journal {
            pos: 0,
            group: 0,
            region: 0,
            pending: Vec::new(),
        }
    }

    /// A consolidation for the next group.
    pub fn push(&mut self, r: Record) {
        self.pending.push(r);
    }

    /// Appends a commit's group.
    pub fn commit(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        records: &[Record],
    ) -> Result<(), TxError> {
        self.write_group(m, st, records, Source::Journal)
    }

    /// Appends the waiting consolidations as a group of their own.
    pub fn drain(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        source: Source,
    ) -> Result<(), TxError> {
        if !self.pending.is_empty() {
            self.write_group(m, st, &[], source)?;
        }
        Ok(())
    }

    fn write_group(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        records: &[Record],
        source: Source,
    ) -> Result<(), TxError> {
        let lines = st.layout.journal_lines;
        if self.pos + (self.pending.len() + records.len()) as u64 > lines {
            self.checkpoint(m, st, source)?;
        }
        let n = (self.pending.len() + records.len()) as u64;
        if n > lines {
            return Err(TxError::LogFull {
                kind: "OSP journal",
                needed: n * LINE,
                capacity: lines * LINE,
            });
        }
        let g = self.group + 1;
        let mut buf = vec![0u8; (n * LINE) as usize];
        for (k, r) in self.pending.iter().chain(records).enumerate() {
            let b = &mut buf[k * LINE as usize..(k + 1) * LINE as usize];
            encode(b, g, n, k as u64, r);
        }
        let at = st.layout.journal + self.pos * LINE;
        m.phys().write_nt(at, &buf)?;
        m.fence();
        st.flushes.add(source, 1);
        st.flushes.wc_lines += n;
        self.pos += n;
        self.group = g;
        self.pending.clear();
        st.frames.release_limbo();
        Ok(())
    }

    /// Writes the table and the changed page-map lines durably and switches the
    /// checkpoint word: the journal starts over.
    fn checkpoint(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        source: Source,
    ) -> Result<(), TxError> {
        let mut tuples: Vec<(u64, Tuple)> = st
            .pages
            .iter()
            .filter(|(_, s)| s.committed != 0)
            .map(|(&v, s)| {
                let t = Tuple {
                    p0: s.p0,
                    p1: s.p1,
                    cb: s.committed,
                };
                (v, t)
            })
            .collect();
        tuples.sort_unstable_by_key(|&(v, _)| v);
        let region = 1 - self.region;
        let lines = write_region(m, &st.layout, region, self.group, &tuples)?;
        st.flushes.add(source, lines);
        st.flush_pte_lines(m, source);
        m.fence();
        self.switch(m, st, region, source)?;
        self.pending.clear();
        st.frames.release_limbo();
        st.stats.checkpoints += 1;
        Ok(())
    }

    /// Points the checkpoint word at `region` (covering groups up to `self.group`),
    /// durably; the journal starts over.
    fn switch(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        region: usize,
        source: Source,
    ) -> Result<(), TxError> {
        let at = st.layout.meta.base + CKPT_AT;
        m.phys().write_u64(at, self.group << 1 | region as u64)?;
        clwb(m, at);
        m.fence();
        st.flushes.add(source, 1);
        self.region = region;
        self.pos = 0;
        Ok(())
    }

    /// After recovery consolidated every page: an empty checkpoint, durably.
    pub fn reset(&mut self, m: &mut Machine, st: &mut State) -> Result<(), TxError> {
        let region = 1 - self.region;
        let lines = write_region(m, &st.layout, region, self.group, &[])?;
        st.flushes.add(Source::Journal, lines);
        m.fence();
        self.switch(m, st, region, Source::Journal)
    }

    /// Reads the checkpoint, the page map and the journal's whole groups after it:
    /// the journal positioned after the last group any line of it names (so that no
    /// group number is used twice) and what is durable.
    pub fn load(m: &mut Machine, layout: &Layout) -> Result<(Journal, Durable), TxError> {
        let ckpt = m.phys().read_u64(layout.meta.base + CKPT_AT)?;
        let (group, region) = (ckpt >> 1, (ckpt & 1) as usize);
        let tuples = read_region(m, layout, region)?;
        let pte = super::recover::read_page_map(m, layout)?;
        let mut d = Durable {
            tuples,
            pte,
            replayed: 0,
        };
        let mut j = Journal {
            pos: 0,
            group,
            region,
            pending: Vec::new(),
        };
        j.replay(m, layout, &mut d)?;
        // A torn group's lines may carry numbers past the last whole group.
        let mut b = [0u8; LINE as usize];
        for k in 0..layout.journal_lines {
            m.phys().read(layout.journal + k * LINE, &mut b)?;
            j.group = j.group.max(word(&b, 0));
        }
        Ok((j, d))
    }

    /// Applies the whole groups from the journal's start, in order.
    fn replay(&mut self, m: &mut Machine, layout: &Layout, d: &mut Durable) -> Result<(), TxError> {
        let mut pos = 0;
        let mut buf = Vec::new();
        loop {
            let g = self.group + 1;
            let Some(n) = whole_group(m, layout, pos, g, &mut buf)? else {
                return Ok(());
            };
            for k in 0..n {
                let b = &buf[(k * LINE) as usize..((k + 1) * LINE) as usize];
                apply(layout, d, b, layout.journal + (pos + k) * LINE)?;
            }
            d.replayed += n;
            pos += n;
            self.group = g;
        }
    }
}

/// The group `g` at record `pos` if it is whole (every line names `g`, its size and
/// its index): its size, its lines in `buf`.
fn whole_group(
    m: &mut Machine,
    layout: &Layout,
    pos: u64,
    g: u64,
    buf: &mut Vec<u8>,
) -> Result<Option<u64>, TxError> {
    let mut first = [0u8; LINE as usize];
    if pos >= layout.journal_lines {
        return Ok(None);
    }
    m.phys().read(layout.journal + pos * LINE, &mut first)?;
    let n = word(&first, 1) & 0xffff_ffff;
    if word(&first, 0) != g || n == 0 || pos + n > layout.journal_lines {
        return Ok(None);
    }
    buf.resize((n * LINE) as usize, 0);
    m.phys().read(layout.journal + pos * LINE, buf)?;
    let whole = (0..n).all(|k| {
        let b = &buf[(k * LINE) as usize..];
        word(b, 0) == g && word(b, 1) == n | k << 32
    });
    Ok(whole.then_some(n))
}

/// Applies one record of a whole group.
fn apply(layout: &Layout, d: &mut Durable, b: &[u8], at: u64) -> Result<(), TxError> {
    let (kind, vpn) = (word(b, 2), word(b, 3));
    if !layout.is_data(vpn) {
        return Err(corrupt(
            at,
            24,
            "vpn",
            format!("{vpn:#x} is not a data page"),
        ));
    }
    let frame = |i: usize, name: &'static str| {
        let f = word(b, i);
        if layout.is_frame(f) {
            Ok(f)
        } else {
            Err(corrupt(
                at,
                8 * i as u64,
                name,
                format!("{f:#x} is not a data frame"),
            ))
        }
    };
    let i = (vpn - layout.first_vpn) as usize;
    match kind {
        COMMIT => {
            let t = Tuple {
                p0: frame(4, "p0")?,
                p1: frame(5, "p1")?,
                cb: word(b, 7),
            };
            d.tuples.insert(vpn, t);
        }
        CONSOLIDATE => {
            d.pte[i] = frame(4, "target")?;
            d.tuples.remove(&vpn);
        }
        other => {
            return Err(corrupt(
                at,
                16,
                "kind",
                format!("{other} is not a record kind"),
            ));
        }
    }
    Ok(())
}

/// Writes `tuples` into checkpoint region `region` and writes its lines back (no
/// fence); the lines written back.
fn write_region(
    m: &mut Machine,
    layout: &Layout,
    region: usize,
    group: u64,
    tuples: &[(u64, Tuple)],
) -> Result<u64, TxError> {
    let base = layout.regions[region];
    let mut b = vec![0u8; (LINE + (tuples.len() as u64 * TUPLE).div_ceil(LINE) * LINE) as usize];
    put(&mut b, 0, tuples.len() as u64);
    put(&mut b, 1, group);
    for (k, (v, t)) in tuples.iter().enumerate() {
        let w = 8 + 4 * k;
        put(&mut b, w, v + 1);
        put(&mut b, w + 1, t.p0);
        put(&mut b, w + 2, t.p1);
        put(&mut b, w + 3, t.cb);
    }
    m.phys().write(base, &b)?;
    let lines = b.len() as u64 / LINE;
    for l in 0..lines {
        clwb(m, base + l * LINE);
    }
    Ok(lines)
}

/// The tuples of checkpoint region `region`.
fn read_region(
    m: &mut Machine,
    layout: &Layout,
    region: usize,
) -> Result<FxHashMap<u64, Tuple>, TxError> {
    let base = layout.regions[region];
    let count = m.phys().read_u64(base)?;
    if count > layout.spare {
        return Err(TxError::Corrupt {
            structure: "OSP checkpoint",
            addr: base,
            offset: 0,
            field: "count",
            problem: format!(
                "{count} tuples, more than the {} spare frames allow",
                layout.spare
            ),
        });
    }
    let mut b = vec![0u8; (count * TUPLE) as usize];
    m.phys().read(base + LINE, &mut b)?;
    let mut out = FxHashMap::default();
    for k in 0..count as usize {
        let t = &b[k * TUPLE as usize..];
        let (v1, p0, p1) = (word(t, 0), word(t, 1), word(t, 2));
        let at = LINE + k as u64 * TUPLE;
        let ok = v1 >= 1 && layout.is_data(v1 - 1) && layout.is_frame(p0) && layout.is_frame(p1);
        if !ok {
            return Err(TxError::Corrupt {
                structure: "OSP checkpoint",
                addr: base,
                offset: at,
                field: "tuple",
                problem: format!(
                    "<V+1 {v1:#x}, P0 {p0:#x}, P1 {p1:#x}> is not a data page's tuple"
                ),
            });
        }
        out.insert(
            v1 - 1,
            Tuple {
                p0,
                p1,
                cb: word(t, 3),
            },
        );
    }
    Ok(out)
}

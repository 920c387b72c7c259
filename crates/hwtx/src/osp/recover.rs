//! OSP recovery (paper 000 §2.4: "These durable consistent states allow applications
//! to recover after an unclean shutdown"): the durable tuples — the checkpoint and the
//! journal's whole groups after it, or the super page's committed version — say for
//! every page with two frames which frame holds each committed line. Recovery
//! consolidates every such page exactly as eviction would (the frames it names are
//! never reused before the table stops naming them, so their committed lines are
//! intact), writes the page map back, and then empties the table with one durable
//! switch. Until that switch the durable inputs are unchanged and every step writes
//! the same bytes again, so a crash during recovery is recovered by recovering again.

use pmlab_model::Machine;
use pmlab_spine::Memory;
use pmlab_tx::{Recovery, TxError};

use super::backend::{Backend, Durable};
use super::config::{Atomicity, OspConfig};
use super::engine::{Osp, Path};
use super::journal::Journal;
use super::layout::Layout;
use super::state::{Shadow, State, Where};
use super::superpage::SuperPage;
use crate::flushes::Source;

/// The page map as it is in memory; a frame outside the data frames is corruption.
pub(crate) fn read_page_map(m: &mut Machine, layout: &Layout) -> Result<Vec<u64>, TxError> {
    let mut b = vec![0u8; (layout.pages * 8) as usize];
    m.phys().read(layout.page_map, &mut b)?;
    let pte: Vec<u64> = b
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
        .collect();
    if let Some((i, f)) = pte.iter().enumerate().find(|(_, f)| !layout.is_frame(**f)) {
        return Err(TxError::Corrupt {
            structure: "OSP page map",
            addr: layout.page_map,
            offset: 8 * i as u64,
            field: "frame",
            problem: format!(
                "page {:#x} maps to {f:#x}, not a data frame",
                layout.first_vpn + i as u64
            ),
        });
    }
    Ok(pte)
}

/// Checks that the durable tuples and page map name each frame once and that a
/// page's tuple includes the frame the page map gives it.
fn check_frames(layout: &Layout, d: &Durable) -> Result<(), TxError> {
    let mut seen = rustc_hash::FxHashSet::default();
    let mut claim = |f: u64, what: String| {
        if seen.insert(f) {
            Ok(())
        } else {
            Err(TxError::Corrupt {
                structure: "OSP consistent state",
                addr: layout.meta.base,
                offset: 0,
                field: "frame",
                problem: format!("frame {f:#x} is named twice ({what})"),
            })
        }
    };
    for (i, &f) in d.pte.iter().enumerate() {
        let v = layout.first_vpn + i as u64;
        match d.tuples.get(&v) {
            Some(t) if f != t.p0 && f != t.p1 => {
                return Err(TxError::Corrupt {
                    structure: "OSP consistent state",
                    addr: layout.pte_addr(v),
                    offset: 0,
                    field: "frame",
                    problem: format!("page {v:#x} maps to {f:#x}, neither of its tuple's frames"),
                });
            }
            Some(t) => {
                claim(t.p0, format!("P0 of page {v:#x}"))?;
                claim(t.p1, format!("P1 of page {v:#x}"))?;
            }
            None => claim(f, format!("the page map's frame of page {v:#x}"))?,
        }
    }
    Ok(())
}

/// Recovers OSP's state on `m` (no miss handler installed): the handler to install.
pub(crate) fn recover(
    m: &mut Machine,
    cfg: &OspConfig,
    layout: Layout,
) -> Result<(Osp, Recovery), TxError> {
    layout.check(m)?;
    let (backend, d) = match cfg.atomicity {
        Atomicity::Journal => {
            let (j, d) = Journal::load(m, &layout)?;
            (Backend::Journal(j), d)
        }
        Atomicity::SuperPage => {
            let (s, d) = SuperPage::load(m, &layout)?;
            (Backend::SuperPage(s), d)
        }
    };
    // A tuple whose committed bitmap is zero names no line in its second frame, which
    // may already serve another page: it says no more than the page map.
    let mut d = d;
    d.tuples.retain(|_, t| t.cb != 0);
    check_frames(&layout, &d)?;
    let named: Vec<u64> = d.tuples.values().flat_map(|t| [t.p0, t.p1]).collect();
    let mut st = State::with_used(layout, d.pte, &named);
    let mut pages: Vec<_> = d.tuples.into_iter().collect();
    pages.sort_unstable_by_key(|&(v, _)| v);
    for &(v, t) in &pages {
        st.pages.insert(
            v,
            Shadow {
                p0: t.p0,
                p1: t.p1,
                committed: t.cb,
                updated: 0,
                place: Where::Queued,
            },
        );
    }
    let mut osp = Osp {
        cfg: cfg.clone(),
        st,
        backend,
        recovering: true,
    };
    for &(v, _) in &pages {
        osp.consolidate(m, v, Path::Recovery);
    }
    osp.st.flush_pte_lines(m, Source::Consolidation);
    m.fence();
    osp.backend.reset(m, &mut osp.st)?;
    osp.recovering = false;
    let rec = Recovery {
        repaired: !pages.is_empty(),
        entries: d.replayed,
        note: format!(
            "{} records read, {} pages consolidated",
            d.replayed,
            pages.len()
        ),
    };
    Ok((osp, rec))
}

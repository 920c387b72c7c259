//! `index` and `view REGION`: a linear index over the coordinate order (BAI's 16 kbp
//! windows, each pointing at the first record that overlaps it or any later window),
//! and region queries with htslib's overlap rule (`pos < end && endpos > beg`).

use crate::access::Entry;
use crate::arena::{Addressing, Arena};
use crate::crash::{Broken, broken};
use crate::error::SamError;
use crate::layout::{IndexHead, Ref, RefIndex, WINDOW_SHIFT};
use crate::publish::Slot;

/// One reference's part of the index: its range in the coordinate order and the
/// first record overlapping each window or a later one.
type PerRef = (u64, u64, Vec<u64>);

/// Builds the index over the coordinate order `sort` left and publishes it.
pub fn index<A: Addressing>(arena: &mut Arena<A>) -> Result<(), SamError> {
    let per_ref = build(arena)?;
    let n_refs = per_ref.len();
    let by_coord = arena.root().by_coord;
    let mut entries = Vec::with_capacity(n_refs);
    for (first, end, windows) in per_ref {
        let w = arena.put_slice(&windows)?;
        entries.push(RefIndex {
            first,
            end,
            n_windows: windows.len() as u64,
            windows: w,
        });
    }
    let refs = arena.put_slice(&entries)?;
    let head = IndexHead {
        by_coord,
        n_refs: n_refs as u64,
        refs,
    };
    arena.put_published(Slot::Index, std::slice::from_ref(&head))?;
    Ok(())
}

/// The index of the coordinate order, per reference.
pub fn build<A: Addressing>(arena: &Arena<A>) -> Result<Vec<PerRef>, SamError> {
    let Some(order) = arena.order(false)? else {
        return Err(SamError::Needs(
            "index needs the coordinate order: run `pmlab sam sort` first".into(),
        ));
    };
    let n_refs = arena.root().n_refs as usize;
    let mut per_ref: Vec<PerRef> = vec![(0, 0, Vec::new()); n_refs];
    let rec = |i: usize| {
        let entry = Entry {
            table: "by_coord",
            i,
        };
        arena.rec(entry, order[i])
    };
    let late = u64::from(broken(Broken::IndexLate));
    let mut i = 0;
    while i < order.len() {
        let tid = rec(i)?.tid;
        if tid < 0 {
            break; // unmapped records without a reference sort last
        }
        let first = i;
        let mut windows: Vec<u64> = Vec::new();
        while i < order.len() {
            let c = rec(i)?;
            if c.tid != tid {
                break;
            }
            let lo = (c.pos.max(0) as u64) >> WINDOW_SHIFT;
            let hi = ((c.end.max(1) - 1) as u64) >> WINDOW_SHIFT;
            if windows.len() <= hi as usize {
                windows.resize(hi as usize + 1, u64::MAX);
            }
            for w in &mut windows[lo as usize..=hi as usize] {
                *w = (*w).min(i as u64 + late);
            }
            i += 1;
        }
        // An empty window: any record overlapping it starts after it, so scanning
        // can start where the next non-empty window starts.
        let mut next = i as u64;
        for w in windows.iter_mut().rev() {
            if *w == u64::MAX {
                *w = next;
            } else {
                *w = (*w).min(i as u64);
                next = *w;
            }
        }
        let slot = per_ref.get_mut(tid as usize).ok_or_else(|| {
            arena.corrupt(
                format!("by_coord entry {i}"),
                "RNAME",
                "no such reference".into(),
            )
        })?;
        if !slot.2.is_empty() || slot.1 != 0 {
            return Err(arena.corrupt(
                format!("by_coord entry {first}"),
                "RNAME",
                format!("reference {tid} appears twice: the order is not sorted"),
            ));
        }
        *slot = (first as u64, i as u64, windows);
    }
    Ok(per_ref)
}

/// A parsed region: reference index and 0-based half-open `[beg, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Reference index.
    pub tid: usize,
    /// First base (0-based).
    pub beg: i64,
    /// One past the last.
    pub end: i64,
}

/// Parses `NAME`, `NAME:BEG` or `NAME:BEG-END` (1-based, inclusive, `,` allowed in
/// numbers) as `samtools view` does; a whole name that is a reference wins over a
/// `:` split.
pub fn parse_region(s: &str, names: &[&[u8]]) -> Result<Region, SamError> {
    let bad = |p: &str| SamError::Region {
        region: s.to_string(),
        problem: p.to_string(),
    };
    let find = |n: &str| names.iter().position(|&x| x == n.as_bytes());
    if let Some(tid) = find(s) {
        return Ok(Region {
            tid,
            beg: 0,
            end: i64::MAX,
        });
    }
    let (name, range) = s.rsplit_once(':').ok_or_else(|| bad("no such reference"))?;
    let tid = find(name).ok_or_else(|| bad("no such reference"))?;
    let num = |t: &str| -> Result<i64, SamError> {
        let t: String = t.chars().filter(|&c| c != ',').collect();
        t.parse::<i64>()
            .map_err(|_| bad(&format!("{t:?} is not a position")))
    };
    let (beg, end) = match range.split_once('-') {
        None => (num(range)?, i64::MAX),
        Some((b, "")) => (num(b)?, i64::MAX),
        Some((b, e)) => (num(b)?, num(e)?),
    };
    // samtools treats a start of 0 as 1.
    let beg = (beg - 1).max(0);
    if end <= beg {
        return Err(bad("ends before it begins"));
    }
    Ok(Region { tid, beg, end })
}

/// The records overlapping `region`, in coordinate order, through the index.
pub fn select<A: Addressing>(arena: &Arena<A>, region: Region) -> Result<Vec<Ref>, SamError> {
    let Some(head) = arena.index_head()? else {
        return Err(SamError::Needs(
            "view needs the index: run `pmlab sam index` first".into(),
        ));
    };
    if head.by_coord != arena.root().by_coord {
        return Err(SamError::Needs(
            "the index is older than the coordinate order: run `pmlab sam index` again".into(),
        ));
    }
    let order = arena.order(false)?.unwrap_or(&[]);
    let (ri, windows) = arena.ref_index(&head, region.tid)?;
    let w = (region.beg >> WINDOW_SHIFT) as usize;
    // The broken variant stops a base early.
    let stop = region.end - i64::from(broken(Broken::ViewEndEarly));
    let mut out = Vec::new();
    if w < windows.len() {
        let from = windows[w] as usize;
        for (i, &r) in order[from..ri.end as usize].iter().enumerate() {
            let c = arena.rec(
                Entry {
                    table: "by_coord",
                    i: from + i,
                },
                r,
            )?;
            if c.pos >= stop {
                break;
            }
            if c.end > region.beg {
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// [`select`], leaving the selection in the arena for the next process.
pub fn view<A: Addressing>(arena: &mut Arena<A>, region: Region) -> Result<Vec<Ref>, SamError> {
    let out = select(arena, region)?;
    let mut block = Vec::with_capacity(out.len() + 1);
    block.push(out.len() as u64);
    block.extend_from_slice(&out);
    arena.put_published(Slot::LastView, &block)?;
    Ok(out)
}

//! `index` and `view REGION`: a linear index over the coordinate order (BAI's 16 kbp
//! windows, each pointing at the first record that overlaps it or any later window),
//! and region queries with htslib's overlap rule (`pos < end && endpos > beg`).

use crate::arena::{Addressing, Arena};
use crate::error::SamError;
use crate::layout::{IndexHead, Ref, RefIndex, WINDOW_SHIFT};

/// Builds the index over the coordinate order `sort` left and publishes it.
pub fn index<A: Addressing>(arena: &mut Arena<A>) -> Result<(), SamError> {
    let Some(order) = arena.order(false) else {
        return Err(SamError::Needs(
            "index needs the coordinate order: run `pmlab sam sort` first".into(),
        ));
    };
    let n_refs = arena.root().n_refs as usize;
    let mut per_ref: Vec<(u64, u64, Vec<u64>)> = vec![(0, 0, Vec::new()); n_refs];
    let mut i = 0;
    while i < order.len() {
        let tid = arena.rec(order[i]).tid;
        if tid < 0 {
            break; // unmapped records without a reference sort last
        }
        let first = i;
        let mut windows: Vec<u64> = Vec::new();
        while i < order.len() && arena.rec(order[i]).tid == tid {
            let c = arena.rec(order[i]);
            let lo = (c.pos.max(0) as u64) >> WINDOW_SHIFT;
            let hi = ((c.end.max(1) - 1) as u64) >> WINDOW_SHIFT;
            if windows.len() <= hi as usize {
                windows.resize(hi as usize + 1, u64::MAX);
            }
            for w in &mut windows[lo as usize..=hi as usize] {
                *w = (*w).min(i as u64);
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
                next = *w;
            }
        }
        per_ref[tid as usize] = (first as u64, i as u64, windows);
    }
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
    let head = arena.put(IndexHead {
        by_coord,
        n_refs: n_refs as u64,
        refs,
    })?;
    arena.root_mut().index = head;
    Ok(())
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

/// The records overlapping `region`, in coordinate order, through the index; the
/// selection is left in the arena for the next process.
pub fn view<A: Addressing>(arena: &mut Arena<A>, region: Region) -> Result<Vec<Ref>, SamError> {
    let root = *arena.root();
    if root.index == 0 {
        return Err(SamError::Needs(
            "view needs the index: run `pmlab sam index` first".into(),
        ));
    }
    // SAFETY: a published index head names its tables.
    let head = unsafe { *arena.get::<IndexHead>(root.index) };
    if head.by_coord != root.by_coord {
        return Err(SamError::Needs(
            "the index is older than the coordinate order: run `pmlab sam index` again".into(),
        ));
    }
    let order = arena.order(false).expect("indexed, so sorted");
    // SAFETY: the index names `n_refs` entries and each its windows.
    let ri = unsafe { arena.slice::<RefIndex>(head.refs, head.n_refs) }[region.tid];
    let windows = unsafe { arena.slice::<u64>(ri.windows, ri.n_windows) };
    let w = (region.beg >> WINDOW_SHIFT) as usize;
    let mut out = Vec::new();
    if w < windows.len() {
        for &r in &order[windows[w] as usize..ri.end as usize] {
            let c = arena.rec(r);
            if c.pos >= region.end {
                break;
            }
            if c.end > region.beg {
                out.push(r);
            }
        }
    }
    let at = arena.put_slice(&out)?;
    let root = arena.root_mut();
    root.last_view = at;
    root.last_view_len = out.len() as u64;
    Ok(out)
}

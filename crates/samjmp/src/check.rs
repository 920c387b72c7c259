//! The checker: everything a structure holds, checked against what it must be. The
//! kill tests run it after every kill; `pmlab sam check` runs it on demand.
//!
//! Every record is reached and checked ([`Arena::rec`]); each published result is
//! recomputed from the records and compared: an order must be exactly the order
//! `sort` gives (a permutation, sorted, ties in input order), the index exactly what
//! `index` builds over the order it names, the flagstat counters exactly a fresh
//! count, and the last view's selection records of the coordinate order in that
//! order. A torn result (named before it was complete) fails one of these.

use crate::access::Entry;
use crate::arena::{Addressing, Arena};
use crate::error::SamError;
use crate::layout::FlagstatCounts;
use crate::{flagstat, index, sort};

/// What a checked structure holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records.
    pub records: u64,
    /// A coordinate order is published.
    pub by_coord: bool,
    /// A name order is published.
    pub by_name: bool,
    /// An index is published.
    pub index: bool,
    /// The published flagstat counters.
    pub flagstat: Option<FlagstatCounts>,
    /// The number of records the last view selected, if one ran.
    pub last_view: Option<u64>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let yn = |b: bool| if b { "yes" } else { "no" };
        write!(
            f,
            "records {} by_coord {} by_name {} index {} flagstat {} last_view {}",
            self.records,
            yn(self.by_coord),
            yn(self.by_name),
            yn(self.index),
            self.flagstat
                .map_or("none".into(), |s| s.total[0].to_string()),
            self.last_view.map_or("none".into(), |n| n.to_string()),
        )
    }
}

fn differs<A: Addressing>(arena: &Arena<A>, field: &'static str, problem: String) -> SamError {
    arena.corrupt("root", field, problem)
}

/// Checks the whole structure (see the module comment).
pub fn check<A: Addressing>(arena: &Arena<A>) -> Result<Summary, SamError> {
    arena.check_root()?;
    let records = arena.records()?;
    for (i, &r) in records.iter().enumerate() {
        arena.rec(
            Entry {
                table: "records",
                i,
            },
            r,
        )?;
    }
    let mut sum = Summary {
        records: records.len() as u64,
        ..Summary::default()
    };
    for by_name in [false, true] {
        if let Some(order) = arena.order(by_name)? {
            let field = if by_name { "by_name" } else { "by_coord" };
            if !same_records(arena, field, order, &sort::sorted(arena, by_name)?)? {
                return Err(differs(arena, field, "is not the sorted order".into()));
            }
            *(if by_name {
                &mut sum.by_name
            } else {
                &mut sum.by_coord
            }) = true;
        }
    }
    if let Some(head) = arena.index_head()? {
        if head.by_coord != arena.root().by_coord || !sum.by_coord {
            return Err(differs(arena, "index", "names another order".into()));
        }
        let want = index::build(arena)?;
        for (tid, (first, end, windows)) in want.iter().enumerate() {
            let (ri, w) = arena.ref_index(&head, tid)?;
            if (ri.first, ri.end) != (*first, *end) || w != windows.as_slice() {
                return Err(differs(
                    arena,
                    "index",
                    format!("reference {tid}'s entry is not the index of the order"),
                ));
            }
        }
        sum.index = true;
    }
    let root = *arena.root();
    if root.flagstat != 0 {
        let got: FlagstatCounts = arena.value("root", "flagstat", root.flagstat)?;
        if got != flagstat::counts(arena)? {
            return Err(differs(
                arena,
                "flagstat",
                "differs from a fresh count".into(),
            ));
        }
        sum.flagstat = Some(got);
    }
    if let Some(sel) = arena.selection()? {
        check_selection(arena, sel)?;
        sum.last_view = Some(sel.len() as u64);
    }
    Ok(sum)
}

/// Whether `order` names the records of `want` (or copies of them), in that order.
fn same_records<A: Addressing>(
    arena: &Arena<A>,
    field: &'static str,
    order: &[u64],
    want: &[u64],
) -> Result<bool, SamError> {
    for (i, (&r, &w)) in order.iter().zip(want).enumerate() {
        if r == w {
            continue;
        }
        let got = arena.rec(Entry { table: field, i }, r)?;
        let orig = arena.rec(
            Entry {
                table: "records",
                i,
            },
            w,
        )?;
        if !sort::same_record(arena, &got, &orig) {
            return Ok(false);
        }
    }
    Ok(order.len() == want.len())
}

/// A view's selection: records of the coordinate order, in that order.
fn check_selection<A: Addressing>(arena: &Arena<A>, sel: &[u64]) -> Result<(), SamError> {
    let Some(order) = arena.order(false)? else {
        return Err(differs(
            arena,
            "last_view",
            "without a coordinate order".into(),
        ));
    };
    let mut at = 0;
    for (i, r) in sel.iter().enumerate() {
        match order[at..].iter().position(|x| x == r) {
            Some(k) => at += k + 1,
            None => {
                return Err(arena.corrupt(
                    Entry {
                        table: "last_view",
                        i,
                    },
                    "reference",
                    "not a record of the coordinate order, in order".into(),
                ));
            }
        }
    }
    Ok(())
}

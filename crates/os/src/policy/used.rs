//! Per-address-space `used` state of the careful heuristics.

use std::collections::HashMap;

use crate::{Asid, BinTree, Pfn};

/// For each address space, a bin tree counting its resident pages per bin.
///
/// The paper keeps `used` per address space ("used is the number of pages previously
/// mapped to the bin by the address space", section 3.2.3; "a used bin tree is needed by
/// each address space", section 3.2.4): the heuristics minimise conflicts within an
/// address space first. A page that loses its frame to another mapping is no longer
/// counted, since it no longer occupies the bin (section 5 on updating `used` when pages
/// are removed).
#[derive(Debug, Clone)]
pub(crate) struct UsedBins {
    bins: u32,
    zero: BinTree,
    per_pid: HashMap<Asid, BinTree>,
}

impl UsedBins {
    pub(crate) fn new(bins: u32) -> Self {
        UsedBins {
            bins,
            zero: BinTree::new(bins),
            per_pid: HashMap::new(),
        }
    }

    /// The used tree of `asid` (all zero if it has no pages).
    pub(crate) fn of(&self, asid: Asid) -> &BinTree {
        self.per_pid.get(&asid).unwrap_or(&self.zero)
    }

    pub(crate) fn mapped(&mut self, asid: Asid, pfn: Pfn) {
        let bins = self.bins;
        self.per_pid
            .entry(asid)
            .or_insert_with(|| BinTree::new(bins))
            .add(pfn);
    }

    pub(crate) fn unmapped(&mut self, asid: Asid, pfn: Pfn) {
        if let Some(t) = self.per_pid.get_mut(&asid) {
            t.remove(pfn);
        }
    }

    pub(crate) fn exited(&mut self, asid: Asid) {
        self.per_pid.remove(&asid);
    }
}

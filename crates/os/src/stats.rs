//! Page conflicts of a mapping in a cache (section 2).

use crate::{CacheGeometry, Pfn};

/// Page conflicts of one address space's resident pages in one cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ConflictStats {
    /// Resident pages `U`.
    pub pages: u64,
    /// Page conflicts `C = sum over bins of max(0, u_b - A)`.
    pub conflicts: u64,
    /// The least conflicts any mapping of `U` pages can have, `C_min`.
    pub min_conflicts: u64,
}

impl ConflictStats {
    /// Mapping conflicts `C - C_min`: the conflicts careful mapping could have avoided.
    pub fn mapping_conflicts(&self) -> u64 {
        self.conflicts - self.min_conflicts
    }
}

/// `C_min` for `pages` pages in `bins` bins of associativity `assoc`: spreading pages
/// evenly leaves no conflict until every bin holds `A` pages, then one per extra page:
/// `max(0, U - A * B)`.
pub fn min_conflicts(pages: u64, bins: u64, assoc: u64) -> u64 {
    pages.saturating_sub(assoc * bins)
}

/// The page conflicts of pages resident in `frames`, in the cache `geometry`.
pub fn conflicts_of(
    frames: impl IntoIterator<Item = Pfn>,
    geometry: &CacheGeometry,
) -> ConflictStats {
    let mut per_bin = vec![0u64; geometry.bins() as usize];
    let mut pages = 0;
    for pfn in frames {
        per_bin[geometry.bin_of(pfn) as usize] += 1;
        pages += 1;
    }
    let a = u64::from(geometry.assoc());
    let conflicts = per_bin.iter().map(|&u| u.saturating_sub(a)).sum();
    ConflictStats {
        pages,
        conflicts,
        min_conflicts: min_conflicts(pages, u64::from(geometry.bins()), a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PageSize;

    #[test]
    fn conflicts_count_pages_beyond_the_associativity() {
        // 4 bins of 16 KiB pages, direct-mapped.
        let g = CacheGeometry::new(64 << 10, 1, PageSize::KIB_16).unwrap();
        let s = conflicts_of([0, 4, 8, 1, 2], &g); // bin 0 holds 3 pages
        assert_eq!(
            (s.pages, s.conflicts, s.min_conflicts, s.mapping_conflicts()),
            (5, 2, 1, 1)
        );
        let g2 = CacheGeometry::new(64 << 10, 2, PageSize::KIB_16).unwrap(); // 2 bins, 2-way
        let s = conflicts_of([0, 4, 8, 1, 2], &g2); // bin 0: 0,4,8,2 ; bin 1: 1
        assert_eq!((s.conflicts, s.min_conflicts), (2, 1));
    }
}

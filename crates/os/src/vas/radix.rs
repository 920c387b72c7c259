//! A radix page table (x86-64 style: 512 entries per table page) that counts the work of
//! building and tearing it down: table pages allocated and freed, entries written.
//!
//! SpaceJMP's Figure 1 and its MAP design are about exactly this cost, so the table does
//! not store entries in the tree itself (a hash map of leaf entries is enough for
//! translation); it keeps, per table page, how many live entries it holds, which is all
//! the counting needs.

use crate::page_table::FastMap;
use crate::{PageSize, Vpn};

/// Entries per table page (x86-64: 4 KiB pages of 8-byte entries).
pub const ENTRIES_PER_TABLE: u64 = 512;
const BITS_PER_LEVEL: u32 = 9;

/// Work done on page tables, in the units a closed-form cost model charges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableWork {
    /// Page-table entries written (set or cleared), leaf and interior.
    pub entry_writes: u64,
    /// Table pages allocated (each zeroed before use).
    pub tables_allocated: u64,
    /// Table pages freed once empty.
    pub tables_freed: u64,
}

impl TableWork {
    /// The work of `other` added to this.
    pub fn add(&mut self, other: TableWork) {
        self.entry_writes += other.entry_writes;
        self.tables_allocated += other.tables_allocated;
        self.tables_freed += other.tables_freed;
    }
}

/// One address space's radix page table over `va_bits` of virtual address.
#[derive(Clone, Debug)]
pub struct RadixTable {
    page: PageSize,
    va_bits: u32,
    levels: u32,
    /// Leaf entries: virtual page -> (frame, writable).
    leaves: FastMap<Vpn, (u64, bool)>,
    /// Live entries of each non-root table page, keyed by (level, index of the table).
    /// Level 1 tables hold leaf entries; level `levels` is the root.
    live: FastMap<(u32, u64), u32>,
    root_live: u32,
    work: TableWork,
}

impl RadixTable {
    /// An empty table (its root page allocated and counted) for `va_bits` of virtual
    /// address in pages of `page`. The number of levels is what `va_bits` needs above the
    /// page offset at 9 bits a level: 4 for 48 bits and 4 KiB pages, 3 for 2 MiB pages.
    pub fn new(page: PageSize, va_bits: u32) -> Self {
        let index_bits = va_bits.saturating_sub(page.shift()).max(1);
        let levels = index_bits.div_ceil(BITS_PER_LEVEL);
        RadixTable {
            page,
            va_bits,
            levels,
            leaves: FastMap::default(),
            live: FastMap::default(),
            root_live: 0,
            work: TableWork {
                tables_allocated: 1,
                ..TableWork::default()
            },
        }
    }

    /// Levels of the tree (root included).
    pub fn levels(&self) -> u32 {
        self.levels
    }

    /// The page size.
    pub fn page_size(&self) -> PageSize {
        self.page
    }

    /// Bytes of virtual address space this table can map: `2^va_bits`.
    pub fn va_limit(&self) -> u64 {
        1u64.checked_shl(self.va_bits).unwrap_or(u64::MAX)
    }

    /// Work done so far (the root's allocation included).
    pub fn work(&self) -> TableWork {
        self.work
    }

    /// Table pages currently allocated, root included.
    pub fn table_pages(&self) -> u64 {
        1 + self.live.len() as u64
    }

    /// Leaf entries mapped.
    pub fn mapped_pages(&self) -> u64 {
        self.leaves.len() as u64
    }

    /// The frame and writability of virtual page `vpn`.
    #[inline]
    pub fn translate(&self, vpn: Vpn) -> Option<(u64, bool)> {
        self.leaves.get(&vpn).copied()
    }

    /// Whether virtual page `vpn` lies inside the `va_bits` the table covers.
    pub fn covers(&self, vpn: Vpn) -> bool {
        let pages = self.va_limit() >> self.page.shift();
        vpn < pages.max(1)
    }

    /// The table (level, index) holding the entry for `vpn` at `level` (1 = leaf table).
    fn table_of(vpn: Vpn, level: u32) -> (u32, u64) {
        (level, vpn >> (BITS_PER_LEVEL * level))
    }

    /// Maps `vpn` to `frame`; creates the interior tables on the way down. Returns
    /// `false` (and does nothing) if `vpn` is already mapped.
    pub fn map(&mut self, vpn: Vpn, frame: u64, writable: bool) -> bool {
        debug_assert!(self.covers(vpn));
        if self.leaves.contains_key(&vpn) {
            return false;
        }
        // From the leaf table up: add one live entry to each table until one already
        // existed (its parent entry is then already present).
        for level in 1..self.levels {
            let key = Self::table_of(vpn, level);
            let count = self.live.entry(key).or_insert(0);
            *count += 1;
            self.work.entry_writes += u64::from(level == 1);
            if *count > 1 {
                self.leaves.insert(vpn, (frame, writable));
                return true;
            }
            // A fresh table page: allocated, and linked by an entry in its parent.
            self.work.tables_allocated += 1;
            if level + 1 < self.levels {
                self.work.entry_writes += 1;
            }
        }
        if self.levels == 1 {
            self.work.entry_writes += 1;
        } else {
            self.work.entry_writes += 1; // the root's entry to the new top-level table
        }
        self.root_live += 1;
        self.leaves.insert(vpn, (frame, writable));
        true
    }

    /// Unmaps `vpn`, freeing tables left empty. Returns whether it was mapped.
    pub fn unmap(&mut self, vpn: Vpn) -> bool {
        if self.leaves.remove(&vpn).is_none() {
            return false;
        }
        self.work.entry_writes += 1; // the leaf entry
        for level in 1..self.levels {
            let key = Self::table_of(vpn, level);
            let count = self.live.get_mut(&key).expect("mapped page has its tables");
            *count -= 1;
            if *count > 0 {
                return true;
            }
            self.live.remove(&key);
            self.work.tables_freed += 1;
            self.work.entry_writes += 1; // the parent's entry that pointed to it
        }
        self.root_live -= 1;
        true
    }

    /// Unmaps everything and frees the root: the teardown of a whole address space.
    pub fn destroy(&mut self) -> TableWork {
        let before = self.work;
        let vpns: Vec<Vpn> = self.leaves.keys().copied().collect();
        for vpn in vpns {
            self.unmap(vpn);
        }
        self.work.tables_freed += 1;
        TableWork {
            entry_writes: self.work.entry_writes - before.entry_writes,
            tables_allocated: 0,
            tables_freed: self.work.tables_freed - before.tables_freed,
        }
    }
}

/// Table pages a fresh table needs to map `pages` contiguous pages starting at a
/// virtual page aligned to a top-level table's reach (closed form): at each level below
/// the root, one table per 512 entries of the level beneath.
pub fn tables_for_aligned_run(pages: u64, levels: u32) -> u64 {
    let mut total = 1; // the root
    let mut entries = pages;
    for _ in 1..levels {
        let tables = entries.div_ceil(ENTRIES_PER_TABLE);
        total += tables;
        entries = tables;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_va_bits_and_page_size() {
        assert_eq!(RadixTable::new(PageSize::KIB_4, 48).levels(), 4);
        assert_eq!(RadixTable::new(PageSize::KIB_4, 57).levels(), 5);
        assert_eq!(RadixTable::new(PageSize::MIB_2, 48).levels(), 3);
        assert_eq!(RadixTable::new(PageSize::KIB_4, 30).levels(), 2);
    }

    #[test]
    fn aligned_runs_match_the_closed_form() {
        for pages in [1u64, 511, 512, 513, 4096, 262_144 + 7] {
            let mut t = RadixTable::new(PageSize::KIB_4, 48);
            for vpn in 0..pages {
                assert!(t.map(vpn, vpn, true));
            }
            assert_eq!(t.table_pages(), tables_for_aligned_run(pages, 4), "{pages}");
            let w = t.work();
            assert_eq!(w.tables_allocated, t.table_pages());
            // one leaf entry per page plus one parent entry per non-root table
            assert_eq!(w.entry_writes, pages + t.table_pages() - 1, "{pages}");
            let d = t.destroy();
            assert_eq!(d.entry_writes, pages + w.tables_allocated - 1);
            assert_eq!(d.tables_freed, w.tables_allocated);
            assert_eq!(t.mapped_pages(), 0);
        }
    }

    #[test]
    fn remapping_the_same_page_is_refused_and_unmap_frees() {
        let mut t = RadixTable::new(PageSize::KIB_4, 48);
        assert!(t.map(5, 9, false));
        assert!(!t.map(5, 10, true));
        assert_eq!(t.translate(5), Some((9, false)));
        assert!(t.unmap(5));
        assert!(!t.unmap(5));
        assert_eq!(t.table_pages(), 1);
    }
}

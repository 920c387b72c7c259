//! One address space's page table: virtual page -> frame.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::{Asid, Pfn, Vpn};

/// Marks a page that was mapped and lost its frame to another mapping: its next touch is
/// a re-fault, counted apart from first touches.
const EVICTED: Pfn = Pfn::MAX;

/// Hashes page numbers with one multiply (Fibonacci hashing). Page numbers are not
/// adversarial, and the translation per simulated reference must be cheap; SipHash
/// would dominate it.
#[derive(Default, Clone, Copy)]
pub(crate) struct VpnHasher(u64);

impl Hasher for VpnHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<VpnHasher>>;

/// The page table of one address space (one process; its [`Asid`] is its ASID).
///
/// Lookups go through a one-entry cache of the last translated page before the hash
/// map, because consecutive references of a trace mostly stay on one page.
#[derive(Debug, Clone)]
pub struct AddressSpace {
    asid: Asid,
    table: FastMap<Vpn, Pfn>,
    resident: usize,
    /// The last successful translation, `(vpn, pfn)`; `pfn == EVICTED` when empty.
    last: Cell<(Vpn, Pfn)>,
}

impl AddressSpace {
    pub(crate) fn new(asid: Asid) -> Self {
        AddressSpace {
            asid,
            table: FastMap::default(),
            resident: 0,
            last: Cell::new((0, EVICTED)),
        }
    }

    /// The process (and ASID) this address space belongs to.
    pub fn asid(&self) -> Asid {
        self.asid
    }

    /// The frame page `vpn` is mapped to, or `None` if it is not resident (never touched,
    /// or its frame was taken for another page).
    #[inline]
    pub fn translate(&self, vpn: Vpn) -> Option<Pfn> {
        let (last_vpn, last_pfn) = self.last.get();
        if last_vpn == vpn && last_pfn != EVICTED {
            return Some(last_pfn);
        }
        match self.table.get(&vpn) {
            Some(&pfn) if pfn != EVICTED => {
                self.last.set((vpn, pfn));
                Some(pfn)
            }
            _ => None,
        }
    }

    /// Whether `vpn` was mapped once and has since lost its frame.
    pub fn was_evicted(&self, vpn: Vpn) -> bool {
        self.table.get(&vpn) == Some(&EVICTED)
    }

    /// The number of resident pages.
    pub fn resident_pages(&self) -> usize {
        self.resident
    }

    /// The resident pages `(vpn, pfn)`, in no particular (but deterministic) order.
    pub fn mappings(&self) -> impl Iterator<Item = (Vpn, Pfn)> + '_ {
        self.table
            .iter()
            .filter(|&(_, &p)| p != EVICTED)
            .map(|(&v, &p)| (v, p))
    }

    /// The frames of the resident pages.
    pub fn frames(&self) -> impl Iterator<Item = Pfn> + '_ {
        self.table.values().copied().filter(|&p| p != EVICTED)
    }

    /// Maps `vpn` to `pfn`; returns whether the page had been evicted before (a re-fault).
    pub(crate) fn map(&mut self, vpn: Vpn, pfn: Pfn) -> bool {
        debug_assert_ne!(pfn, EVICTED);
        self.resident += 1;
        let old = self.table.insert(vpn, pfn);
        debug_assert!(old.is_none() || old == Some(EVICTED), "page mapped twice");
        old == Some(EVICTED)
    }

    /// Unmaps `vpn` because its frame was taken for another page.
    pub(crate) fn evict(&mut self, vpn: Vpn) {
        let entry = self.table.get_mut(&vpn).expect("evicting an unmapped page");
        debug_assert_ne!(*entry, EVICTED);
        *entry = EVICTED;
        self.resident -= 1;
        if self.last.get().0 == vpn {
            self.last.set((0, EVICTED));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_translate_evict() {
        let mut a = AddressSpace::new(7);
        assert_eq!(a.translate(3), None);
        assert!(!a.map(3, 10));
        assert_eq!(a.translate(3), Some(10));
        assert_eq!(a.translate(3), Some(10)); // from the last-page cache
        a.evict(3);
        assert_eq!(
            a.translate(3),
            None,
            "the last-page cache must forget evicted pages"
        );
        assert!(a.was_evicted(3));
        assert!(a.map(3, 11));
        assert_eq!(a.translate(3), Some(11));
        assert_eq!(a.resident_pages(), 1);
    }
}

//! Page tables as the machine sees them: a translation from (address space, virtual page)
//! to a physical frame.
//!
//! The machine only needs [`PageTables`]; the OS model (frames, placement policies) can
//! stand behind it. Two tables live here: [`IdentityPages`] (a flat persistent space,
//! virtual page n is frame n) and [`DemandPages`] (per-address-space tables filled on
//! first touch from a sequential frame pool).

use std::collections::HashMap;

use pmlab_spine::Asid;
pub use pmlab_spine::PageSize;

/// What the machine needs from page tables.
pub trait PageTables: Send {
    /// The frame that virtual page `vpn` of address space `asid` maps to, establishing
    /// the mapping if the tables do so on demand; `None` if it cannot be mapped.
    fn translate(&mut self, asid: Asid, vpn: u64) -> Option<u64>;

    /// Whether mappings changed since the last call in a way that may leave stale TLB
    /// entries (a page was unmapped); the machine then flushes its TLB, as an OS shoots
    /// TLB entries down.
    fn stale_translations(&mut self) -> bool {
        false
    }
}

/// Virtual page n is frame n, in every address space, for `frames` frames.
#[derive(Clone, Debug)]
pub struct IdentityPages {
    frames: u64,
}

impl IdentityPages {
    /// An identity mapping of `frames` frames.
    pub fn new(frames: u64) -> Self {
        Self { frames }
    }
}

impl PageTables for IdentityPages {
    fn translate(&mut self, _asid: Asid, vpn: u64) -> Option<u64> {
        (vpn < self.frames).then_some(vpn)
    }
}

/// Per-address-space tables that hand out frames in order on first touch.
#[derive(Clone, Debug, Default)]
pub struct DemandPages {
    frames: u64,
    next_free: u64,
    spaces: HashMap<Asid, HashMap<u64, u64>>,
}

impl DemandPages {
    /// Tables over a pool of `frames` frames.
    pub fn new(frames: u64) -> Self {
        Self {
            frames,
            ..Self::default()
        }
    }

    /// Frames handed out so far.
    pub fn frames_used(&self) -> u64 {
        self.next_free
    }

    /// Maps `vpn` of `asid` to `pfn` explicitly (e.g. to share a frame between spaces,
    /// as a SpaceJMP segment attached to two address spaces is).
    pub fn map(&mut self, asid: Asid, vpn: u64, pfn: u64) {
        self.spaces.entry(asid).or_default().insert(vpn, pfn);
    }
}

impl PageTables for DemandPages {
    fn translate(&mut self, asid: Asid, vpn: u64) -> Option<u64> {
        let table = self.spaces.entry(asid).or_default();
        if let Some(&pfn) = table.get(&vpn) {
            return Some(pfn);
        }
        if self.next_free == self.frames {
            return None;
        }
        let pfn = self.next_free;
        self.next_free += 1;
        table.insert(vpn, pfn);
        Some(pfn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demand_pages_are_per_space_and_bounded() {
        let mut p = DemandPages::new(2);
        assert_eq!(p.translate(1, 7), Some(0));
        assert_eq!(p.translate(2, 7), Some(1));
        assert_eq!(p.translate(1, 7), Some(0));
        assert_eq!(p.translate(1, 8), None);
        assert_eq!(PageSize::MIB_2.shift(), 21);
    }
}

//! The Page Coloring Heuristic (section 3.2.1).

use super::PlacementPolicy;
use crate::{Asid, CacheGeometry, Pfn, Pool, Vpn};

/// Which bin a page prefers under Page Coloring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColoringMatch {
    /// "an exact match of bin bits between the virtual page and real page frame".
    Exact,
    /// "a match of bin bits exclusive-ored with a different PID for each address space" (the paper's PID is our [`Asid`]).
    /// The bits XORed are a hash of the id rather than the id itself, so that
    /// consecutive PIDs get unrelated offsets in every bin count.
    PidHash,
}

/// Page Coloring: the page's preferred bin is the low bits of its virtual page number
/// (possibly XOR a per-process hash). "When a page frame is not available in a bin
/// corresponding to the virtual page, any available page frame can be used to map the
/// page, likely the first available": the fallback is the least recently used pool
/// frame. Within the preferred bin the least recently used frame is taken. No state is
/// kept per address space. O(1) per mapping.
#[derive(Debug, Clone)]
pub struct PageColoring {
    bins: u32,
    mode: ColoringMatch,
}

impl PageColoring {
    /// Page Coloring for the bins of `geometry`.
    pub fn new(geometry: CacheGeometry, mode: ColoringMatch) -> Self {
        PageColoring {
            bins: geometry.bins(),
            mode,
        }
    }

    /// The bin page `vpn` of `asid` prefers.
    pub fn preferred_bin(&self, asid: Asid, vpn: Vpn) -> u32 {
        let bits = match self.mode {
            ColoringMatch::Exact => vpn,
            ColoringMatch::PidHash => vpn ^ pid_hash(asid),
        };
        (bits & u64::from(self.bins - 1)) as u32
    }
}

/// SplitMix64's finaliser: a fixed, well-mixed 64-bit hash of an address-space id.
fn pid_hash(asid: Asid) -> u64 {
    let mut z = u64::from(asid).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl PlacementPolicy for PageColoring {
    fn name(&self) -> &'static str {
        match self.mode {
            ColoringMatch::Exact => "coloring",
            ColoringMatch::PidHash => "coloring-hash",
        }
    }

    fn bins(&self) -> u32 {
        self.bins
    }

    fn choose(&mut self, asid: Asid, vpn: Vpn, pool: &Pool) -> Pfn {
        pool.lru_in_bin(self.preferred_bin(asid, vpn))
            .unwrap_or_else(|| pool.oldest())
    }
}

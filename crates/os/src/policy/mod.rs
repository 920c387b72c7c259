//! Placement policies: which available frame a newly touched page gets (section 3.2).

mod bin_hopping;
mod coloring;
mod hierarchical;
mod random;
mod ranking;
mod sequential;
mod used;

pub use bin_hopping::BinHopping;
pub use coloring::{ColoringMatch, PageColoring};
pub use hierarchical::{Hierarchical, traverse};
pub use random::RandomPlacement;
pub use ranking::{BinState, rank};
pub use sequential::Sequential;

use crate::{Asid, CacheGeometry, Pfn, Pool, Vpn};

/// A page placement policy: it chooses the frame for a page being mapped on its first
/// touch, from the pool of available frames, and may keep per-address-space state.
///
/// The OS calls [`choose`](Self::choose) once per mapping, then
/// [`mapped`](Self::mapped); it calls [`unmapped`](Self::unmapped) when a page loses
/// its frame to another mapping, and [`exited`](Self::exited) when a process exits
/// (its pages are then released without `unmapped` calls).
pub trait PlacementPolicy: Send {
    /// A short name, as accepted by [`PolicyKind`]'s parser.
    fn name(&self) -> &'static str;

    /// The number of bins the pool must be indexed by (1 for a policy blind to bins).
    fn bins(&self) -> u32;

    /// The frame for page `vpn` of process `asid`; it must be a member of `pool`, which
    /// is never empty when this is called.
    fn choose(&mut self, asid: Asid, vpn: Vpn, pool: &Pool) -> Pfn;

    /// `vpn` of `asid` is now mapped to `pfn`.
    fn mapped(&mut self, _pid: Asid, _vpn: Vpn, _pfn: Pfn) {}

    /// `vpn` of `asid` lost frame `pfn` to another mapping.
    fn unmapped(&mut self, _pid: Asid, _vpn: Vpn, _pfn: Pfn) {}

    /// `asid` exited; forget its state.
    fn exited(&mut self, _pid: Asid) {}
}

/// The policies of the paper, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum PolicyKind {
    /// A uniformly random pool frame (the baseline the paper compares against).
    Random,
    /// Page Coloring, exact match of the bin bits (section 3.2.1, version 1).
    ColoringExact,
    /// Page Coloring, bin bits XOR a per-process hash (section 3.2.1, version 2).
    ColoringPidHash,
    /// Bin Hopping (section 3.2.2).
    BinHopping,
    /// The Sequential Heuristic (section 3.2.3).
    Sequential,
    /// The Hierarchical Heuristic (section 3.2.4).
    Hierarchical,
}

impl PolicyKind {
    /// All policies, in the paper's order (Table 3).
    pub const ALL: [PolicyKind; 6] = [
        PolicyKind::Random,
        PolicyKind::ColoringExact,
        PolicyKind::ColoringPidHash,
        PolicyKind::BinHopping,
        PolicyKind::Sequential,
        PolicyKind::Hierarchical,
    ];

    /// The policy's name.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Random => "random",
            PolicyKind::ColoringExact => "coloring",
            PolicyKind::ColoringPidHash => "coloring-hash",
            PolicyKind::BinHopping => "bin-hopping",
            PolicyKind::Sequential => "sequential",
            PolicyKind::Hierarchical => "hierarchical",
        }
    }

    /// Builds the policy for the target cache `geometry`; `seed` seeds its xoshiro256++
    /// generator (random picks, tie breaks, start bins).
    pub fn build(self, geometry: CacheGeometry, seed: u64) -> Box<dyn PlacementPolicy> {
        match self {
            PolicyKind::Random => Box::new(RandomPlacement::new(seed)),
            PolicyKind::ColoringExact => {
                Box::new(PageColoring::new(geometry, ColoringMatch::Exact))
            }
            PolicyKind::ColoringPidHash => {
                Box::new(PageColoring::new(geometry, ColoringMatch::PidHash))
            }
            PolicyKind::BinHopping => Box::new(BinHopping::new(geometry, seed)),
            PolicyKind::Sequential => Box::new(Sequential::new(geometry, seed)),
            PolicyKind::Hierarchical => Box::new(Hierarchical::new(geometry, seed)),
        }
    }
}

impl std::str::FromStr for PolicyKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = PolicyKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown placement policy `{s}` (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

impl std::fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

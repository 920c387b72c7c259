//! pmlab-os: the OS model of pmlab, built for Kessler & Hill's careful page mapping
//! ("Miss Reduction in Large, Real-Indexed Caches", 1990).
//!
//! The model follows the paper's simulator (section 4.1.2):
//!
//! * physical memory is `N` page frames kept on one global, exact LRU list;
//! * the pool of available frames is the bottom `K` frames of that list (Figure 9), so
//!   exactly `K` frames are offered at every mapping, even when memory is still unused;
//! * a virtual page `(asid, vpn)` is mapped when it is first touched, by a
//!   [`PlacementPolicy`] choosing a frame from the pool; taking a frame that still holds
//!   another page unmaps that page (it faults again on its next touch, and is counted);
//! * a touch of a mapped page makes its frame most recently used (O(1));
//! * a process that exits releases its frames to the bottom of the list.
//!
//! Address spaces are identified by an [`Asid`], which is also the ASID a tagged TLB uses.
//! The machine model translates with [`Os::translate`] (no side effects) and touches with
//! [`Os::touch`] / [`Os::access`] (LRU update, faults).
//!
//! Randomness (the LRU list's initial order, random placement, tie breaks, bin-hopping
//! start bins) comes from xoshiro256++ (`rand_xoshiro::Xoshiro256PlusPlus`) seeded from
//! the configuration, so a run is a function of its configuration.
//!
//! ```
//! use pmlab_os::{CacheGeometry, Os, OsConfig, PageSize, PolicyKind};
//!
//! // The paper's system: 128 MiB in 16 KiB pages, a 4 MiB pool, a 1 MiB direct-mapped
//! // target cache (64 bins), the Hierarchical Heuristic.
//! let cache = CacheGeometry::new(1 << 20, 1, PageSize::KIB_16).unwrap();
//! let mut os = Os::new(OsConfig::paper(42), PolicyKind::Hierarchical.build(cache, 42)).unwrap();
//! let pa = os.access(7, 0x4000_0123); // asid 7 touches a virtual address
//! assert_eq!(pa & 0x3fff, 0x123);
//! assert_eq!(os.physical_address(7, 0x4000_0123), Some(pa)); // no side effects
//! assert_eq!(os.translate(7, 0x4000_0123 >> 14), Some((pa >> 14) as u32));
//! for vpn in 0..64 {
//!     os.touch(7, vpn);
//! }
//! let c = os.conflicts(7, &cache).unwrap(); // page conflicts in the target cache
//! assert_eq!((c.pages, c.min_conflicts), (65, 1));
//! println!("C = {}, C - C_min = {}", c.conflicts, c.mapping_conflicts());
//! assert_eq!(os.exit(7), 65); // frames go to the bottom of the LRU list
//! ```
//!
//! Conflict statistics per address space are in [`conflicts_of`] / [`Os::conflicts`];
//! the analytic model of section 2 (equations 1-2, `C_min`, `C_max`) is in [`analytic`];
//! a Monte Carlo of random mappings through this OS model is in [`monte_carlo`]; the
//! data of Figures 3-4 (model beside Monte Carlo) in [`figures`]; the policies side by
//! side on one synthetic multiprogrammed workload in [`compare`].

pub mod analytic;
mod bin_tree;
pub mod compare;
mod error;
pub mod figures;
mod geometry;
mod lru;
mod memory;
pub mod monte_carlo;
mod os;
mod page_table;
pub mod policy;
mod pool;
mod spaces;
mod stats;
pub mod vas;

pub use bin_tree::BinTree;
pub use error::OsError;
pub use geometry::{CacheGeometry, PageSize};
pub use memory::PhysicalMemory;
pub use os::{Os, OsConfig, OsCounters};
pub use page_table::AddressSpace;
pub use policy::{PlacementPolicy, PolicyKind};
pub use pool::Pool;
pub use stats::{ConflictStats, conflicts_of, min_conflicts};

/// A process of a trace names one address space; its id is the spine's [`Asid`].
pub use pmlab_spine::Asid;
/// A virtual page number (virtual address divided by the page size).
pub type Vpn = u64;
/// A physical page frame number, `0..N`; the physical address of a frame is
/// `pfn as u64 * page_size`.
pub type Pfn = u32;

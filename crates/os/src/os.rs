//! The OS model: address spaces, first-touch mapping, eviction and process exit.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::memory::PhysicalMemory;
use crate::page_table::AddressSpace;
use crate::policy::PlacementPolicy;
use crate::spaces::Spaces;
use crate::{Asid, CacheGeometry, ConflictStats, OsError, PageSize, Pfn, Vpn, conflicts_of};

/// The size of physical memory, its pool and its pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct OsConfig {
    /// Page frames of physical memory, `N`.
    pub frames: u32,
    /// Frames in the pool of available frames at the bottom of the LRU list, `K`.
    pub pool_frames: u32,
    /// The page size.
    pub page_size: PageSize,
    /// Seed of the xoshiro256++ generator that shuffles the initial LRU order.
    pub seed: u64,
}

impl OsConfig {
    /// The paper's system (section 4.1.2): 128 MiB of memory in 16 KiB pages with a
    /// 4 MiB pool of available frames.
    pub fn paper(seed: u64) -> Self {
        OsConfig {
            frames: 8192,
            pool_frames: 256,
            page_size: PageSize::KIB_16,
            seed,
        }
    }

    /// A configuration from byte sizes: `memory` and `pool` must be multiples of the page
    /// size.
    pub fn from_bytes(
        memory: u64,
        pool: u64,
        page_size: PageSize,
        seed: u64,
    ) -> Result<Self, OsError> {
        let frames = |field, bytes: u64| -> Result<u32, OsError> {
            if (bytes / page_size.bytes()) * page_size.bytes() != bytes {
                return Err(OsError::NotMultiple {
                    field,
                    value: bytes,
                    unit: page_size.bytes(),
                    unit_name: "page size",
                });
            }
            u32::try_from(bytes / page_size.bytes()).map_err(|_| OsError::OutOfRange {
                field,
                value: bytes,
                expected: "fewer than 2^31 pages",
            })
        };
        let c = OsConfig {
            frames: frames("memory", memory)?,
            pool_frames: frames("pool", pool)?,
            page_size,
            seed,
        };
        c.validate()?;
        Ok(c)
    }

    fn validate(&self) -> Result<(), OsError> {
        if self.frames == 0 || self.frames > 1 << 31 {
            return Err(OsError::OutOfRange {
                field: "memory frames",
                value: u64::from(self.frames),
                expected: "1 ..= 2^31",
            });
        }
        if self.pool_frames == 0 || self.pool_frames > self.frames {
            return Err(OsError::OutOfRange {
                field: "pool frames",
                value: u64::from(self.pool_frames),
                expected: "1 ..= memory frames",
            });
        }
        Ok(())
    }
}

/// Event counts of an [`Os`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OsCounters {
    /// Calls of [`Os::touch`] / [`Os::access`].
    pub touches: u64,
    /// Pages mapped on their first touch.
    pub first_touch_faults: u64,
    /// Pages mapped again after losing their frame to another mapping.
    pub refaults: u64,
    /// Pages unmapped because their frame was taken for another page.
    pub evictions: u64,
    /// Processes that exited.
    pub exits: u64,
    /// Frames released to the bottom of the LRU list by exiting processes.
    pub frames_released: u64,
}

/// The OS model: physical memory with its LRU list and pool, one page table per
/// process (ASID = [`Asid`]), and a placement policy for first touches.
///
/// Use: for every reference of process `asid` to virtual address `vaddr`, call
/// [`access`](Self::access) (or [`touch`](Self::touch) with the page number) for the
/// physical address; call [`exit`](Self::exit) when the process ends. An MMU model with a
/// TLB calls [`translate`](Self::translate) on a TLB miss (no side effects) and `touch`
/// for every reference so that the LRU order stays exact.
pub struct Os {
    config: OsConfig,
    memory: PhysicalMemory,
    spaces: Spaces,
    policy: Box<dyn PlacementPolicy>,
    counters: OsCounters,
    /// A page was unmapped since the last [`Os::take_stale`].
    stale: bool,
}

impl std::fmt::Debug for Os {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Os")
            .field("config", &self.config)
            .field("policy", &self.policy.name())
            .field("processes", &self.spaces.len())
            .field("counters", &self.counters)
            .finish()
    }
}

impl Os {
    /// An OS with all memory unused, in a random LRU order (seeded by `config.seed`), and
    /// `policy` placing pages.
    pub fn new(config: OsConfig, policy: Box<dyn PlacementPolicy>) -> Result<Self, OsError> {
        config.validate()?;
        let bins = policy.bins();
        if !bins.is_power_of_two() {
            return Err(OsError::NotPowerOfTwo {
                field: "policy bins",
                value: u64::from(bins),
            });
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(config.seed);
        let memory = PhysicalMemory::new(config.frames, config.pool_frames, bins, &mut rng);
        Ok(Os {
            config,
            memory,
            spaces: Spaces::new(),
            policy,
            counters: OsCounters::default(),
            stale: false,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OsConfig {
        &self.config
    }

    /// The page size.
    pub fn page_size(&self) -> PageSize {
        self.config.page_size
    }

    /// The placement policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// Physical memory: LRU order, pool, frame owners.
    pub fn memory(&self) -> &PhysicalMemory {
        &self.memory
    }

    /// Event counts so far.
    pub fn counters(&self) -> &OsCounters {
        &self.counters
    }

    /// The frame of page `vpn` of address space `asid`, if resident. No side effects: the
    /// LRU order is not updated and nothing is mapped.
    #[inline]
    pub fn translate(&self, asid: Asid, vpn: Vpn) -> Option<Pfn> {
        self.spaces.get(asid)?.translate(vpn)
    }

    /// The physical address of `vaddr` in `asid`, if its page is resident (no side effects).
    #[inline]
    pub fn physical_address(&self, asid: Asid, vaddr: u64) -> Option<u64> {
        let shift = self.config.page_size.shift();
        let pfn = self.translate(asid, vaddr >> shift)?;
        Some((u64::from(pfn) << shift) | (vaddr & (self.config.page_size.bytes() - 1)))
    }

    /// A reference by `asid` to page `vpn`: maps the page if it is not resident (first
    /// touch, or re-fault after eviction) and makes its frame the most recently used.
    /// Returns the frame. O(1) for a resident page; a fault costs the policy's choice.
    #[inline]
    pub fn touch(&mut self, asid: Asid, vpn: Vpn) -> Pfn {
        self.counters.touches += 1;
        let space = self.spaces.get_or_create(asid);
        if let Some(pfn) = space.translate(vpn) {
            self.memory.make_mru(pfn);
            return pfn;
        }
        self.fault(asid, vpn)
    }

    /// A reference by `asid` to virtual address `vaddr`: [`touch`](Self::touch), then the
    /// physical address.
    #[inline]
    pub fn access(&mut self, asid: Asid, vaddr: u64) -> u64 {
        let shift = self.config.page_size.shift();
        let pfn = self.touch(asid, vaddr >> shift);
        (u64::from(pfn) << shift) | (vaddr & (self.config.page_size.bytes() - 1))
    }

    fn fault(&mut self, asid: Asid, vpn: Vpn) -> Pfn {
        let pool = self.memory.pool();
        let pfn = self.policy.choose(asid, vpn, pool);
        assert!(
            pool.contains(pfn),
            "policy {} chose frame {pfn}, which is not in the pool",
            self.policy.name()
        );
        if let Some((victim_pid, victim_vpn)) = self.memory.owner(pfn) {
            self.spaces
                .get_mut(victim_pid)
                .expect("owner has an address space")
                .evict(victim_vpn);
            self.policy.unmapped(victim_pid, victim_vpn, pfn);
            self.counters.evictions += 1;
            self.stale = true;
        }
        self.memory.set_owner(pfn, Some((asid, vpn)));
        let space = self
            .spaces
            .get_mut(asid)
            .expect("address space created by touch");
        if space.map(vpn, pfn) {
            self.counters.refaults += 1;
        } else {
            self.counters.first_touch_faults += 1;
        }
        self.policy.mapped(asid, vpn, pfn);
        self.memory.make_mru(pfn);
        pfn
    }

    /// Process `asid` exits: its frames go to the bottom of the LRU list (into the pool),
    /// in ascending page order, so the frame of its highest page is offered first.
    /// Returns the number of frames released (0 for an unknown process).
    pub fn exit(&mut self, asid: Asid) -> usize {
        let Some(space) = self.spaces.remove(asid) else {
            return 0;
        };
        let mut pages: Vec<(Vpn, Pfn)> = space.mappings().collect();
        pages.sort_unstable();
        for &(_, pfn) in &pages {
            self.memory.set_owner(pfn, None);
            self.memory.make_lru(pfn);
        }
        self.policy.exited(asid);
        self.stale |= !pages.is_empty();
        self.counters.exits += 1;
        self.counters.frames_released += pages.len() as u64;
        pages.len()
    }

    /// Whether any page was unmapped (evicted, or released by an exit) since the last
    /// call; a TLB model flushes then, as an OS shoots down stale translations.
    pub fn take_stale(&mut self) -> bool {
        std::mem::take(&mut self.stale)
    }

    /// The address space of `asid`, if it has touched memory and not exited.
    pub fn address_space(&self, asid: Asid) -> Option<&AddressSpace> {
        self.spaces.get(asid)
    }

    /// All live address spaces, in ascending asid order.
    pub fn address_spaces(&self) -> Vec<&AddressSpace> {
        let mut v: Vec<_> = self.spaces.values().collect();
        v.sort_unstable_by_key(|s| s.asid());
        v
    }

    /// Page conflicts of `asid`'s resident pages in the cache `geometry` (which need not be
    /// the policy's target cache), or `None` for an unknown process.
    pub fn conflicts(&self, asid: Asid, geometry: &CacheGeometry) -> Option<ConflictStats> {
        Some(conflicts_of(self.spaces.get(asid)?.frames(), geometry))
    }

    /// Checks every internal invariant (O(N + pages)): the pool is exactly the bottom `K`
    /// of the LRU list, and page tables and frame owners agree.
    pub fn check(&self) -> Result<(), String> {
        self.memory.check()?;
        let mut owned = 0usize;
        for space in self.spaces.values() {
            for (vpn, pfn) in space.mappings() {
                owned += 1;
                if self.memory.owner(pfn) != Some((space.asid(), vpn)) {
                    return Err(format!(
                        "page {vpn} of {} maps frame {pfn}, owned by {:?}",
                        space.asid(),
                        self.memory.owner(pfn)
                    ));
                }
            }
        }
        let frames_owned = (0..self.memory.frames())
            .filter(|&f| self.memory.owner(f).is_some())
            .count();
        if owned != frames_owned {
            return Err(format!(
                "{owned} resident pages but {frames_owned} owned frames"
            ));
        }
        Ok(())
    }
}

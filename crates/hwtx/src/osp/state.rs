//! OSP's volatile state: the per-page shadow state the extended TLB entries and the
//! OS hold, the page map's DRAM copy, and the frame pool.

use std::collections::VecDeque;

use pmlab_model::{LineMap, Machine, Translation};
use pmlab_spine::{LINE, Memory};
use rustc_hash::{FxHashMap, FxHashSet};

use super::engine::clwb;
use super::layout::{Layout, PAGE};
use crate::flushes::{CpuFlushes, Source};

/// Where a page with two frames is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Where {
    /// In the TLB.
    Resident,
    /// Evicted, waiting in the asynchronous consolidation queue.
    Queued,
    /// Evicted while the running transaction had updated it: consolidated after the
    /// transaction ends.
    Evicted,
}

/// A virtual page with two frames: what its extended TLB entry holds (paper 000 §2.1:
/// two physical page numbers, the committed and the updated bitmap). The model's TLB
/// entry carries the frames and `committed ^ updated`, the bitmap it routes lines by;
/// the two bitmaps are kept here, beside it — the "separate hardware unit" §2.1
/// offers as an alternative to widening the entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shadow {
    /// The frame the page table maps the page to.
    pub p0: u64,
    /// The second frame.
    pub p1: u64,
    /// Bit `i`: line `i`'s committed version is in P1 (else in P0).
    pub committed: u64,
    /// Bit `i`: the running transaction wrote line `i` (its new version is in the
    /// other frame than the committed one).
    pub updated: u64,
    /// Where the page is.
    pub place: Where,
}

impl Shadow {
    /// The frame holding line `line`'s committed version (`new = false`) or the
    /// frame transactional stores to it go to (`new = true`).
    pub fn frame(&self, line: u64, new: bool) -> u64 {
        let bit = (self.committed >> line & 1 == 1) ^ new;
        if bit { self.p1 } else { self.p0 }
    }

    /// The TLB entry's translation: reads see `committed ^ updated`.
    pub fn translation(&self) -> Translation {
        Translation {
            pfn: self.p0,
            lines: Some(LineMap {
                alt_pfn: self.p1,
                select: self.committed ^ self.updated,
            }),
        }
    }
}

/// Frames with no page, and frames freed but not yet free: a consolidated page's old
/// frame is in limbo until the record of its consolidation is durable, so that no
/// crash can find the frame reused while the durable state still names it.
#[derive(Clone, Debug, Default)]
pub(crate) struct FramePool {
    free: Vec<u64>,
    limbo: Vec<u64>,
}

impl FramePool {
    /// A pool holding `free`.
    pub fn new(free: Vec<u64>) -> Self {
        Self {
            free,
            limbo: Vec::new(),
        }
    }

    /// A free frame, most recently freed first.
    pub fn take(&mut self) -> Option<u64> {
        self.free.pop()
    }

    /// Frees a frame no durable state names.
    pub fn free(&mut self, pfn: u64) {
        self.free.push(pfn);
    }

    /// A frame freed once the next durable point is reached.
    pub fn put_in_limbo(&mut self, pfn: u64) {
        self.limbo.push(pfn);
    }

    /// The durable point is reached: limbo frames are free.
    pub fn release_limbo(&mut self) {
        self.free.append(&mut self.limbo);
    }

    /// Free frames.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Frames in limbo.
    pub fn limbo_count(&self) -> usize {
        self.limbo.len()
    }
}

/// Counters of OSP's page management.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OspStats {
    /// TLB refills of data pages.
    pub refills: u64,
    /// Data pages with two frames that left the TLB.
    pub evictions: u64,
    /// Pages consolidated (on eviction, from the queue, after a transaction, at
    /// recovery).
    pub consolidations: u64,
    /// Lines copied by consolidation.
    pub lines_copied: u64,
    /// Consolidations that copied nothing (every committed line in one frame).
    pub free_consolidations: u64,
    /// Pages touched again while waiting in the consolidation queue (put back into the
    /// TLB with nothing copied).
    pub queue_hits: u64,
    /// Pages evicted with uncommitted lines (more pages than the TLB holds).
    pub evicted_in_tx: u64,
    /// Consolidation CPU flushes made in the TLB miss path.
    pub miss_path_flushes: u64,
    /// Consolidation CPU flushes made by the background engine (asynchronous mode).
    pub background_flushes: u64,
    /// Journal checkpoints.
    pub checkpoints: u64,
    /// Transactions committed that updated data, and pages they updated.
    pub commits: u64,
    /// Pages updated by those transactions.
    pub tx_pages: u64,
    /// Lines updated by those transactions.
    pub tx_lines: u64,
}

impl OspStats {
    /// The counts since `earlier` (a snapshot of the same counters).
    pub fn since(&self, earlier: &OspStats) -> OspStats {
        OspStats {
            refills: self.refills - earlier.refills,
            evictions: self.evictions - earlier.evictions,
            consolidations: self.consolidations - earlier.consolidations,
            lines_copied: self.lines_copied - earlier.lines_copied,
            free_consolidations: self.free_consolidations - earlier.free_consolidations,
            queue_hits: self.queue_hits - earlier.queue_hits,
            evicted_in_tx: self.evicted_in_tx - earlier.evicted_in_tx,
            miss_path_flushes: self.miss_path_flushes - earlier.miss_path_flushes,
            background_flushes: self.background_flushes - earlier.background_flushes,
            checkpoints: self.checkpoints - earlier.checkpoints,
            commits: self.commits - earlier.commits,
            tx_pages: self.tx_pages - earlier.tx_pages,
            tx_lines: self.tx_lines - earlier.tx_lines,
        }
    }
}

/// Everything OSP keeps in volatile state.
pub(crate) struct State {
    pub layout: Layout,
    /// Pages with two frames.
    pub pages: FxHashMap<u64, Shadow>,
    /// The page map's DRAM copy: each data page's frame.
    pub pte: Vec<u64>,
    /// Page-map lines changed since the last checkpoint (journal variant).
    pub dirty_pte: FxHashSet<u64>,
    pub frames: FramePool,
    /// The asynchronous consolidation queue, oldest first.
    pub queue: VecDeque<u64>,
    /// Pages the running transaction updated, in the order it first did.
    pub tx_pages: Vec<u64>,
    pub flushes: CpuFlushes,
    pub stats: OspStats,
}

impl State {
    /// The state of a machine whose page map is `pte` and that holds no page with two
    /// frames: every frame not mapped is free.
    pub fn new(layout: Layout, pte: Vec<u64>) -> Self {
        Self::with_used(layout, pte, &[])
    }

    /// Like [`State::new`], with the frames `named` in use too.
    pub fn with_used(layout: Layout, pte: Vec<u64>, named: &[u64]) -> Self {
        let mut used: FxHashSet<u64> = pte.iter().copied().collect();
        used.extend(named.iter().copied());
        let mut free: Vec<u64> = layout.frames().filter(|f| !used.contains(f)).collect();
        free.reverse();
        State {
            layout,
            pages: FxHashMap::default(),
            pte,
            dirty_pte: FxHashSet::default(),
            frames: FramePool::new(free),
            queue: VecDeque::new(),
            tx_pages: Vec::new(),
            flushes: CpuFlushes::default(),
            stats: OspStats::default(),
        }
    }

    /// The frame the page map gives `vpn`.
    pub fn pte_of(&self, vpn: u64) -> u64 {
        self.pte[(vpn - self.layout.first_vpn) as usize]
    }

    /// Physical address of line `line` of frame `pfn`.
    pub fn line_addr(pfn: u64, line: u64) -> u64 {
        pfn * PAGE + line * LINE
    }
}

impl State {
    /// Points the page map (its DRAM copy, and its word in NVM through the cache) at
    /// `frame` for `vpn`.
    pub fn write_pte(&mut self, m: &mut Machine, vpn: u64, frame: u64) {
        let i = (vpn - self.layout.first_vpn) as usize;
        self.pte[i] = frame;
        let at = self.layout.pte_addr(vpn);
        m.phys()
            .write_u64(at, frame)
            .expect("the page map lies inside the machine");
        self.dirty_pte.insert(at / LINE * LINE);
    }

    /// Writes back every page-map line changed since the last call (no fence); the
    /// flushes are counted to `source`.
    pub fn flush_pte_lines(&mut self, m: &mut Machine, source: Source) {
        let mut lines: Vec<u64> = self.dirty_pte.drain().collect();
        lines.sort_unstable();
        for &l in &lines {
            clwb(m, l);
        }
        self.flushes.add(source, lines.len() as u64);
    }
}

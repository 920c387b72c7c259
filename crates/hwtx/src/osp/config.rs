//! What an OSP machine is configured with, and the details paper 000 leaves open.

use pmlab_model::TlbConfig;

/// How the committed bitmaps of a multi-page transaction become durable atomically
/// (paper 000 §2.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Atomicity {
    /// The lightweight journal: one small record per updated page, drained once per
    /// commit ("For the rest of this paper, we assume lightweight journaling").
    Journal,
    /// The super page: the consistent state table lives in a page that is itself
    /// updated with OSP semantics and committed by one 8-byte store.
    SuperPage,
}

impl Atomicity {
    /// The name in results and on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Atomicity::Journal => "journal",
            Atomicity::SuperPage => "super-page",
        }
    }
}

/// When a page that left the TLB is consolidated (paper 000 §2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Consolidation {
    /// At once, in the TLB miss that evicted it (the paper's design).
    OnEviction,
    /// The paper's future work, asynchronous consolidation: an evicted page waits in a
    /// queue of `queue` pages (keeping both frames and its tuple); a page touched again
    /// while it waits goes back into the TLB as it was, with nothing copied. Between
    /// transactions a background engine consolidates the oldest waiting pages down to
    /// half the queue; a miss consolidates only when the queue is full.
    Async {
        /// Pages the queue holds.
        queue: usize,
    },
}

impl Consolidation {
    /// The name in results.
    pub fn name(self) -> String {
        match self {
            Consolidation::OnEviction => "on-eviction".into(),
            Consolidation::Async { queue } => format!("async-{queue}"),
        }
    }

    /// Pages the queue holds (0 without one).
    pub fn queue(self) -> usize {
        match self {
            Consolidation::OnEviction => 0,
            Consolidation::Async { queue } => queue,
        }
    }
}

/// OSP's deliberately broken variants, which the crash tests must catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OspFault {
    /// Commit makes the new committed bitmaps durable before the updated lines are:
    /// the lines are written back only after the journal (or super page) commit.
    CommitBeforeData,
    /// The consistent state table is not updated when a page is evicted: the page is
    /// consolidated and its source frame freed, but its tuple stays as it was.
    StaleTableOnEviction,
    /// Consolidation copies each line from the frame that does not hold its committed
    /// version.
    CopyFromWrongPage,
}

impl OspFault {
    /// Every variant.
    pub const ALL: [OspFault; 3] = [
        OspFault::CommitBeforeData,
        OspFault::StaleTableOnEviction,
        OspFault::CopyFromWrongPage,
    ];

    /// Its name on command lines.
    pub fn name(self) -> &'static str {
        match self {
            OspFault::CommitBeforeData => "commit-before-data",
            OspFault::StaleTableOnEviction => "stale-table-on-eviction",
            OspFault::CopyFromWrongPage => "copy-from-wrong-page",
        }
    }
}

/// An OSP machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OspConfig {
    /// The TLB whose entries carry the two frames and bitmaps. Paper 000 §3.1: "64-entry
    /// L1 DTLB"; its simulator, McSimA+, models L1 TLBs as fully associative with LRU
    /// replacement and no second level, so the L1 DTLB is the last-level TLB whose
    /// evictions trigger consolidation.
    pub tlb: TlbConfig,
    /// Multi-page atomicity.
    pub atomicity: Atomicity,
    /// When evicted pages are consolidated.
    pub consolidation: Consolidation,
    /// Records the journal holds (one 64-byte line each) before a checkpoint rewrites
    /// the table and lets it start over. Not in the paper; [`OspConfig::paper`] gives
    /// the journal 1 MiB (16,384 records), the area the undo log it is compared with
    /// gets, so that a checkpoint comes every few thousand transactions.
    pub journal_lines: u64,
    /// Pages a transaction may update beyond those the TLB and the queue hold (pages
    /// that leave the TLB with uncommitted lines wait, unconsolidated, for the
    /// commit): together they size the pool of spare frames.
    pub max_tx_pages: u64,
    /// A deliberately broken variant (crash tests only).
    pub fault: Option<OspFault>,
}

impl OspConfig {
    /// Paper 000's machine: a 64-entry fully associative LRU TLB, the lightweight
    /// journal, consolidation on eviction.
    pub fn paper() -> Self {
        OspConfig {
            tlb: TlbConfig {
                entries: 64,
                assoc: 64,
                tagged: true,
                walk_cycles: 30,
            },
            atomicity: Atomicity::Journal,
            consolidation: Consolidation::OnEviction,
            journal_lines: 16_384,
            max_tx_pages: 64,
            fault: None,
        }
    }

    /// A machine for crash tests: a TLB of `entries` entries (so that pages are evicted
    /// and consolidated in nearly every transaction) and a short journal (so that
    /// checkpoints happen too).
    pub fn small(entries: u64) -> Self {
        OspConfig {
            tlb: TlbConfig {
                entries,
                assoc: entries,
                tagged: true,
                walk_cycles: 30,
            },
            journal_lines: 24,
            max_tx_pages: 16,
            ..Self::paper()
        }
    }

    /// Spare frames: one second frame for every page that may hold two (in the TLB,
    /// in the queue, evicted inside a transaction), plus frames waiting to be freed.
    pub fn spare_frames(&self) -> u64 {
        let two = self.tlb.entries + self.consolidation.queue() as u64 + self.max_tx_pages;
        two + two / 2 + 4
    }
}

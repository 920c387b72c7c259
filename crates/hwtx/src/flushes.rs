//! CPU flushes as paper 000 counts them (§3.1): "we use CPU flushes to represent cache
//! flushes (e.g., data) as well as write-combining buffer flushes (e.g., uncacheable
//! log)". A cache flush is one `clwb` of one line; a write-combining buffer flush is one
//! drain of the buffers (the fence after a log entry's or a journal group's
//! non-temporal stores), whatever number of 64-byte buffers it empties — so that a log
//! entry of 64 bytes of data plus its address costs one CPU flush, as the paper's
//! hardware undo log does. [`CpuFlushes::wc_lines`] keeps the other count (one per
//! 64-byte buffer) for whoever prefers it.

/// Where a CPU flush came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Persisting the transaction's new data (both protocols).
    Data,
    /// The undo log's entries (one drain per entry).
    Log,
    /// Marking an undo transaction committed (or finished).
    Commit,
    /// OSP's journal (or super page): making the new committed bitmaps durable, and
    /// the checkpoints that let the journal be reused.
    Journal,
    /// OSP's page consolidation: the lines copied when a page leaves the TLB, and
    /// what makes the page's new mapping durable.
    Consolidation,
}

/// CPU flushes by source, and write-combining buffers drained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuFlushes {
    /// Data flushes.
    pub data: u64,
    /// Undo-log entry drains.
    pub log: u64,
    /// Undo commit marks.
    pub commit: u64,
    /// OSP journal flushes.
    pub journal: u64,
    /// OSP consolidation flushes.
    pub consolidation: u64,
    /// 64-byte write-combining buffers drained (the finer count of the same drains).
    pub wc_lines: u64,
}

impl CpuFlushes {
    /// Counts `n` flushes from `source`.
    pub fn add(&mut self, source: Source, n: u64) {
        *self.slot(source) += n;
    }

    fn slot(&mut self, source: Source) -> &mut u64 {
        match source {
            Source::Data => &mut self.data,
            Source::Log => &mut self.log,
            Source::Commit => &mut self.commit,
            Source::Journal => &mut self.journal,
            Source::Consolidation => &mut self.consolidation,
        }
    }

    /// Every CPU flush.
    pub fn total(&self) -> u64 {
        self.data + self.log + self.commit + self.journal + self.consolidation
    }

    /// The flushes since `earlier` (a snapshot of the same counters).
    pub fn since(&self, earlier: &CpuFlushes) -> CpuFlushes {
        CpuFlushes {
            data: self.data - earlier.data,
            log: self.log - earlier.log,
            commit: self.commit - earlier.commit,
            journal: self.journal - earlier.journal,
            consolidation: self.consolidation - earlier.consolidation,
            wc_lines: self.wc_lines - earlier.wc_lines,
        }
    }
}

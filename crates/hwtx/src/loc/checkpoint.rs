//! Checkpoints and log truncation: when the Tx State Table is full (128 transactions)
//! or the log has no room, the oldest persistent windows are finished — every version
//! of theirs still owed home (dirty in the cache, or evicted and owed) is written home —
//! and once those writes are done the log head moves past their groups.

use pmlab_spine::LINE;

use super::{HwWal, TRACKED_TXS};
use crate::engine::HwError;
use crate::ledger::Wait;
use crate::wal::format::Head;

impl HwWal {
    fn tracked_txs(&self) -> u64 {
        let persistent: u64 = self.tracked.iter().map(|t| t.end_hw - t.first_hw).sum();
        persistent + (self.next_hw - self.window.first_hw)
    }

    /// Before a new transaction ID: frees half the table if it is full.
    pub(super) fn ensure_tracking_room(&mut self) -> Result<(), HwError> {
        if self.tracked_txs() < TRACKED_TXS {
            return Ok(());
        }
        let mut keep = self.tracked_txs();
        let mut n = 0;
        for t in &self.tracked {
            if keep < TRACKED_TXS / 2 {
                break;
            }
            keep -= t.end_hw - t.first_hw;
            n += 1;
        }
        self.checkpoint(n)
    }

    /// The log is full: finishes every persistent window.
    pub(super) fn checkpoint_for_space(&mut self) -> Result<(), HwError> {
        let n = self.tracked.len();
        self.checkpoint(n)
    }

    /// A clean shutdown's: every persistent window.
    pub(super) fn checkpoint_all(&mut self) -> Result<(), HwError> {
        let n = self.tracked.len();
        self.checkpoint(n)
    }

    /// Finishes the `n` oldest persistent windows and truncates the log past them.
    fn checkpoint(&mut self, n: usize) -> Result<(), HwError> {
        if n == 0 {
            return Ok(());
        }
        self.stats.checkpoints += 1;
        let last = self.tracked[n - 1].end_hw - 1;
        self.home_cached_versions(last);
        self.home_owed_versions(last);
        let done = self
            .tracked
            .iter()
            .take(n)
            .map(|t| t.home_done)
            .max()
            .unwrap_or(0);
        self.core.persist_wait(done, Wait::Checkpoint);
        let (start_seq, base_tx) = match self.tracked.get(n) {
            Some(t) => (t.first_seq, t.first_hw),
            None => (self.window.first_seq, self.window.first_hw),
        };
        let now = self.core.m.cycles();
        let d = self
            .log
            .write_head(&mut self.core.m, now, Head { start_seq, base_tx });
        self.core.persist_wait(d, Wait::Checkpoint);
        self.stats.barriers += 2;
        self.tracked.drain(..n);
        Ok(())
    }

    /// Writes home every cached dirty version of a transaction up to `last` (they are
    /// persistent), leaving the lines cached and clean.
    fn home_cached_versions(&mut self, last: u64) {
        for w in 0..self.core.h.llc_ways() {
            let Some(line) = self.core.h.line_of(w) else {
                continue;
            };
            let meta = *self.core.h.meta(w);
            if !meta.dirty || meta.txdirty || meta.tx > last {
                continue;
            }
            let data = if meta.old {
                self.versions[&(line, meta.tx)]
            } else {
                self.core.line_data(line)
            };
            self.write_home(line, meta.tx, &data);
            self.core.h.meta_mut(w).dirty = false;
        }
    }

    /// Writes home, read back from the log, the newest version owed of each line whose
    /// transaction is at most `last`. Safe beside newer versions: a newer cached or
    /// owed version has not reached home yet (writing a version home drops every older
    /// one owed), so it lands after this one.
    fn home_owed_versions(&mut self, last: u64) {
        let mut due: Vec<(u64, u64)> = Vec::new();
        for &(line, tx) in self.owed.keys() {
            if tx > last {
                continue;
            }
            match due.last_mut() {
                Some(d) if d.0 == line => d.1 = tx,
                _ => due.push((line, tx)),
            }
        }
        for (line, tx) in due {
            let data = self.owed[&(line, tx)];
            let now = self.core.m.cycles();
            let ready = self
                .core
                .m
                .port_read(now, self.log.layout().group_addr(line) + LINE);
            self.write_home_at(line, tx, &data, ready);
        }
    }
}

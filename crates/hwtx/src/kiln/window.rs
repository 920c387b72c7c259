//! Commit, windows and abort of Kiln and LOC-Kiln.

use super::Kiln;
use crate::engine::HwError;
use crate::ledger::Wait;

impl Kiln {
    pub(super) fn commit_active(&mut self) -> Result<Option<u64>, HwError> {
        let a = self
            .active
            .take()
            .expect("the interface checks a transaction runs");
        let Some(hw) = a.hw else { return Ok(None) };
        // Versions of earlier transactions of the window this one superseded: the
        // window commits as a whole, so they are never needed again.
        for &line in &a.lines {
            for w in self.core.h.old_versions(line) {
                let tx = self.core.h.meta(w).tx;
                if self.uncommitted(tx) {
                    self.record(self.mirror.way(w), None);
                    self.core.h.drop_way(w);
                    self.stats.coalesced_blocks += 1;
                }
            }
        }
        self.window.push((hw, a.lines));
        self.stats.write_commits += 1;
        if self.window.len() as u32 >= self.sd {
            self.end_window()?;
        }
        Ok(Some(hw))
    }

    /// Flushes the window's lines from L1/L2 into the NV-LLC, waits, writes the commit
    /// register past the window, waits.
    pub(super) fn end_window(&mut self) -> Result<(), HwError> {
        let Some(&(last, _)) = self.window.last() else {
            return Ok(());
        };
        let window = std::mem::take(&mut self.window);
        let mut lines: Vec<u64> = window.iter().flat_map(|(_, l)| l.iter().copied()).collect();
        lines.sort_unstable();
        lines.dedup();
        let dirty: Vec<u64> = lines
            .iter()
            .copied()
            .filter(|&l| {
                self.core
                    .h
                    .newest(l)
                    .is_some_and(|w| self.core.h.meta(w).vdirty)
            })
            .collect();
        if self.no_wait {
            self.set_register(last);
        }
        let now = self.core.m.cycles();
        let n = dirty.len() as u64;
        let flushed = if self.serial {
            now + n * self.core.llc_cycles()
        } else {
            now + self.core.llc_cycles() + n
        };
        for &line in &dirty {
            self.demote(line)?;
        }
        if !self.no_wait {
            self.core.persist_wait(flushed, Wait::Commit);
            self.set_register(last);
            let done = self.core.m.cycles() + self.core.llc_cycles();
            self.core.persist_wait(done, Wait::Commit);
            self.stats.barriers += 2;
        }
        self.committed(&lines);
        self.stats.windows += 1;
        Ok(())
    }

    fn set_register(&mut self, last: u64) {
        self.reg = last;
        let head = self.mirror.head(last);
        self.core.m.nv_write(self.mirror.base, &head);
    }

    /// The window's versions are committed: unpin them, and drop the older committed
    /// versions they supersede.
    fn committed(&mut self, lines: &[u64]) {
        for &line in lines {
            if let Some(w) = self.core.h.newest(line)
                && !self.uncommitted(self.core.h.meta(w).tx)
            {
                self.core.h.meta_mut(w).txdirty = false;
                for o in self.core.h.old_versions(line) {
                    self.record(self.mirror.way(o), None);
                    self.core.h.drop_way(o);
                }
            }
        }
    }

    pub(super) fn abort_active(&mut self) -> Result<(), HwError> {
        let a = self
            .active
            .take()
            .expect("the interface checks a transaction runs");
        self.stats.aborts += 1;
        let Some(hw) = a.hw else { return Ok(()) };
        for &line in &a.lines {
            let Some(w) = self.core.h.newest(line) else {
                continue;
            };
            let meta = *self.core.h.meta(w);
            if meta.vdirty && meta.vtx == hw {
                self.core.h.invalidate_upper(line);
                let m = self.core.h.meta_mut(w);
                m.vdirty = false;
                m.vtx = m.tx;
            }
            if meta.tx == hw && meta.dirty {
                self.record(self.mirror.way(w), None);
                let older = self.core.h.old_versions(line);
                self.core.h.drop_way(w);
                if let Some(&o) = older.first() {
                    self.core.h.meta_mut(o).old = false;
                }
            }
        }
        for (line, before) in a.undo.iter().rev() {
            self.core.set_view(line * pmlab_spine::LINE, before);
        }
        // Its versions are gone from the NV-LLC: the next transaction takes its ID.
        self.next_hw = hw;
        Ok(())
    }
}

//! `TxAbort`: the running transaction's versions leave the cache, the versions they
//! superseded become the newest again, and the coherent image is restored. If some of
//! its blocks already reached the log, an abort record tells recovery to skip its ID
//! (which is then not reused); otherwise the next transaction takes the same ID.

use super::HwWal;
use crate::engine::HwError;
use crate::wal::format::Record;

impl HwWal {
    pub(super) fn abort_active(&mut self) -> Result<(), HwError> {
        let a = self
            .active
            .take()
            .expect("the interface checks a transaction runs");
        self.stats.aborts += 1;
        let Some(hw) = a.hw else { return Ok(()) };
        for &line in &a.lines {
            if let Some(w) = self.core.h.newest(line)
                && self.core.h.meta(w).tx == hw
            {
                self.core.h.drop_way(w);
            }
            for w in self.core.h.old_versions(line) {
                let tx = self.core.h.meta(w).tx;
                self.versions.remove(&(line, tx));
                self.core.h.meta_mut(w).old = false;
            }
            self.owed.remove(&(line, hw));
        }
        for (line, before) in a.undo.iter().rev() {
            self.core.set_view(line * pmlab_spine::LINE, before);
        }
        if a.logged > 0 {
            let now = self.core.m.cycles();
            if !self.log.fits(0, 1) {
                self.checkpoint_for_space()?;
            }
            self.log
                .add_records(&mut self.core.m, now, &[Record::Abort { tx: hw }])
                .map_err(|_| HwError::LogFull)?;
        } else {
            self.next_hw = hw;
        }
        Ok(())
    }
}

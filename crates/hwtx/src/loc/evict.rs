//! Lines the LLC gives up: a version not yet in the log goes to the log (whoever wrote
//! it: the running transaction, a committed one of the window, or an older version
//! crowded out of its set — version overflow); a persistent version goes home; a
//! logged one whose transaction is not yet persistent is owed home until it is.

use pmlab_spine::LINE;

use super::HwWal;
use crate::engine::HwError;
use crate::hierarchy::Evicted;

impl HwWal {
    /// Handles every line the hierarchy gave up.
    pub(super) fn drain(&mut self) -> Result<(), HwError> {
        while let Some(e) = self.core.h.take_evicted() {
            self.evicted(e)?;
        }
        Ok(())
    }

    fn evicted(&mut self, e: Evicted) -> Result<(), HwError> {
        let (line, meta) = (e.line, e.meta);
        let data = if meta.old {
            self.versions
                .remove(&(line, meta.tx))
                .expect("an older version's bytes are kept")
        } else {
            self.core.line_data(line)
        };
        if meta.txdirty {
            if meta.old {
                self.stats.version_overflows += 1;
            }
            self.log_evicted(meta.tx, line, &data)?;
            self.owed.insert((line, meta.tx), data);
        } else if meta.dirty {
            if meta.tx <= self.durable_hw {
                self.write_home(line, meta.tx, &data);
            } else {
                self.owed.insert((line, meta.tx), data);
            }
        }
        Ok(())
    }

    /// Writes an evicted, not yet logged block of transaction `tx` to the log.
    fn log_evicted(&mut self, tx: u64, line: u64, data: &[u8; 64]) -> Result<(), HwError> {
        if !self.log.fits(1, 0) {
            self.checkpoint_for_space()?;
        }
        let now = self.core.m.cycles();
        let seq = self.log.next_seq();
        self.log
            .add_line(&mut self.core.m, now, tx, 0, line, data)
            .map_err(|_| HwError::LogFull)?;
        self.stats.log_lines += 1;
        self.stats.evicted_log_lines += 1;
        let bpl = self.bpl();
        if let Some(a) = self.active.as_mut().filter(|a| a.hw == Some(tx)) {
            a.logged += bpl;
            a.first_seq.get_or_insert(seq);
        } else if let Some(t) = self.window.txs.iter_mut().find(|t| t.hw == tx) {
            t.logged += bpl;
        } else {
            unreachable!(
                "a version not yet logged belongs to the window or the running transaction"
            );
        }
        Ok(())
    }

    /// Writes version `tx` of `line` home (it is persistent): every older version still
    /// owed is superseded.
    pub(super) fn write_home(&mut self, line: u64, tx: u64, data: &[u8; 64]) {
        let now = self.core.m.cycles();
        self.write_home_at(line, tx, data, now);
    }

    /// [`HwWal::write_home`], issued at cycle `at`; returns the write's completion.
    pub(super) fn write_home_at(&mut self, line: u64, tx: u64, data: &[u8; 64], at: u64) -> u64 {
        let done = self.core.m.port_write(at, line * LINE, data);
        self.stats.home_writes += 1;
        let stale: Vec<(u64, u64)> = self
            .owed
            .range((line, 0)..=(line, tx))
            .map(|(k, _)| *k)
            .collect();
        for k in stale {
            self.owed.remove(&k);
        }
        if let Some(t) = self
            .tracked
            .iter_mut()
            .find(|t| t.first_hw <= tx && tx < t.end_hw)
        {
            t.home_done = t.home_done.max(done);
        }
        done
    }
}

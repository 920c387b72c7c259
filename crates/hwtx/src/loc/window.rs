//! Commit and speculation windows: `TxCommit` drops the older versions the transaction
//! superseded (coalescing those not yet logged, with a dependency pair), the end of a
//! window logs every block of its transactions still in the cache, and the window's
//! completion makes its transactions persistent and their evicted lines owed home.

use std::collections::{BTreeMap, HashMap};

use super::{HwWal, Tracked, WinTx, Window};
use crate::engine::HwError;
use crate::ledger::Wait;
use crate::wal::format::Record;
use crate::wal::recovery::CommitRule;

impl HwWal {
    pub(super) fn commit_active(&mut self) -> Result<Option<u64>, HwError> {
        let a = self
            .active
            .take()
            .expect("the interface checks a transaction runs");
        let Some(hw) = a.hw else { return Ok(None) };
        let bpl = self.bpl();
        let tx = WinTx {
            hw,
            lines: a.lines,
            logged: a.logged,
            coalesced: 0,
            pairs: BTreeMap::new(),
        };
        for i in 0..tx.lines.len() {
            let line = tx.lines[i];
            for w in self.core.h.old_versions(line) {
                let old = *self.core.h.meta(w);
                let data = self
                    .versions
                    .remove(&(line, old.tx))
                    .expect("an older version's bytes are kept");
                if old.txdirty {
                    // Never logged: this transaction's version carries it.
                    let t = self.win_tx(old.tx);
                    t.coalesced += bpl;
                    *t.pairs.entry(hw).or_insert(0) += bpl;
                    self.stats.coalesced_blocks += u64::from(bpl);
                } else if old.dirty && old.tx <= self.durable_hw {
                    // Persistent but not home: owed until this version is persistent.
                    self.owed.insert((line, old.tx), data);
                }
                self.core.h.drop_way(w);
            }
        }
        self.stats.write_commits += 1;
        self.window.txs.push(tx);
        if self.window.txs.len() as u32 >= self.cfg.sd {
            self.end_window()?;
        }
        Ok(Some(hw))
    }

    fn win_tx(&mut self, hw: u64) -> &mut WinTx {
        self.window
            .txs
            .iter_mut()
            .find(|t| t.hw == hw)
            .expect("an unlogged version belongs to the window")
    }

    /// Logs every block of the window still in the cache (with each transaction's
    /// count on its last block, or in a count record), its dependency pairs, and (for
    /// H-WAL) the commit record after the blocks are persistent.
    pub(super) fn end_window(&mut self) -> Result<(), HwError> {
        let plan = self.window_blocks();
        let lines: u64 = plan.iter().map(|(_, v)| v.len() as u64).sum();
        let pairs: u64 = self.window.txs.iter().map(|t| t.pairs.len() as u64).sum();
        if !self.log.fits(lines, pairs + self.window.txs.len() as u64) {
            self.checkpoint_for_space()?;
            if !self.log.fits(lines, pairs + self.window.txs.len() as u64) {
                return Err(HwError::LogFull);
            }
        }
        let bpl = self.bpl();
        let mut at = self.core.m.cycles();
        let mut records = Vec::new();
        for (i, (_, ways)) in plan.iter().enumerate() {
            let t = &self.window.txs[i];
            let (hw, base) = (t.hw, u64::from(t.logged + t.coalesced));
            let cnt = base + u64::from(bpl) * ways.len() as u64;
            let cnt = u16::try_from(cnt).map_err(|_| HwError::TooManyBlocks(cnt))?;
            for (k, &(line, w)) in ways.iter().enumerate() {
                let meta = *self.core.h.meta(w);
                let data = if meta.old {
                    self.versions[&(line, meta.tx)]
                } else {
                    self.core.line_data(line)
                };
                let c = if k + 1 == ways.len() { cnt } else { 0 };
                self.log
                    .add_line(&mut self.core.m, at, hw, c, line, &data)
                    .map_err(|_| HwError::LogFull)?;
                self.core.h.meta_mut(w).txdirty = false;
                self.stats.log_lines += 1;
                at += 1;
            }
            if ways.is_empty() {
                records.push(Record::Count { tx: hw, cnt });
            }
            for (&ty, &n) in &self.window.txs[i].pairs {
                let n = u16::try_from(n).map_err(|_| HwError::TooManyBlocks(n.into()))?;
                records.push(Record::Pair { tx: hw, ty, n });
            }
        }
        if self.cfg.rule == CommitRule::Record {
            records.clear();
        }
        if !records.is_empty() {
            self.log
                .add_records(&mut self.core.m, at, &records)
                .map_err(|_| HwError::LogFull)?;
        }
        let done = self.log.flush(&mut self.core.m, at);
        self.window.ended = true;
        self.window.done_at = done;
        self.stats.windows += 1;
        if self.cfg.rule == CommitRule::Record {
            self.commit_records()?;
        }
        Ok(())
    }

    /// H-WAL: wait for the blocks, write the commit record, wait for it.
    fn commit_records(&mut self) -> Result<(), HwError> {
        self.core.persist_wait(self.window.done_at, Wait::Commit);
        let recs: Vec<Record> = self
            .window
            .txs
            .iter()
            .map(|t| Record::Commit { tx: t.hw })
            .collect();
        let now = self.core.m.cycles();
        self.log
            .add_records(&mut self.core.m, now, &recs)
            .map_err(|_| HwError::LogFull)?;
        let done = self.log.flush(&mut self.core.m, now);
        self.core.persist_wait(done, Wait::Commit);
        self.stats.barriers += 2;
        self.window.done_at = done;
        self.complete_window()
    }

    /// The LLC ways of each window transaction's versions not yet logged.
    fn window_blocks(&self) -> Vec<(u64, Vec<(u64, usize)>)> {
        self.window
            .txs
            .iter()
            .map(|t| {
                let mut ways = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for &line in &t.lines {
                    if !seen.insert(line) {
                        continue;
                    }
                    let newest = self
                        .core
                        .h
                        .newest(line)
                        .filter(|&w| self.core.h.meta(w).tx == t.hw);
                    let w = newest.or_else(|| self.core.h.old_version(line, t.hw));
                    if let Some(w) = w.filter(|&w| self.core.h.meta(w).txdirty) {
                        ways.push((line, w));
                    }
                }
                (t.hw, ways)
            })
            .collect()
    }

    /// The window's writes are persistent: its transactions are committed
    /// (`LastCommittedTxID`), its versions that left the cache are written home (read
    /// back from the log), and every older version they supersede is no longer owed.
    pub(super) fn complete_window(&mut self) -> Result<(), HwError> {
        let w = std::mem::take(&mut self.window);
        if let Some(last) = w.txs.last() {
            self.durable_hw = last.hw;
        }
        // A running transaction that already holds an ID (a TxFlush inside it) opens
        // the next window, with the groups its evicted blocks went to.
        let (next_hw, next_seq) = match self.active.as_ref() {
            Some(a) if a.hw.is_some() => (
                a.hw.expect("checked"),
                a.first_seq.unwrap_or(self.log.next_seq()),
            ),
            _ => (self.next_hw, self.log.next_seq()),
        };
        self.tracked.push_back(Tracked {
            first_hw: w.first_hw,
            end_hw: next_hw,
            first_seq: w.first_seq,
            home_done: 0,
        });
        let mut newest: HashMap<u64, u64> = HashMap::new();
        for t in &w.txs {
            for &line in &t.lines {
                newest.insert(line, t.hw);
            }
        }
        let mut lines: Vec<(u64, u64)> = newest.into_iter().collect();
        lines.sort_unstable();
        let mut home_done = self.core.m.cycles();
        for &(line, hw) in &lines {
            let superseded: Vec<(u64, u64)> = self
                .owed
                .range((line, 0)..(line, hw))
                .map(|(k, _)| *k)
                .collect();
            for k in superseded {
                self.owed.remove(&k);
            }
            if let Some(data) = self.owed.remove(&(line, hw)) {
                let now = self.core.m.cycles();
                let ready = self.core.m.port_read(now, self.log_line_of(line));
                home_done = home_done.max(self.write_home_at(line, hw, &data, ready));
            }
        }
        self.window = Window {
            first_hw: next_hw,
            first_seq: next_seq,
            ..Window::default()
        };
        let in_place = if self.cfg.sd == 1 {
            self.cfg.ordered_in_place
        } else {
            self.cfg.window_in_place
        };
        if in_place {
            self.order_in_place(&lines, home_done);
        }
        Ok(())
    }

    /// Strict WAL's in-place phase (see [`crate::HwConfig::ordered_in_place`]): writes
    /// home every line of the persistent transaction still dirty in the cache (one
    /// after another when persistence is serialized) and waits for them and for the
    /// home writes of its evicted lines (complete by `home_done`).
    fn order_in_place(&mut self, lines: &[(u64, u64)], home_done: u64) {
        let mut done = home_done;
        for &(line, hw) in lines {
            let Some(w) = self.core.h.newest(line) else {
                continue;
            };
            let m = *self.core.h.meta(w);
            if m.tx != hw || !m.dirty || m.txdirty {
                continue;
            }
            let data = self.core.line_data(line);
            // Windows of more than one transaction are serialized only under
            // `serial_windows`.
            let at = if self.cfg.serial_log() {
                done
            } else {
                self.core.m.cycles()
            };
            done = done.max(self.write_home_at(line, hw, &data, at));
            self.core.h.meta_mut(w).dirty = false;
        }
        self.core.persist_wait(done, Wait::InPlace);
        self.stats.barriers += 1;
    }

    /// An address in the log to charge the read of a block of `line` to: the log's
    /// groups interleave over the banks like any lines, so any log line will do; the
    /// one at the line's offset keeps reads spread.
    fn log_line_of(&self, line: u64) -> u64 {
        let l = self.log.layout();
        l.group_addr(line) + pmlab_spine::LINE
    }
}

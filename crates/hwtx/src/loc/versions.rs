//! Stores into tagged lines: a transaction's first store to a line whose version is
//! dirty keeps that version in the LLC beside the new one (the multi-versioned cache);
//! a line refilled from memory takes up the home write its evicted version still owes.

use super::{Active, HwWal};
use crate::engine::HwError;
use crate::hierarchy::Meta;

impl HwWal {
    /// The running transaction's hardware ID, taken at its first store (making room in
    /// the Tx State Table first).
    fn tx_id(&mut self) -> Result<u64, HwError> {
        if let Some(hw) = self.active.as_ref().and_then(|a| a.hw) {
            return Ok(hw);
        }
        self.ensure_tracking_room()?;
        let hw = self.next_hw;
        self.next_hw += 1;
        self.active.get_or_insert_with(Active::default).hw = Some(hw);
        Ok(hw)
    }

    /// Tags `line` (just accessed) as written by the running transaction.
    pub(super) fn store_line(&mut self, line: u64) -> Result<(), HwError> {
        let hw = self.tx_id()?;
        let w = self
            .core
            .h
            .newest(line)
            .expect("the line was just accessed");
        let meta = *self.core.h.meta(w);
        let active = self.active.as_mut().expect("a transaction runs");
        if active.first.insert(line) {
            active.lines.push(line);
            let before = self.core.line_data(line);
            active.undo.push((line, before));
            if meta.dirty {
                // Keep the version this store supersedes until this transaction commits.
                let old = Meta { old: true, ..meta };
                self.versions.insert((line, meta.tx), before);
                self.core.h.alloc_version(line, old, Some(w))?;
                self.drain()?;
            }
        }
        *self.core.h.meta_mut(w) = Meta {
            tx: hw,
            dirty: true,
            txdirty: true,
            ..Meta::default()
        };
        Ok(())
    }

    /// `line` came back from memory: if a version of it left the cache still owed home,
    /// the newest such version is what the line now holds, and the cached line owes it.
    pub(super) fn refill(&mut self, line: u64) {
        let newest = self
            .owed
            .range((line, 0)..=(line, u64::MAX))
            .next_back()
            .map(|(&(_, tx), _)| tx);
        if let Some(tx) = newest {
            let data = self.owed.remove(&(line, tx)).expect("just found");
            debug_assert_eq!(
                data,
                self.core.line_data(line),
                "the newest version is the view"
            );
            let w = self.core.h.newest(line).expect("just filled");
            *self.core.h.meta_mut(w) = Meta {
                tx,
                dirty: true,
                ..Meta::default()
            };
        }
    }
}

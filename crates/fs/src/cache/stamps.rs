//! When what libFS's cache holds of each inode last changed.
//!
//! A reader under the state shared with the process's other threads reads inodes the
//! cache lacks from the mapping, and caches them afterwards (`client::shared`). What it
//! read may be cached exactly when it would still be cached had it been cached as it
//! was read: when nothing the cache has seen since would have dropped or rewritten it.
//! The cache stamps each such change with a tick: a clear of everything, a change of
//! an inode-table page (its whole group of inodes goes), and a rewrite or drop of one
//! inode or its page map. Other changes of the state (a hold of it that changed
//! nothing, a write of another file) then no longer keep a reader's finds out of the
//! cache, as any exclusive hold did before.

use rustc_hash::FxHashMap;

/// Stamps of groups and of inodes kept before they are folded into one stamp of
/// everything: a stamp is only ever too new, which refuses a find that could have
/// been cached, never the other way round.
const MAX_STAMPS: usize = 4096;

/// Ticks of the changes the cache saw.
#[derive(Default)]
pub(super) struct Stamps {
    /// The tick of the latest change.
    now: u64,
    /// The latest clear of everything.
    all: u64,
    /// By inode-table page (group), the latest change of it.
    groups: FxHashMap<u64, u64>,
    /// By inode, the latest rewrite or drop of it or its page map.
    inodes: FxHashMap<u64, u64>,
}

impl Stamps {
    /// The tick a read made now is as of.
    pub(super) fn now(&self) -> u64 {
        self.now
    }

    /// Everything changed.
    pub(super) fn everything(&mut self) {
        self.now += 1;
        self.all = self.now;
        self.groups.clear();
        self.inodes.clear();
    }

    /// Inode-table page `group` changed.
    pub(super) fn group(&mut self, group: u64) {
        Self::stamp(&mut self.now, &mut self.all, &mut self.groups, group);
    }

    /// Inode `ino`, or its page map, changed.
    pub(super) fn inode(&mut self, ino: u64) {
        Self::stamp(&mut self.now, &mut self.all, &mut self.inodes, ino);
    }

    fn stamp(now: &mut u64, all: &mut u64, map: &mut FxHashMap<u64, u64>, key: u64) {
        *now += 1;
        if map.len() >= MAX_STAMPS && !map.contains_key(&key) {
            // Folded: every find before now is refused, as after a clear.
            *all = *now;
            map.clear();
        } else {
            map.insert(key, *now);
        }
    }

    /// Whether inode `ino` of group `group` (and its page map) is unchanged since
    /// tick `tick`.
    pub(super) fn unchanged_since(&self, tick: u64, group: u64, ino: u64) -> bool {
        self.all <= tick
            && self.groups.get(&group).is_none_or(|&t| t <= tick)
            && self.inodes.get(&ino).is_none_or(|&t| t <= tick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_refuses_only_what_it_touched_and_only_finds_before_it() {
        let mut s = Stamps::default();
        let before = s.now();
        s.inode(7);
        assert!(!s.unchanged_since(before, 0, 7), "a rewritten inode");
        assert!(s.unchanged_since(before, 0, 8), "its neighbour");
        assert!(s.unchanged_since(s.now(), 0, 7), "a find after the change");
        let before = s.now();
        s.group(1);
        assert!(
            !s.unchanged_since(before, 1, 40),
            "an inode of a changed page"
        );
        assert!(s.unchanged_since(before, 0, 8), "an inode of another page");
        let before = s.now();
        s.everything();
        assert!(!s.unchanged_since(before, 0, 8), "anything, after a clear");
    }

    #[test]
    fn stamps_past_the_bound_fold_into_one_of_everything() {
        let mut s = Stamps::default();
        let before = s.now();
        for ino in 0..MAX_STAMPS as u64 {
            s.inode(ino);
        }
        assert!(s.unchanged_since(before, 0, u64::MAX), "not yet folded");
        s.inode(u64::MAX - 1);
        assert!(
            !s.unchanged_since(before, 0, u64::MAX),
            "folded, so refused"
        );
        assert!(s.inodes.is_empty(), "the map was emptied");
    }
}

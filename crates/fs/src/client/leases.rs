//! The leases a client holds, and a count of every time it lost one.
//!
//! libFS asks "does a lease cover this object?" several times per operation, and the
//! answer walks the object's ancestry through the table. A yes stays true until a
//! lease is given up (a new grant only adds cover, and never weakens a lease held), so
//! the state keeps the yeses it found ([`crate::cache::MetaCache`]) tagged with
//! [`LeaseTable::losses`]: the table is changed only through methods that count what
//! it loses, so no path can take a lease away and leave a stale yes behind. A lease
//! granted anew covers nothing until it is settled ([`LeaseTable::settle`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::{FxHashMap, FxHashSet};

/// Leases held: key -> (exclusive, grant number), with a count of losses.
#[derive(Default)]
pub struct LeaseTable {
    held: FxHashMap<u64, (bool, u64)>,
    /// Keys granted while no lease on them was held, not usable yet. Until the grant,
    /// other clients could change what they cover, and other threads of this client
    /// may have read pages holding it (an inode-table page also holds inodes of keys
    /// whose leases this client kept) into the overlay or the caches. The thread that
    /// asked settles them once it has shipped and forgotten what was read before
    /// (`Client::settle_grants`); meanwhile they cover nothing.
    unsettled: FxHashSet<u64>,
    /// Shared with [`LeaseTable::losses_counter`]'s holders, who read it without the
    /// table's lock (a cached read asks for it once per name it walks).
    losses: Arc<AtomicU64>,
}

impl LeaseTable {
    /// The lease on `key`: (exclusive, grant number).
    pub fn get(&self, key: &u64) -> Option<&(bool, u64)> {
        self.held.get(key)
    }

    /// Whether the lease on `key`, if any, is strong enough: exclusive, or any lease
    /// when `exclusive` is not asked for.
    pub fn covers(&self, key: u64, exclusive: bool) -> bool {
        self.held.get(&key).is_some_and(|&(e, _)| e || !exclusive)
            && (self.unsettled.is_empty() || !self.unsettled.contains(&key))
    }

    /// Every lease held.
    pub fn iter(&self) -> impl Iterator<Item = (&u64, &(bool, u64))> {
        self.held.iter()
    }

    /// Records a grant. A shared grant of a key held exclusively keeps it exclusive,
    /// as the service does (`Leases::grant`): another thread's shared request must not
    /// weaken the lease a thread records under.
    ///
    /// A grant of a key not held at all is unsettled: it covers nothing until
    /// [`LeaseTable::settle`]. A grant of a key held already is not (a shared lease
    /// held all along kept others from changing what it covers).
    pub fn insert(&mut self, key: u64, (exclusive, grant): (bool, u64)) {
        let held = match self.held.get(&key) {
            Some(&(e, _)) => e,
            None => {
                self.unsettled.insert(key);
                false
            }
        };
        self.held.insert(key, (exclusive || held, grant));
    }

    /// Makes the grants of `keys` usable (see [`LeaseTable::insert`]).
    pub fn settle(&mut self, keys: impl IntoIterator<Item = u64>) {
        for k in keys {
            self.unsettled.remove(&k);
        }
    }

    /// Gives up the lease on `key`.
    pub fn remove(&mut self, key: &u64) {
        self.unsettled.remove(key);
        if self.held.remove(key).is_some() {
            self.lose();
        }
    }

    /// Gives up every lease.
    pub fn clear(&mut self) {
        self.held.clear();
        self.unsettled.clear();
        self.lose();
    }

    /// Counts a loss, after the table changed.
    fn lose(&self) {
        self.losses.fetch_add(1, Ordering::SeqCst);
    }

    /// How many times a lease was lost: cover found at one count still holds while
    /// the count stays the same.
    pub fn losses(&self) -> u64 {
        self.losses.load(Ordering::SeqCst)
    }

    /// The count of losses itself, to read without the table's lock.
    pub fn losses_counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.losses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way of losing cover moves the count; gaining cover does not, and a shared
    /// grant of a key held exclusively does not weaken it.
    #[test]
    fn losses_count_every_lost_lease_and_grants_never_weaken() {
        let mut t = LeaseTable::default();
        t.insert(1, (false, 1));
        t.settle([1]);
        t.insert(1, (true, 2));
        assert_eq!(t.losses(), 0, "gaining cover is no loss");
        t.insert(1, (false, 3));
        assert_eq!(
            t.get(&1),
            Some(&(true, 3)),
            "a shared grant keeps it exclusive"
        );
        assert_eq!(t.losses(), 0, "and loses nothing");
        t.remove(&2);
        assert_eq!(t.losses(), 0, "removing nothing is no loss");
        t.remove(&1);
        assert_eq!(t.losses(), 1);
        t.insert(5, (true, 4));
        t.clear();
        assert_eq!(t.losses(), 2);
        assert!(t.get(&5).is_none());
    }

    /// A grant of a key not held covers nothing until settled; one of a key held
    /// already covers at once; giving a lease up forgets that it was unsettled.
    #[test]
    fn a_grant_of_a_key_not_held_covers_only_once_settled() {
        let mut t = LeaseTable::default();
        t.insert(7, (true, 1));
        assert!(!t.covers(7, false), "an unsettled grant covered its key");
        t.settle([7]);
        assert!(t.covers(7, true));
        t.insert(7, (false, 2));
        assert!(
            t.covers(7, true),
            "a grant of a key held already waited to settle"
        );
        t.remove(&7);
        t.insert(7, (false, 3));
        assert!(
            !t.covers(7, false),
            "a grant after a loss covered before it settled"
        );
        t.clear();
        t.insert(7, (false, 4));
        t.settle([7]);
        assert!(t.covers(7, false));
    }
}

//! Hierarchical leases: a lease on a directory covers everything below it.
//!
//! Shared leases are compatible with each other; an exclusive lease conflicts with any
//! other client's lease on the same object, on an object above it, or on one below it.
//! "Above" and "below" follow the parent fields of the inodes, read from the volume.

use rustc_hash::{FxHashMap, FxHashSet};
use std::time::Instant;

use crate::layout::ROOT_INO;
use crate::view::PageSource;

/// One client's hold on an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hold {
    /// The client.
    pub client: u64,
    /// Exclusive or shared.
    pub exclusive: bool,
    /// Number of this grant: a release or revocation names the grant it is about, so a
    /// late message about an old grant never cancels a newer one.
    pub grant: u64,
    /// When the holder was asked to give it up (None: it has not been). A holder is
    /// judged unresponsive by the time since its own revocation, not by how long the
    /// request it blocks has waited (which includes other holders' turns).
    pub revoked: Option<Instant>,
}

/// The lease table.
///
/// Indexed so that a conflict check costs what the request's own ancestry holds, not
/// the whole table: each held key keeps its ancestry (`chains`, computed when it was
/// first granted), and every key above a held one lists it (`below`). With fifty
/// clients each holding a lease per directory they work in, scanning every hold and
/// walking each one's ancestry on every request took the service seconds per request,
/// long enough to disconnect clients that had answered their revocations. A directory
/// that moves changes the ancestries below it, so the service rebuilds the index after
/// every batch that renames something ([`Leases::rechain`]).
#[derive(Default, Debug)]
pub struct Leases {
    held: FxHashMap<u64, Vec<Hold>>,
    /// Each held key's ancestry, itself excluded.
    chains: FxHashMap<u64, Vec<u64>>,
    /// For each key, the held keys below it.
    below: FxHashMap<u64, FxHashSet<u64>>,
    /// Holds per client.
    per_client: FxHashMap<u64, usize>,
    next_gen: u64,
}

/// Marks lease keys that name a bucket of a directory's hash table, not an inode.
const BUCKET_KEY: u64 = 1 << 63;
/// Marks lease keys that name the entries of a bucket only (see [`names_key`]).
const NAMES_KEY: u64 = 1 << 62;

/// The lease key of bucket `bucket` of directory `dir`'s hash table: the names in it
/// and the objects they name, with everything below them.
pub fn bucket_key(dir: u64, bucket: u64) -> u64 {
    BUCKET_KEY | (dir << 10) | bucket
}

/// The lease key of the names in bucket `bucket` of directory `dir`, without the
/// objects they name: what a path lookup reads. A shared lease on it keeps the names
/// as they are (an exclusive lease on the bucket, the directory or anything above
/// conflicts with it) and lets other clients change the objects named and everything
/// below them. Hierarchical leases alone would make every lookup hold a lease covering
/// the whole subtree below the name it read, so that two clients creating files in
/// one directory would take each other's leases on the way down (see
/// `crate::client`'s lease granularity).
pub fn names_key(dir: u64, bucket: u64) -> u64 {
    NAMES_KEY | (dir << 10) | bucket
}

/// The (directory, bucket) a lease key names, if it names a bucket.
pub fn bucket_of_key(key: u64) -> Option<(u64, u64)> {
    (key & BUCKET_KEY != 0).then_some(((key & !BUCKET_KEY) >> 10, key & 1023))
}

/// The (directory, bucket) whose names a lease key names, if it is a [`names_key`].
pub fn names_of_key(key: u64) -> Option<(u64, u64)> {
    (key & (BUCKET_KEY | NAMES_KEY) == NAMES_KEY).then_some(((key & !NAMES_KEY) >> 10, key & 1023))
}

/// The directory a bucket or names key belongs to, the inode an inode key names.
pub fn object_of_key(key: u64) -> u64 {
    bucket_of_key(key)
        .or_else(|| names_of_key(key))
        .map_or(key, |(d, _)| d)
}

/// Whether `key` names an inode of a table of `inodes`, or a bucket (or a bucket's
/// names) of one of them.
pub fn valid_key(key: u64, inodes: u64) -> bool {
    match bucket_of_key(key).or_else(|| names_of_key(key)) {
        Some((d, b)) => d > 0 && d < inodes && b < crate::dir::BUCKETS,
        None => key > 0 && key < inodes,
    }
}

/// The lease keys that cover `key`, from `key` up to the root: an object, the bucket of
/// its directory holding its name, that directory, and so on (bounded against loops).
/// A bucket's names lie below the bucket: `names(d, b)`, `bucket(d, b)`, `d`, ...
pub fn ancestry<S: PageSource + ?Sized>(src: &mut S, key: u64) -> Vec<u64> {
    let mut out = vec![key];
    if let Some((d, b)) = names_of_key(key) {
        out.push(bucket_key(d, b));
    }
    let mut x = match bucket_of_key(key).or_else(|| names_of_key(key)) {
        Some((d, _)) => {
            out.push(d);
            d
        }
        None => key,
    };
    while x != ROOT_INO && out.len() < 8192 {
        match src.inode(x) {
            Ok(i) if i.parent != 0 && i.parent != x => {
                out.push(bucket_key(i.parent, i.bucket as u64));
                x = i.parent;
                out.push(x);
            }
            _ => break,
        }
    }
    out
}

impl Leases {
    /// Whether `client` holds a lease on exactly `ino` at least as strong as asked.
    pub fn holds(&self, client: u64, ino: u64, exclusive: bool) -> bool {
        self.held.get(&ino).is_some_and(|v| {
            v.iter()
                .any(|h| h.client == client && (h.exclusive || !exclusive))
        })
    }

    /// Other clients' leases that conflict with `client` taking `key`, whose ancestry
    /// (as [`ancestry`] gives it, `key` first) is `up`: leases on `key`, above it or
    /// below it, of which one of the two is exclusive. As (holder, object, grant number).
    pub fn conflicts(&self, client: u64, up: &[u64], exclusive: bool) -> Vec<(u64, u64, u64)> {
        let key = up.first().copied().unwrap_or(0);
        let mut out = Vec::new();
        let mut check = |x: u64| {
            if let Some(holds) = self.held.get(&x) {
                for h in holds {
                    if h.client != client && (exclusive || h.exclusive) {
                        out.push((h.client, x, h.grant));
                    }
                }
            }
        };
        for &x in up {
            check(x);
        }
        if let Some(b) = self.below.get(&key) {
            for &x in b {
                check(x);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Records a grant of `key`, whose ancestry is `up` (`key` first), replacing a hold
    /// of the same client; returns its number. A shared grant to a client that holds
    /// the key exclusively keeps it exclusive: the threads of one process share its
    /// client, and one thread's shared request (a KVFS get) must not take away the
    /// exclusive lease another thread is recording under (its put's batch would be
    /// refused). libFS's lease table keeps the stronger lease the same way.
    pub fn grant(&mut self, client: u64, up: &[u64], exclusive: bool) -> u64 {
        let key = up.first().copied().unwrap_or(0);
        self.next_gen += 1;
        let grant = self.next_gen;
        let v = self.held.entry(key).or_default();
        let exclusive = exclusive || v.iter().any(|h| h.client == client && h.exclusive);
        let had = v.iter().any(|h| h.client == client);
        v.retain(|h| h.client != client);
        v.push(Hold {
            client,
            exclusive,
            grant,
            revoked: None,
        });
        if !had {
            *self.per_client.entry(client).or_insert(0) += 1;
        }
        if !self.chains.contains_key(&key) {
            self.index(key, up.get(1..).unwrap_or(&[]).to_vec());
        }
        grant
    }

    fn index(&mut self, key: u64, chain: Vec<u64>) {
        for &a in &chain {
            self.below.entry(a).or_default().insert(key);
        }
        self.chains.insert(key, chain);
    }

    fn unindex(&mut self, key: u64) {
        if let Some(chain) = self.chains.remove(&key) {
            for a in chain {
                if let Some(b) = self.below.get_mut(&a) {
                    b.remove(&key);
                    if b.is_empty() {
                        self.below.remove(&a);
                    }
                }
            }
        }
    }

    /// Rebuilds every held key's ancestry from the volume (after a batch that moved
    /// something: the ancestries below a moved directory changed).
    pub fn rechain<S: PageSource + ?Sized>(&mut self, src: &mut S) {
        let keys: Vec<u64> = self.held.keys().copied().collect();
        self.chains.clear();
        self.below.clear();
        for k in keys {
            let up = ancestry(src, k);
            self.index(k, up.get(1..).unwrap_or(&[]).to_vec());
        }
    }

    /// Marks grant `grant` on `ino` as revoked at `now`; false if it already was (or is
    /// gone).
    pub fn mark_revoking(&mut self, ino: u64, grant: u64, now: Instant) -> bool {
        match self
            .held
            .get_mut(&ino)
            .and_then(|v| v.iter_mut().find(|h| h.grant == grant))
        {
            Some(h) if h.revoked.is_none() => {
                h.revoked = Some(now);
                true
            }
            _ => false,
        }
    }

    /// When grant `grant` on `ino` was revoked, if it is held and was.
    pub fn revoked_at(&self, ino: u64, grant: u64) -> Option<Instant> {
        self.held
            .get(&ino)?
            .iter()
            .find(|h| h.grant == grant)?
            .revoked
    }

    /// Drops the holds `keep` rejects on `key`, keeping the index and counts in step.
    fn drop_holds(&mut self, key: u64, keep: impl Fn(&Hold) -> bool) {
        let Some(v) = self.held.get_mut(&key) else {
            return;
        };
        let mut gone = Vec::new();
        v.retain(|h| {
            let k = keep(h);
            if !k {
                gone.push(h.client);
            }
            k
        });
        let empty = v.is_empty();
        for c in gone {
            if let Some(n) = self.per_client.get_mut(&c) {
                *n -= 1;
                if *n == 0 {
                    self.per_client.remove(&c);
                }
            }
        }
        if empty {
            self.held.remove(&key);
            self.unindex(key);
        }
    }

    /// Drops `client`'s grant `grant` on `ino` (a late release of an older grant does nothing).
    pub fn release(&mut self, client: u64, ino: u64, grant: u64) {
        self.drop_holds(ino, |h| !(h.client == client && h.grant == grant));
    }

    /// Drops every client's leases on inode `ino` and on the buckets of its table: the
    /// inode was freed, and a lease left on its number would cover whatever object is
    /// given that number next.
    pub fn forget_key(&mut self, ino: u64) {
        let keys: Vec<u64> = self
            .held
            .keys()
            .copied()
            .filter(|&k| object_of_key(k) == ino)
            .collect();
        for k in keys {
            self.drop_holds(k, |_| false);
        }
    }

    /// Drops every lease of `client`.
    pub fn release_all(&mut self, client: u64) {
        let keys: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, v)| v.iter().any(|h| h.client == client))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.drop_holds(k, |h| h.client != client);
        }
    }

    /// Number of leases held by `client`.
    pub fn count(&self, client: u64) -> usize {
        self.per_client.get(&client).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index finds exactly what a scan of every hold would: leases above, on and
    /// below the key asked for, of other clients, one side exclusive.
    #[test]
    fn conflicts_follow_the_hierarchy() {
        let mut l = Leases::default();
        // Chains as `ancestry` gives them: 5 in 3 in 1, 4 in 1.
        let g3 = l.grant(7, &[3, 1], false);
        l.grant(8, &[5, 3, 1], true);
        l.grant(9, &[4, 1], false);
        // Client 9 wants 3 exclusive: 7's shared lease on 3, 8's lease below it.
        assert_eq!(l.conflicts(9, &[3, 1], true), vec![(7, 3, g3), (8, 5, 2)]);
        // Shared on 1 conflicts only with the exclusive lease below it.
        assert_eq!(l.conflicts(9, &[1], false), vec![(8, 5, 2)]);
        assert!(l.conflicts(8, &[5, 3, 1], false).is_empty());
        assert_eq!(l.count(7), 1);
        l.release(7, 3, g3);
        assert_eq!(l.count(7), 0);
        assert_eq!(l.conflicts(9, &[3, 1], true), vec![(8, 5, 2)]);
        // A shared grant to the holder of an exclusive lease keeps it exclusive.
        let g5 = l.grant(8, &[5, 3, 1], false);
        assert!(
            l.holds(8, 5, true),
            "a shared grant weakened an exclusive lease"
        );
        assert_eq!(l.conflicts(9, &[1], false), vec![(8, 5, g5)]);
        l.release_all(8);
        assert!(
            l.conflicts(9, &[1], true)
                .iter()
                .all(|c| c.0 == 9 || c.0 == 7)
        );
        assert_eq!(l.conflicts(1, &[1], true), vec![(9, 4, 3)]);
        l.forget_key(4);
        assert!(l.conflicts(1, &[1], true).is_empty());
        assert!(l.below.is_empty() && l.chains.is_empty() && l.per_client.is_empty());
    }
}

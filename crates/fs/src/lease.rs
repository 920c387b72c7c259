//! Hierarchical leases: a lease on a directory covers everything below it.
//!
//! Shared leases are compatible with each other; an exclusive lease conflicts with any
//! other client's lease on the same object, on an object above it, or on one below it.
//! "Above" and "below" follow the parent fields of the inodes, read from the volume.

use rustc_hash::FxHashMap;
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
#[derive(Default, Debug)]
pub struct Leases {
    held: FxHashMap<u64, Vec<Hold>>,
    next_gen: u64,
}

/// Marks lease keys that name a bucket of a directory's hash table, not an inode.
const BUCKET_KEY: u64 = 1 << 63;

/// The lease key of bucket `bucket` of directory `dir`'s hash table.
pub fn bucket_key(dir: u64, bucket: u64) -> u64 {
    BUCKET_KEY | (dir << 10) | bucket
}

/// The (directory, bucket) a lease key names, if it names a bucket.
pub fn bucket_of_key(key: u64) -> Option<(u64, u64)> {
    (key & BUCKET_KEY != 0).then_some(((key & !BUCKET_KEY) >> 10, key & 1023))
}

/// Whether `key` names an inode of a table of `inodes` or a bucket of one of them.
pub fn valid_key(key: u64, inodes: u64) -> bool {
    match bucket_of_key(key) {
        Some((d, b)) => d > 0 && d < inodes && b < crate::dir::BUCKETS,
        None => key > 0 && key < inodes,
    }
}

/// The lease keys that cover `key`, from `key` up to the root: an object, the bucket of
/// its directory holding its name, that directory, and so on (bounded against loops).
pub fn ancestry<S: PageSource + ?Sized>(src: &mut S, key: u64) -> Vec<u64> {
    let mut out = vec![key];
    let mut x = match bucket_of_key(key) {
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

    /// Other clients' leases that conflict with `client` taking `ino`:
    /// (holder, object, grant number).
    pub fn conflicts<S: PageSource + ?Sized>(
        &self,
        src: &mut S,
        client: u64,
        ino: u64,
        exclusive: bool,
    ) -> Vec<(u64, u64, u64)> {
        let up = ancestry(src, ino);
        let mut out = Vec::new();
        for (&x, holds) in &self.held {
            for h in holds {
                if h.client == client || !(exclusive || h.exclusive) {
                    continue;
                }
                if up.contains(&x) || ancestry(src, x).contains(&ino) {
                    out.push((h.client, x, h.grant));
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Records a grant (replacing a hold of the same client); returns its number.
    pub fn grant(&mut self, client: u64, ino: u64, exclusive: bool) -> u64 {
        self.next_gen += 1;
        let grant = self.next_gen;
        let v = self.held.entry(ino).or_default();
        v.retain(|h| h.client != client);
        v.push(Hold {
            client,
            exclusive,
            grant,
            revoked: None,
        });
        grant
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

    /// Drops `client`'s grant `grant` on `ino` (a late release of an older grant does nothing).
    pub fn release(&mut self, client: u64, ino: u64, grant: u64) {
        if let Some(v) = self.held.get_mut(&ino) {
            v.retain(|h| !(h.client == client && h.grant == grant));
            if v.is_empty() {
                self.held.remove(&ino);
            }
        }
    }

    /// Drops every client's leases on inode `ino` and on the buckets of its table: the
    /// inode was freed, and a lease left on its number would cover whatever object is
    /// given that number next.
    pub fn forget_key(&mut self, ino: u64) {
        self.held
            .retain(|&k, _| k != ino && bucket_of_key(k).is_none_or(|(d, _)| d != ino));
    }

    /// Drops every lease of `client`.
    pub fn release_all(&mut self, client: u64) {
        self.held.retain(|_, v| {
            v.retain(|h| h.client != client);
            !v.is_empty()
        });
    }

    /// Number of leases held by `client`.
    pub fn count(&self, client: u64) -> usize {
        self.held
            .values()
            .flatten()
            .filter(|h| h.client == client)
            .count()
    }
}

//! Answers from what libFS has cached, under the state shared with the process's other
//! threads: the reads of a many-threaded process (FileBench's 100 webserver threads)
//! then run side by side on the processors instead of one at a time.
//!
//! Each answer needs a lease known to cover what it reads (found covered since the
//! client last lost a lease, [`MetaCache::is_covered_as_of`]) and every name, inode
//! and page it uses cached; with anything missing it is `None`, and the caller takes
//! the state exclusively, which reads the media and fills the caches. Nothing here
//! changes the state but the table of opens (behind a lock of its own) and the count
//! of copies in flight (an atomic): a thread holding the state exclusively sees it as
//! if these reads never ran. A refusal (a directory the client may not search, a file
//! it may not read) is left to the exclusive path too, which words the error.
//!
//! [`MetaCache::is_covered_as_of`]: crate::cache::MetaCache::is_covered_as_of

use super::Client;
use super::copies::Copy;
use super::state::{SharedState, State, lock_shared};
use crate::inode::{Inode, Kind, access};
use crate::layout::ROOT_INO;

impl State {
    /// Whether the client's leases are known to cover `key` (exclusively, if
    /// `exclusive`) without walking anything.
    pub fn known_covered_shared(&self, key: u64, exclusive: bool) -> bool {
        self.cache
            .is_covered_as_of(self.conn.lease_losses(), key, exclusive)
    }

    /// Inode `ino`, if cached.
    pub fn cached_inode(&self, ino: u64) -> Option<Inode> {
        self.cache.inode(ino)
    }

    /// The object named `name` in directory `dino`, if the name is cached.
    pub fn cached_lookup(&self, dino: u64, name: &str) -> Option<u64> {
        self.names.get(&dino)?.get(name).copied()
    }

    /// The data pages of pages `first..=last` of file `ino` (inode `inode`, as cached),
    /// if every one of them is cached.
    pub fn cached_pages(&self, ino: u64, inode: &Inode, first: u64, last: u64) -> Option<Vec<u64>> {
        if inode.kind == Kind::Kv || self.cache.inode(ino) != Some(*inode) {
            return None;
        }
        self.cache.leaves(ino, first, last)
    }

    /// A copy through domain `d`'s mapping for a read or a write of `bytes`, if the
    /// client has mapped it and [`State::begin_copy`] would copy outside the state.
    pub fn shared_copy(&self, d: u16, write: bool, bytes: usize) -> Option<Copy> {
        if write && bytes < super::COPY_OUTSIDE_MIN {
            return None;
        }
        self.copy_through(d, write)
    }

    /// Whether cached directory `d` is one the client may search.
    fn searchable_cached(&self, d: u64) -> bool {
        self.cache.inode(d).is_some_and(|i| {
            let (uid, gid) = self.cred();
            i.kind == Kind::Dir && access(uid, gid, i.uid, i.gid, i.mode).exec
        })
    }
}

impl Client {
    /// Locks the state shared with the other threads that only read what is cached.
    pub fn state_shared(&self) -> SharedState<'_> {
        lock_shared(&self.state)
    }

    /// [`Client::resolve_parent`] of a path whose object exists, from the caches under
    /// the shared state `s`: (parent directory, last name, object), or `None` if any
    /// lease, name or directory inode on the way is not known or the walk is refused.
    pub fn resolve_cached<'p>(&self, s: &State, path: &'p str) -> Option<(u64, &'p str, u64)> {
        let rest = path.strip_prefix('/')?;
        let mut comps = rest.split('/').filter(|c| !c.is_empty()).peekable();
        let mut d = ROOT_INO;
        while let Some(c) = comps.next() {
            if !s.known_covered_shared(self.lookup_key(d, c), false) || !s.searchable_cached(d) {
                return None;
            }
            let o = s.cached_lookup(d, c)?;
            if comps.peek().is_none() {
                return Some((d, c, o));
            }
            d = o;
        }
        None
    }

    /// The object at `path` and its inode, from the caches under the shared state `s`,
    /// if the walk there ([`Client::resolve_cached`]), a lease known to cover the object
    /// (exclusively, if `exclusive`) and its inode are all cached.
    pub fn cached_object(&self, s: &State, path: &str, exclusive: bool) -> Option<(u64, Inode)> {
        let (_, _, ino) = self.resolve_cached(s, path)?;
        if !s.known_covered_shared(ino, exclusive) {
            return None;
        }
        Some((ino, s.cached_inode(ino)?))
    }
}

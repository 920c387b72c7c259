//! Answers from what libFS has cached, under the state shared with the process's other
//! threads: the reads of a many-threaded process (FileBench's 100 webserver threads)
//! then run side by side on the processors instead of one at a time.
//!
//! Each answer needs a lease known to cover what it reads (found covered since the
//! client last lost a lease, [`MetaCache::is_covered_as_of`]) and every name, inode
//! and page it uses cached or, while other threads use the client, read from the
//! mapping ([`Reach`]); with anything missing it is `None`, and the caller takes the
//! state exclusively, which reads the media and fills the caches. Nothing here changes
//! the state but the table of opens (behind a lock of its own), the count of copies in
//! flight (an atomic) and, through [`Client::remember`], the caches: a thread holding
//! the state exclusively sees it as if these reads never ran. A refusal (a directory
//! the client may not search, a file it may not read) is left to the exclusive path
//! too, which words the error.
//!
//! Reading the mapping, through the client's own overlay, is what the exclusive path
//! does too; under the shared state it fills no cache, for the caches change only
//! under the exclusive state. A first open or read of a file took the state alone to
//! fill them, and with a hundred threads each exclusive hold first drains every
//! reader (webserver x100 opens each of its 10,000 files for the first time once;
//! those opens and reads were most of the run's context switches). So a reader that
//! shares the client with other threads reads the mapping under the shared state, and
//! afterwards caches what it read if the state is free at once and nothing the cache
//! saw in between touched it ([`Client::remember`]). A thread alone takes the exclusive
//! path, which is as quick and caches as it reads.
//!
//! [`MetaCache::is_covered_as_of`]: crate::cache::MetaCache::is_covered_as_of

use std::sync::atomic::{AtomicUsize, Ordering};

use super::Client;
use super::copies::Copy;
use super::state::{SharedState, State, lock_shared};
use crate::error::Result;
use crate::inode::{Inode, Kind, access};
use crate::layout::ROOT_INO;
use crate::map::SharedReader;
use crate::overlay::Overlay;
use crate::view::{MediaView, PageSource};
use crate::{dir, radix};

/// Where an answer under the shared state may look for what it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The caches only.
    Caches,
    /// The caches, then the mapping through the client's overlay (what is read there
    /// is cached only through [`Client::remember`]).
    Mapping,
}

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

    /// Inode `ino` from the cache, or as far as `reach` allows.
    pub fn inode_within(&self, ino: u64, reach: Reach) -> Option<Inode> {
        self.cache.inode(ino).or_else(|| match reach {
            Reach::Caches => None,
            Reach::Mapping => self.read_mapped(|v| v.inode(ino)),
        })
    }

    /// [`State::inode_within`], noting in `found` an inode read from the mapping.
    fn inode_noting(&self, ino: u64, reach: Reach, found: &mut Vec<(u64, Inode)>) -> Option<Inode> {
        if let Some(i) = self.cache.inode(ino) {
            return Some(i);
        }
        let i = self.inode_within(ino, reach)?;
        found.push((ino, i));
        Some(i)
    }

    /// The object named `name` in directory `dino`, if the name is cached.
    pub fn cached_lookup(&self, dino: u64, name: &str) -> Option<u64> {
        self.names.get(&dino)?.get(name).copied()
    }

    /// The object named `name` in directory `dino` from the name cache, or as far as
    /// `reach` allows (`None` also for a name that does not exist).
    fn lookup_within(&self, dino: u64, name: &str, reach: Reach) -> Option<u64> {
        self.cached_lookup(dino, name).or_else(|| {
            let d = match reach {
                Reach::Caches => return None,
                Reach::Mapping => self.inode_within(dino, reach)?,
            };
            (d.kind == Kind::Dir)
                .then(|| self.read_mapped(|v| dir::lookup(v, d.root, name)))
                .flatten()
                .flatten()
        })
    }

    /// The data pages of pages `first..=last` of file `ino` (inode `inode`, as cached),
    /// if every one of them is cached.
    pub fn cached_pages(&self, ino: u64, inode: &Inode, first: u64, last: u64) -> Option<Vec<u64>> {
        if inode.kind == Kind::Kv || self.cache.inode(ino) != Some(*inode) {
            return None;
        }
        self.cache.leaves(ino, first, last)
    }

    /// The data pages of pages `first..=last` of a file whose inode is `inode` as the
    /// mapping and the overlay show it ([`State::inode_within`]), looked up in its tree
    /// there ([`Reach::Mapping`]).
    pub fn mapped_pages(&self, inode: &Inode, first: u64, last: u64) -> Option<Vec<u64>> {
        if inode.kind == Kind::Kv {
            return None;
        }
        self.read_mapped(|v| {
            (first..=last)
                .map(|i| radix::lookup(v, inode, i))
                .collect::<Result<Vec<u64>>>()
        })
    }

    /// Exclusive holds of the state so far.
    pub fn holds(&self) -> u64 {
        self.holds
    }

    /// The tick of the cache's latest change, which what is read from the mapping now
    /// is as of (see [`Client::remember`]).
    pub fn cache_tick(&self) -> u64 {
        self.cache.tick()
    }

    /// Caches inode `ino` as `inode`, read at cache tick `tick`, if nothing the cache
    /// saw since touched it, as the exclusive path caches what it reads (see
    /// [`Client::remember`]); whether it is cached as read now.
    fn remember_inode(&mut self, tick: u64, ino: u64, inode: &Inode) -> bool {
        if !self.cache.unchanged_since(tick, ino) {
            return false;
        }
        match self.cache.inode(ino) {
            None => self.cache.put_inode(ino, *inode),
            Some(cached) if cached != *inode => return false,
            Some(_) => {}
        }
        true
    }

    /// Runs `read` on a view of the mapping with the client's overlay laid over it,
    /// as the exclusive path's reads see it (torn pages re-read by the overlay), under
    /// the state shared; any error is `None`, left for the exclusive path to word.
    fn read_mapped<T>(
        &self,
        read: impl FnOnce(&mut MediaView<'_, Overlay<'_, SharedReader<'_>>>) -> Result<T>,
    ) -> Option<T> {
        let mut m = SharedReader(self.meta_map());
        let mut o = Overlay::with_clean(&mut m, &self.overlay, &self.clean);
        read(&mut MediaView::with_sb(&mut o, self.sb)).ok()
    }

    /// A copy through domain `d`'s mapping for a read or a write of `bytes`, if the
    /// client has mapped it and [`State::begin_copy`] would copy outside the state.
    pub fn shared_copy(&self, d: u16, write: bool, bytes: usize) -> Option<Copy> {
        if write && bytes < super::COPY_OUTSIDE_MIN {
            return None;
        }
        self.copy_through(d, write)
    }

    /// Whether directory `d`, cached or read as far as `reach` allows, is one the
    /// client may search.
    fn searchable_within(&self, d: u64, reach: Reach, found: &mut Vec<(u64, Inode)>) -> bool {
        self.inode_noting(d, reach, found).is_some_and(|i| {
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

    /// [`Client::resolve_parent`] of a path whose object exists, under the shared
    /// state `s`, from the caches or as far as `reach` allows: (parent directory, last
    /// name, object), or `None` if any lease on the way is not known, a name or
    /// directory inode is out of reach, or the walk is refused. The inodes of the
    /// directories on the way that were read from the mapping go into `found`, to be
    /// cached afterwards ([`Client::remember`]).
    pub fn resolve_within<'p>(
        &self,
        s: &State,
        path: &'p str,
        reach: Reach,
        found: &mut Vec<(u64, Inode)>,
    ) -> Option<(u64, &'p str, u64)> {
        let rest = path.strip_prefix('/')?;
        let mut comps = rest.split('/').filter(|c| !c.is_empty()).peekable();
        let mut d = ROOT_INO;
        while let Some(c) = comps.next() {
            if !s.known_covered_shared(self.lookup_key(d, c), false)
                || !s.searchable_within(d, reach, found)
            {
                return None;
            }
            let o = s.lookup_within(d, c, reach)?;
            if comps.peek().is_none() {
                return Some((d, c, o));
            }
            d = o;
        }
        None
    }

    /// The object at `path` and its inode, under the shared state `s`, if the walk
    /// there ([`Client::resolve_within`]) and its inode are in `reach` and a lease is
    /// known to cover the object (exclusively, if `exclusive`). The inodes read from
    /// the mapping on the way, the object's included, go into `found`.
    pub fn object_within(
        &self,
        s: &State,
        path: &str,
        exclusive: bool,
        reach: Reach,
        found: &mut Vec<(u64, Inode)>,
    ) -> Option<(u64, Inode)> {
        let (_, _, ino) = self.resolve_within(s, path, reach, found)?;
        if !s.known_covered_shared(ino, exclusive) {
            return None;
        }
        Some((ino, s.inode_noting(ino, reach, found)?))
    }

    /// Enters a read under the shared state (until the guard goes), and says how far
    /// it should look: the caches only while no other thread reads or holds the state
    /// (the exclusive path is then as quick, and fills them), the mapping too while
    /// one does. A thread that finds the state free at the moment it looks is no
    /// sign: with a hundred threads on two processors, the readers hold it a
    /// microsecond at a time, and most of the others wait, preempted, inside a read.
    pub fn shared_reach(&self) -> (Reach, Reader<'_>) {
        let others = self.readers.fetch_add(1, Ordering::Relaxed);
        let busy = others > 0
            || matches!(
                self.state.try_write(),
                Err(std::sync::TryLockError::WouldBlock)
            );
        let reach = if busy { Reach::Mapping } else { Reach::Caches };
        (reach, Reader(&self.readers))
    }

    /// Caches what a reader found in the mapping under the shared state as of cache
    /// tick `tick` ([`State::cache_tick`]), if the state is free at once: each inode
    /// of `inodes` that nothing the cache saw since touched (as [`MetaCache`] stamps
    /// its changes), and `pages`, a file's data pages from a page index on (`(ino,
    /// first, pages)`), if that file's inode is among them and cached as read. Those
    /// reads then stand as if made under the exclusive state, which would have cached
    /// them, and the next reader finds them cached. The rest is not cached.
    ///
    /// Before, any exclusive hold in between kept a reader's finds out of the cache;
    /// in webserver x100, where one thread in ten appends to a shared log each
    /// iteration, the opens then read the inodes of the directories on their way, and
    /// of their files, from the mapping again and again.
    ///
    /// [`MetaCache`]: crate::cache::MetaCache
    pub fn remember(&self, tick: u64, inodes: &[(u64, Inode)], pages: Option<(u64, u64, &[u64])>) {
        if inodes.is_empty() {
            // Nothing read from the mapping: no need to take the state.
            return;
        }
        let Ok(mut s) = self.state.try_write() else {
            return;
        };
        let mut file = None;
        for &(ino, inode) in inodes {
            if s.remember_inode(tick, ino, &inode) {
                file = file.or(pages.filter(|p| p.0 == ino));
            }
        }
        if let Some((ino, first, pages)) = file {
            for (index, &page) in (first..).zip(pages) {
                s.cache.put_leaf(ino, index, page);
            }
        }
    }
}

/// A thread inside a read under the shared state ([`Client::shared_reach`]).
pub struct Reader<'a>(&'a AtomicUsize);

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

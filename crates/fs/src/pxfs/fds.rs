//! A mount's open files: descriptors, their offsets and modes.
//!
//! Every read, write and close looks its descriptor up, so the table is split into
//! shards with a lock each, and the threads of a many-threaded process (FileBench's 100
//! webserver threads) do not all take one lock for it. Webserver with 100 threads ran
//! no faster for it on two processors than with one lock (docs/aerie.md).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use rustc_hash::FxHashMap;

use super::Fd;
use crate::error::{FsError, Result};

/// Shards of the table (descriptors are numbered in turn, so they spread evenly).
const SHARDS: usize = 16;

/// An open file as one descriptor sees it.
pub(super) struct Shadow {
    pub ino: u64,
    pub offset: u64,
    pub append: bool,
    pub write: bool,
    /// Losses of acknowledged operations this open file has reported (or that
    /// happened before it was opened): each is reported once per open file.
    pub seen: u64,
}

/// The open files of a mount.
pub(super) struct FdTable {
    next: AtomicU32,
    shards: [Mutex<FxHashMap<u32, Shadow>>; SHARDS],
}

impl FdTable {
    /// An empty table whose first descriptor is 3 (after the standard streams).
    pub fn new() -> FdTable {
        FdTable {
            next: AtomicU32::new(3),
            shards: std::array::from_fn(|_| Mutex::new(FxHashMap::default())),
        }
    }

    fn shard(&self, fd: u32) -> MutexGuard<'_, FxHashMap<u32, Shadow>> {
        // A panic under the lock leaves the map as one insert or remove left it.
        self.shards[fd as usize % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// A new descriptor for `sh`.
    pub fn insert(&self, sh: Shadow) -> Fd {
        let fd = self.next.fetch_add(1, Ordering::Relaxed);
        self.shard(fd).insert(fd, sh);
        Fd(fd)
    }

    /// Runs `f` on descriptor `fd`'s open file.
    pub fn with<T>(&self, fd: Fd, f: impl FnOnce(&mut Shadow) -> T) -> Result<T> {
        let mut shard = self.shard(fd.0);
        let sh = shard.get_mut(&fd.0).ok_or_else(|| not_open(fd))?;
        Ok(f(sh))
    }

    /// Takes descriptor `fd` out of the table.
    pub fn remove(&self, fd: Fd) -> Result<Shadow> {
        self.shard(fd.0).remove(&fd.0).ok_or_else(|| not_open(fd))
    }
}

fn not_open(fd: Fd) -> FsError {
    FsError::BadHandle(format!("fd {} is not open", fd.0))
}

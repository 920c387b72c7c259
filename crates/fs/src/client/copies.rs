//! File data copied outside the client's state lock.
//!
//! Copying bytes between an application's buffer and a data space is most of what a
//! read or write of a large file costs, and once its pages are known it needs nothing
//! of libFS's state. So a read or write finds its pages with the state locked, takes a
//! [`Copy`] (the domain's mapping and a ticket), lets the state go and copies; the
//! process's other threads run their own operations meanwhile, as they would on a
//! kernel file system.
//!
//! What must not happen while a copy is in flight is that the pages it reads or writes
//! become another file's. A data page changes hands only at the service: when it
//! applies a batch that frees the page (a truncate, an unlink, a KVFS erase), when the
//! last close of an unlinked file frees it, when a change of attributes moves a file's
//! data to another domain, and when the client gives back a lease under which another
//! client may then free it. Each of those requests is sent with the state locked and
//! waits first until no copy is in flight ([`Copies::wait_idle`]), and a copy begins
//! only with the state locked, so none overlaps such a request. A copy's thread never
//! takes the state while it holds its ticket, so the waiter, which holds the state,
//! cannot wait for it in a cycle.

use std::sync::Arc;

/// The smallest copy made outside the state: a copy of 64 KiB takes several
/// microseconds, about what a thread waiting for the state costs to wake.
pub const COPY_OUTSIDE_MIN: usize = 64 << 10;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::Result;
use crate::map::Map;

/// The copies in flight of one client.
#[derive(Default)]
pub(crate) struct Copies {
    running: AtomicUsize,
}

impl Copies {
    /// Counts a copy in flight until the ticket goes. Called with the state locked.
    fn begin(self: &Arc<Self>) -> Ticket {
        // The state lock orders this before any later `wait_idle`.
        self.running.fetch_add(1, Ordering::Relaxed);
        Ticket(self.clone())
    }

    /// Whether no copy is in flight (with the state locked, none can begin until it
    /// is let go).
    pub(crate) fn idle(&self) -> bool {
        self.running.load(Ordering::Acquire) == 0
    }

    /// Waits until no copy is in flight. Called with the state locked, so that none can
    /// begin meanwhile; copies are memory copies of at most one call's bytes, so this
    /// yields the core rather than sleeping.
    pub(crate) fn wait_idle(&self) {
        while self.running.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
    }
}

/// One copy's place in [`Copies`].
struct Ticket(Arc<Copies>);

impl Drop for Ticket {
    fn drop(&mut self) {
        // Release: the copy's loads and stores (and its fence) come before a waiter
        // sees it gone.
        self.0.running.fetch_sub(1, Ordering::Release);
    }
}

/// A copy of one operation's file data, outside the state lock: the domain's mapping,
/// held by this copy (so a mapping dropped meanwhile stays until it ends), and its
/// ticket.
pub struct Copy {
    map: Arc<Map>,
    _ticket: Ticket,
}

impl Copy {
    pub(crate) fn new(map: Arc<Map>, copies: &Arc<Copies>) -> Copy {
        Copy {
            map,
            _ticket: copies.begin(),
        }
    }

    /// Copies bytes at byte `off` of the data space out (see [`Map::read_data`]).
    pub fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.map.read_data(off, buf)
    }

    /// Copies `bytes` in at byte `off` of the data space, durable at the next
    /// [`Copy::fence`]. A copy made for writing ([`State::begin_copy`]) has a mapping
    /// that takes shared writes.
    ///
    /// [`State::begin_copy`]: super::State::begin_copy
    pub fn write(&self, off: u64, bytes: &[u8]) -> Result<()> {
        // SAFETY: libFS holds no reference into a data space (it reads and writes
        // them through raw pointers), and the pages are this operation's file's: no
        // request that could give them to another file is sent while this copy is in
        // flight (see the module documentation). Two threads writing the same bytes of
        // one file at once race as on any file system.
        let stored = unsafe { self.map.write_streaming_shared(off, bytes)? };
        assert!(
            stored,
            "a copy for writing has a mapping that takes shared writes"
        );
        Ok(())
    }

    /// Makes this thread's writes through the copy durable (one fence).
    pub fn fence(&self) {
        self.map.fence_shared();
    }
}

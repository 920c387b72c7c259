//! The machine's view of the OS model's SpaceJMP segments and address spaces
//! (`pmlab_os::vas`): page tables shared between the machine, which walks them on TLB
//! misses, and the OS, which attaches and detaches segments.

use std::sync::{Arc, Mutex, MutexGuard};

use pmlab_os::vas::SegmentSpaces;
use pmlab_spine::Asid;

use crate::paging::PageTables;

/// A handle on segment spaces that the machine translates through while the OS changes
/// them. Clones share the same spaces.
#[derive(Clone, Debug)]
pub struct SharedSegments(Arc<Mutex<SegmentSpaces>>);

impl SharedSegments {
    /// Shares `spaces`.
    pub fn new(spaces: SegmentSpaces) -> Self {
        Self(Arc::new(Mutex::new(spaces)))
    }

    /// The spaces, locked. A poisoned lock (a panic while holding it) is taken over: the
    /// spaces are plain data whose every update completes before the lock is released.
    pub fn lock(&self) -> MutexGuard<'_, SegmentSpaces> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl PageTables for SharedSegments {
    fn translate(&mut self, asid: Asid, vpn: u64) -> Option<u64> {
        self.lock().translate(asid, vpn).map(|(frame, _)| frame)
    }
}

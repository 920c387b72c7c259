//! The live address spaces, found by pid with a one-entry cache.

use std::cell::Cell;

use crate::Pid;
use crate::page_table::{AddressSpace, FastMap};

const NONE: u32 = u32::MAX;

/// Address spaces in dense slots, indexed by pid through a hash map, with the last pid
/// looked up cached: a trace switches process only every many thousand references, so
/// most lookups skip the hash.
#[derive(Debug, Default)]
pub(crate) struct Spaces {
    slots: Vec<Option<AddressSpace>>,
    index: FastMap<Pid, u32>,
    free: Vec<u32>,
    /// `(pid, slot)` of the last lookup; slot `NONE` when empty.
    last: Cell<(Pid, u32)>,
}

impl Spaces {
    pub(crate) fn new() -> Self {
        Spaces {
            last: Cell::new((0, NONE)),
            ..Default::default()
        }
    }

    #[inline]
    fn slot(&self, pid: Pid) -> Option<usize> {
        let (last_pid, slot) = self.last.get();
        if last_pid == pid && slot != NONE {
            return Some(slot as usize);
        }
        let slot = *self.index.get(&pid)?;
        self.last.set((pid, slot));
        Some(slot as usize)
    }

    #[inline]
    pub(crate) fn get(&self, pid: Pid) -> Option<&AddressSpace> {
        self.slots[self.slot(pid)?].as_ref()
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, pid: Pid) -> Option<&mut AddressSpace> {
        let slot = self.slot(pid)?;
        self.slots[slot].as_mut()
    }

    #[inline]
    pub(crate) fn get_or_create(&mut self, pid: Pid) -> &mut AddressSpace {
        let slot = match self.slot(pid) {
            Some(s) => s,
            None => {
                let s = match self.free.pop() {
                    Some(s) => s,
                    None => {
                        self.slots.push(None);
                        (self.slots.len() - 1) as u32
                    }
                };
                self.slots[s as usize] = Some(AddressSpace::new(pid));
                self.index.insert(pid, s);
                self.last.set((pid, s));
                s as usize
            }
        };
        self.slots[slot].as_mut().expect("indexed slot is live")
    }

    pub(crate) fn remove(&mut self, pid: Pid) -> Option<AddressSpace> {
        let slot = self.index.remove(&pid)?;
        if self.last.get().0 == pid {
            self.last.set((0, NONE));
        }
        self.free.push(slot);
        self.slots[slot as usize].take()
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &AddressSpace> {
        self.slots.iter().flatten()
    }
}

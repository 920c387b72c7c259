//! The live address spaces, found by asid with a one-entry cache.

use std::cell::Cell;

use crate::Asid;
use crate::page_table::{AddressSpace, FastMap};

const NONE: u32 = u32::MAX;

/// Address spaces in dense slots, indexed by asid through a hash map, with the last asid
/// looked up cached: a trace switches process only every many thousand references, so
/// most lookups skip the hash.
#[derive(Debug, Default)]
pub(crate) struct Spaces {
    slots: Vec<Option<AddressSpace>>,
    index: FastMap<Asid, u32>,
    free: Vec<u32>,
    /// `(asid, slot)` of the last lookup; slot `NONE` when empty.
    last: Cell<(Asid, u32)>,
}

impl Spaces {
    pub(crate) fn new() -> Self {
        Spaces {
            last: Cell::new((0, NONE)),
            ..Default::default()
        }
    }

    #[inline]
    fn slot(&self, asid: Asid) -> Option<usize> {
        let (last_pid, slot) = self.last.get();
        if last_pid == asid && slot != NONE {
            return Some(slot as usize);
        }
        let slot = *self.index.get(&asid)?;
        self.last.set((asid, slot));
        Some(slot as usize)
    }

    #[inline]
    pub(crate) fn get(&self, asid: Asid) -> Option<&AddressSpace> {
        self.slots[self.slot(asid)?].as_ref()
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, asid: Asid) -> Option<&mut AddressSpace> {
        let slot = self.slot(asid)?;
        self.slots[slot].as_mut()
    }

    #[inline]
    pub(crate) fn get_or_create(&mut self, asid: Asid) -> &mut AddressSpace {
        let slot = match self.slot(asid) {
            Some(s) => s,
            None => {
                let s = match self.free.pop() {
                    Some(s) => s,
                    None => {
                        self.slots.push(None);
                        (self.slots.len() - 1) as u32
                    }
                };
                self.slots[s as usize] = Some(AddressSpace::new(asid));
                self.index.insert(asid, s);
                self.last.set((asid, s));
                s as usize
            }
        };
        self.slots[slot].as_mut().expect("indexed slot is live")
    }

    pub(crate) fn remove(&mut self, asid: Asid) -> Option<AddressSpace> {
        let slot = self.index.remove(&asid)?;
        if self.last.get().0 == asid {
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

//! The persistence domain: which bytes are durable (in the memory device) and which are
//! only in volatile caches.
//!
//! The domain keeps two images of physical memory: the current (coherent) image that
//! loads see, and the durable image that survives a crash. A line becomes durable when
//! the cache hierarchy writes it to memory (eviction write-back, write-through), when a
//! `clflush` writes it back, or — for `clwb`/`clflushopt` — at the next fence; until that
//! fence the write-back is *pending*: at a crash it may or may not have reached memory.
//!
//! Every change of the durable state is an [`Event`]; a recording of events replays onto
//! a [`DurableState`] to materialise the durable image at any crash point.

use pmlab_spine::LINE;

/// A write on its way to memory: a `clwb`/`clflushopt` write-back not yet ordered by a
/// fence, or a write queued at the memory controller that has not completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingFlush {
    /// First byte written back.
    pub addr: u64,
    /// The bytes as they were when the flush was issued.
    pub data: Box<[u8]>,
    /// Its number among the writes of this durable state (the order they were issued).
    pub id: u64,
}

impl PendingFlush {
    fn overlaps_lines_of(&self, addr: u64, len: u64) -> bool {
        let (a0, a1) = (
            self.addr / LINE,
            (self.addr + self.data.len() as u64 - 1) / LINE,
        );
        let (b0, b1) = (addr / LINE, (addr + len - 1) / LINE);
        a0 <= b1 && b0 <= a1
    }
}

/// What survives a crash: the durable image and the write-backs still in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableState {
    image: Vec<u8>,
    pending: Vec<PendingFlush>,
    next_id: u64,
}

impl DurableState {
    /// A durable state holding `image` with nothing in flight.
    pub fn new(image: Vec<u8>) -> Self {
        Self {
            image,
            pending: Vec::new(),
            next_id: 0,
        }
    }

    /// The durable bytes (pending write-backs not applied).
    pub fn image(&self) -> &[u8] {
        &self.image
    }

    /// Gives up the durable bytes (pending write-backs dropped).
    pub fn into_image(self) -> Vec<u8> {
        self.image
    }

    /// Write-backs issued but not yet fenced, oldest first.
    pub fn pending(&self) -> &[PendingFlush] {
        &self.pending
    }

    /// `data` reached memory at `addr`. Pending flushes of the same lines were issued
    /// earlier and the memory controller keeps same-address writes in order, so they
    /// complete first.
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self
            .pending
            .iter()
            .any(|p| p.overlaps_lines_of(addr, data.len() as u64))
        {
            let (done, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
                .into_iter()
                .partition(|p| p.overlaps_lines_of(addr, data.len() as u64));
            self.pending = rest;
            for p in done {
                self.copy_in(p.addr, &p.data);
            }
        }
        self.copy_in(addr, data);
    }

    /// A weakly ordered write-back of `data` at `addr` was issued; returns its id (for
    /// [`DurableState::land`]).
    pub fn add_pending(&mut self, addr: u64, data: &[u8]) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.push(PendingFlush {
            addr,
            data: data.into(),
            id,
        });
        id
    }

    /// The pending write `id` reached memory (the memory controller acknowledged it).
    /// Nothing happens if it already did (a fence or a later write to its lines
    /// completed it first).
    pub fn land(&mut self, id: u64) {
        if let Ok(i) = self.pending.binary_search_by_key(&id, |p| p.id) {
            let p = self.pending.remove(i);
            self.copy_in(p.addr, &p.data);
        }
    }

    /// A fence: every pending write-back completes, in issue order.
    pub fn fence(&mut self) {
        for p in std::mem::take(&mut self.pending) {
            self.copy_in(p.addr, &p.data);
        }
    }

    /// Replays one event.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::Write { addr, data } => self.write(*addr, data),
            Event::Pending { addr, data } => {
                self.add_pending(*addr, data);
            }
            Event::Fence => self.fence(),
            Event::Land { id } => self.land(*id),
            Event::Point(_) => {}
        }
    }

    /// The image a crash leaves when exactly the pending write-backs whose indices
    /// `chosen` yields reached memory (applied in issue order, as the memory controller
    /// would for overlapping ones).
    pub fn image_with(&self, chosen: impl Iterator<Item = usize>) -> Vec<u8> {
        let mut img = self.image.clone();
        for i in chosen {
            let p = &self.pending[i];
            img[p.addr as usize..p.addr as usize + p.data.len()].copy_from_slice(&p.data);
        }
        img
    }

    /// Applies the pending write-backs at `chosen` (ascending) onto the image in place
    /// and returns what they overwrote, for [`DurableState::undo`].
    pub(crate) fn apply_subset(&mut self, chosen: &[usize]) -> Vec<(u64, Box<[u8]>)> {
        let mut saved = Vec::with_capacity(chosen.len());
        for &i in chosen {
            let (addr, len) = (self.pending[i].addr, self.pending[i].data.len());
            let a = addr as usize;
            saved.push((addr, self.image[a..a + len].into()));
            let data = self.pending[i].data.clone();
            self.image[a..a + len].copy_from_slice(&data);
        }
        saved
    }

    /// Restores what [`DurableState::apply_subset`] overwrote.
    pub(crate) fn undo(&mut self, saved: Vec<(u64, Box<[u8]>)>) {
        for (addr, data) in saved.into_iter().rev() {
            let a = addr as usize;
            self.image[a..a + data.len()].copy_from_slice(&data);
        }
    }

    fn copy_in(&mut self, addr: u64, data: &[u8]) {
        let a = addr as usize;
        self.image[a..a + data.len()].copy_from_slice(data);
    }
}

/// What an operation boundary was, for choosing crash points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PointKind {
    /// Before the first recorded operation.
    Start,
    /// After a load of one line (loads can evict dirty lines).
    Load,
    /// After a store to one line.
    Store,
    /// After the flush of one line.
    Flush,
    /// After a fence.
    Fence,
    /// After a chaos-mode write-back.
    Chaos,
    /// After a write was queued at the memory controller, completed there, or went into
    /// a non-volatile cache, by hardware beside the core's caches (the machine's memory
    /// port, [`crate::Machine::port_write`]).
    Port,
    /// After the last recorded operation.
    End,
}

/// One change of the durable state, or an operation boundary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Bytes reached memory: an eviction write-back, a write-through, a `clflush`, a
    /// chaos-mode write-back.
    Write {
        /// First byte.
        addr: u64,
        /// The bytes.
        data: Box<[u8]>,
    },
    /// A `clwb`/`clflushopt` write-back was issued (durable at the next fence).
    Pending {
        /// First byte.
        addr: u64,
        /// The bytes at issue time.
        data: Box<[u8]>,
    },
    /// A fence.
    Fence,
    /// The pending write `id` completed at the memory controller.
    Land {
        /// Its [`PendingFlush::id`].
        id: u64,
    },
    /// An operation ended here: a place the machine may crash.
    Point(PointKind),
}

/// A set of line numbers below a bound, with O(1) insertion, removal and uniform random
/// choice (a dense index instead of a hash map: the machine asks on every store).
#[derive(Clone, Debug, Default)]
pub(crate) struct LineSet {
    lines: Vec<u64>,
    /// `slot[line]` is the line's index in `lines` plus one, or 0 if absent.
    slot: Vec<u32>,
}

impl LineSet {
    /// An empty set of lines `0..bound`.
    pub(crate) fn new(bound: u64) -> Self {
        Self {
            lines: Vec::new(),
            slot: vec![0; bound as usize],
        }
    }

    pub(crate) fn insert(&mut self, line: u64) {
        let s = &mut self.slot[line as usize];
        if *s == 0 {
            self.lines.push(line);
            *s = u32::try_from(self.lines.len()).expect("fewer than 2^32 dirty lines");
        }
        debug_assert_eq!(self.lines[self.slot[line as usize] as usize - 1], line);
    }

    pub(crate) fn remove(&mut self, line: u64) {
        let s = std::mem::take(&mut self.slot[line as usize]);
        if s != 0 {
            let i = (s - 1) as usize;
            debug_assert_eq!(
                self.lines[i], line,
                "line set: slot of line {line} is stale"
            );
            self.lines.swap_remove(i);
            if let Some(&moved) = self.lines.get(i) {
                self.slot[moved as usize] = s;
            }
        }
        debug_assert!(!self.contains(line));
    }

    pub(crate) fn contains(&self, line: u64) -> bool {
        self.slot[line as usize] != 0
    }

    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }

    pub(crate) fn get(&self, i: usize) -> u64 {
        self.lines[i]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.lines.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_completes_at_fence_or_before_a_later_same_line_write() {
        let mut d = DurableState::new(vec![0; 256]);
        d.add_pending(0, &[1; 64]);
        d.add_pending(64, &[2; 64]);
        assert_eq!(d.image()[0], 0);
        // A later write-through of two bytes of line 0: the pending flush of line 0 lands
        // first, then the new bytes.
        d.write(10, &[9, 9]);
        assert_eq!(&d.image()[8..13], &[1, 1, 9, 9, 1]);
        assert_eq!(d.pending().len(), 1);
        assert_eq!(d.image_with([0].into_iter())[64], 2);
        d.fence();
        assert_eq!(d.image()[64], 2);
        assert!(d.pending().is_empty());
    }

    #[test]
    fn subset_undo_restores() {
        let mut d = DurableState::new(vec![0; 128]);
        d.add_pending(0, &[1; 64]);
        d.add_pending(0, &[2; 64]);
        let before = d.image().to_vec();
        let saved = d.apply_subset(&[0, 1]);
        assert_eq!(d.image()[0], 2);
        d.undo(saved);
        assert_eq!(d.image(), &before[..]);
    }

    #[test]
    fn line_set() {
        let mut s = LineSet::new(8);
        for l in [3, 5, 7] {
            s.insert(l);
        }
        s.insert(5);
        s.remove(3);
        assert_eq!(s.len(), 2);
        assert!(s.contains(7) && s.contains(5) && !s.contains(3));
        let mut v: Vec<_> = s.iter().collect();
        v.sort();
        assert_eq!(v, vec![5, 7]);
    }
}

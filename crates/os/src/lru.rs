//! An intrusive doubly-linked list over frame indices: the global LRU list.

use crate::Pfn;

/// No frame (end of the list).
pub(crate) const NIL: Pfn = Pfn::MAX;

/// The exact LRU order of all page frames, most recently used at the head.
///
/// Links are two arrays indexed by frame number, so moving a frame to either end is O(1)
/// and allocation-free.
#[derive(Debug, Clone)]
pub(crate) struct LruList {
    prev: Vec<Pfn>,
    next: Vec<Pfn>,
    head: Pfn,
    tail: Pfn,
}

impl LruList {
    /// A list holding `order` from most to least recently used.
    pub(crate) fn from_order(frames: usize, order: &[Pfn]) -> Self {
        let mut l = LruList {
            prev: vec![NIL; frames],
            next: vec![NIL; frames],
            head: NIL,
            tail: NIL,
        };
        for &f in order {
            l.push_back(f);
        }
        l
    }

    #[inline]
    pub(crate) fn head(&self) -> Pfn {
        self.head
    }

    #[inline]
    pub(crate) fn tail(&self) -> Pfn {
        self.tail
    }

    /// The frame just more recently used than `f` (towards the head).
    #[inline]
    pub(crate) fn prev(&self, f: Pfn) -> Pfn {
        self.prev[f as usize]
    }

    /// The frame just less recently used than `f` (towards the tail).
    #[inline]
    pub(crate) fn next(&self, f: Pfn) -> Pfn {
        self.next[f as usize]
    }

    #[inline]
    pub(crate) fn unlink(&mut self, f: Pfn) {
        let (p, n) = (self.prev[f as usize], self.next[f as usize]);
        if p == NIL {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.prev[f as usize] = NIL;
        self.next[f as usize] = NIL;
    }

    #[inline]
    pub(crate) fn push_front(&mut self, f: Pfn) {
        self.prev[f as usize] = NIL;
        self.next[f as usize] = self.head;
        if self.head == NIL {
            self.tail = f;
        } else {
            self.prev[self.head as usize] = f;
        }
        self.head = f;
    }

    #[inline]
    pub(crate) fn push_back(&mut self, f: Pfn) {
        self.next[f as usize] = NIL;
        self.prev[f as usize] = self.tail;
        if self.tail == NIL {
            self.head = f;
        } else {
            self.next[self.tail as usize] = f;
        }
        self.tail = f;
    }

    /// All frames from most to least recently used (O(N), for checks and tests).
    pub(crate) fn order(&self) -> Vec<Pfn> {
        let mut v = Vec::with_capacity(self.prev.len());
        let mut f = self.head;
        while f != NIL {
            v.push(f);
            f = self.next[f as usize];
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_keep_order() {
        let mut l = LruList::from_order(4, &[0, 1, 2, 3]);
        l.unlink(2);
        l.push_front(2);
        assert_eq!(l.order(), vec![2, 0, 1, 3]);
        l.unlink(0);
        l.push_back(0);
        assert_eq!(l.order(), vec![2, 1, 3, 0]);
        l.unlink(2);
        l.unlink(0);
        assert_eq!((l.head(), l.tail()), (1, 3));
        assert_eq!(l.prev(3), 1);
        assert_eq!(l.next(1), 3);
    }
}

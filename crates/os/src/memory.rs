//! Physical memory: page frames on the global LRU list, the pool at its bottom, and
//! which page each frame holds.

use rand::seq::SliceRandom;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::lru::{LruList, NIL};
use crate::pool::Pool;
use crate::{Asid, Pfn, Vpn};

/// `N` page frames on an exact global LRU list whose bottom `K` frames form the pool of
/// available frames (Figure 9).
///
/// The pool is kept at exactly `min(K, N)` frames after every operation: when a pool
/// frame leaves (it was mapped or touched), the frame just above the pool joins it; when
/// frames are released to the bottom, the pool's top frames leave it. So every mapping
/// sees the same number of available frames, even at the start when all memory is
/// unused, as in the paper's simulations.
#[derive(Debug, Clone)]
pub struct PhysicalMemory {
    lru: LruList,
    pool: Pool,
    pool_target: usize,
    /// The pool's most recently used frame (its top), or `NIL` when the pool is empty.
    boundary: Pfn,
    owners: Vec<Option<(Asid, Vpn)>>,
}

impl PhysicalMemory {
    /// `frames` unused frames in a random LRU order drawn from `rng` (the paper
    /// initialises the list "in a different random order" before each simulation), with
    /// a pool of `pool_frames` indexed by `bins` bins.
    pub(crate) fn new(
        frames: u32,
        pool_frames: u32,
        bins: u32,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Self {
        let mut order: Vec<Pfn> = (0..frames).collect();
        order.shuffle(rng);
        let mut m = PhysicalMemory {
            lru: LruList::from_order(frames as usize, &order),
            pool: Pool::new(frames as usize, bins),
            pool_target: pool_frames.min(frames) as usize,
            boundary: NIL,
            owners: vec![None; frames as usize],
        };
        m.refill();
        m.pool.set_oldest(m.lru.tail());
        m
    }

    /// The number of frames `N`.
    pub fn frames(&self) -> u32 {
        self.owners.len() as u32
    }

    /// The pool of available frames.
    #[inline]
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The page frame `pfn` holds, if any.
    #[inline]
    pub fn owner(&self, pfn: Pfn) -> Option<(Asid, Vpn)> {
        self.owners[pfn as usize]
    }

    /// All frames from most to least recently used (O(N)).
    pub fn lru_order(&self) -> Vec<Pfn> {
        self.lru.order()
    }

    pub(crate) fn set_owner(&mut self, pfn: Pfn, owner: Option<(Asid, Vpn)>) {
        self.owners[pfn as usize] = owner;
    }

    /// Makes `pfn` the most recently used frame (a reference, or a fresh mapping).
    #[inline]
    pub(crate) fn make_mru(&mut self, pfn: Pfn) {
        if self.lru.head() == pfn {
            return;
        }
        let in_pool = self.pool.contains(pfn);
        if in_pool {
            self.leave_pool(pfn);
        }
        self.lru.unlink(pfn);
        self.lru.push_front(pfn);
        if in_pool {
            self.refill();
            self.pool.set_oldest(self.lru.tail());
        }
        self.assert_pool();
    }

    /// Puts `pfn` at the bottom of the LRU list: it becomes the first frame offered.
    pub(crate) fn make_lru(&mut self, pfn: Pfn) {
        if self.pool.contains(pfn) {
            self.leave_pool(pfn);
        }
        self.lru.unlink(pfn);
        self.lru.push_back(pfn);
        self.pool.insert_bottom(pfn);
        if self.boundary == NIL {
            self.boundary = pfn;
        }
        while self.pool.len() > self.pool_target {
            let top = self.boundary;
            self.boundary = self.lru.next(top);
            self.pool.remove(top);
        }
        self.refill();
        self.pool.set_oldest(self.lru.tail());
        self.assert_pool();
    }

    /// Debug builds: the O(1) part of [`PhysicalMemory::check`] after every move. The pool
    /// holds exactly its target, its top frame is in it, and its oldest frame is the
    /// bottom of the LRU list.
    #[inline]
    fn assert_pool(&self) {
        debug_assert_eq!(self.pool.len(), self.pool_target, "pool size");
        debug_assert!(
            self.boundary == NIL || self.pool.contains(self.boundary),
            "pool top {} is not in the pool",
            self.boundary
        );
        debug_assert!(
            self.pool_target == 0 || self.pool.oldest() == self.lru.tail(),
            "the pool's oldest frame is not the LRU tail"
        );
    }

    fn leave_pool(&mut self, pfn: Pfn) {
        if pfn == self.boundary {
            let below = self.lru.next(pfn);
            self.boundary = if below != NIL && self.pool.contains(below) {
                below
            } else {
                NIL
            };
        }
        self.pool.remove(pfn);
    }

    /// Grows the pool upwards to its target size.
    fn refill(&mut self) {
        while self.pool.len() < self.pool_target {
            let above = if self.boundary == NIL {
                self.lru.tail()
            } else {
                self.lru.prev(self.boundary)
            };
            if above == NIL {
                break;
            }
            self.pool.insert_top(above);
            self.boundary = above;
        }
    }

    /// Checks the pool is exactly the bottom `min(K, N)` frames of the LRU list, in LRU
    /// order per bin (O(N); for tests).
    pub fn check(&self) -> Result<(), String> {
        let order = self.lru.order();
        if order.len() != self.owners.len() {
            return Err(format!(
                "LRU list holds {} of {} frames",
                order.len(),
                self.owners.len()
            ));
        }
        let k = self.pool_target;
        if self.pool.len() != k {
            return Err(format!(
                "pool holds {} frames, expected {k}",
                self.pool.len()
            ));
        }
        let bottom = &order[order.len() - k..];
        if let Some(f) = bottom.iter().find(|&&f| !self.pool.contains(f)) {
            return Err(format!(
                "frame {f} is in the bottom {k} but not in the pool"
            ));
        }
        if k > 0 && self.boundary != bottom[0] {
            return Err(format!(
                "pool top is {}, expected {}",
                self.boundary, bottom[0]
            ));
        }
        if self.pool.oldest() != *order.last().unwrap_or(&NIL) {
            return Err("pool's oldest frame is not the LRU tail".into());
        }
        for bin in 0..self.pool.bins() {
            let expected: Vec<Pfn> = bottom
                .iter()
                .rev()
                .copied()
                .filter(|&f| self.pool.bin_of(f) == bin)
                .collect();
            if self.pool.bin_frames_lru_first(bin) != expected {
                return Err(format!("bin {bin} of the pool is out of LRU order"));
            }
            if self.pool.free_in_bin(bin) as usize != expected.len() {
                return Err(format!("free count of bin {bin} is wrong"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn pool_is_always_the_bottom_k() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut m = PhysicalMemory::new(32, 5, 4, &mut rng);
        m.check().unwrap();
        for step in 0..200u32 {
            let order = m.lru_order();
            let f = order[(step as usize * 7 + 3) % order.len()];
            if step % 5 == 0 {
                m.make_lru(f);
            } else {
                m.make_mru(f);
            }
            m.check().unwrap();
        }
    }

    #[test]
    fn pool_may_be_all_of_memory() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let mut m = PhysicalMemory::new(4, 9, 2, &mut rng);
        for f in [0, 1, 2, 3, 1, 0] {
            m.make_mru(f);
            m.check().unwrap();
            m.make_lru(f);
            m.check().unwrap();
        }
        assert_eq!(m.pool().len(), 4);
    }
}

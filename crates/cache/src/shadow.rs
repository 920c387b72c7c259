//! The two reference caches behind Dinero IV's compulsory/capacity/conflict split: a
//! fully associative cache with as many blocks as the real one, and an infinite cache.

use crate::config::Replacement;
use crate::fasthash::{BlockMap, BlockSet};
use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Node {
    blk: u64,
    /// Towards the top of the stack (more recently used / inserted).
    up: u32,
    /// Towards the bottom.
    down: u32,
}

/// A fully associative cache kept as Dinero IV keeps it: a stack, most recent on top,
/// with a hash index. Tree pseudo-LRU caches are shadowed by LRU (Dinero IV's tree-PLRU
/// state is per set and has no fully associative meaning).
pub(crate) struct Shadow {
    repl: Replacement,
    capacity: usize,
    index: BlockMap<u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    top: u32,
    bottom: u32,
    /// Blocks ever recorded in the infinite cache.
    seen: BlockSet,
}

impl Shadow {
    pub(crate) fn new(repl: Replacement, capacity: usize) -> Self {
        let repl = if repl == Replacement::TreePlru {
            Replacement::Lru
        } else {
            repl
        };
        Shadow {
            repl,
            capacity,
            index: BlockMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            top: NIL,
            bottom: NIL,
            seen: BlockSet::default(),
        }
    }

    fn unlink(&mut self, i: u32) {
        let Node { up, down, .. } = self.nodes[i as usize];
        if up == NIL {
            self.top = down;
        } else {
            self.nodes[up as usize].down = down;
        }
        if down == NIL {
            self.bottom = up;
        } else {
            self.nodes[down as usize].up = up;
        }
    }

    fn push_top(&mut self, i: u32) {
        self.nodes[i as usize].up = NIL;
        self.nodes[i as usize].down = self.top;
        if self.top != NIL {
            self.nodes[self.top as usize].up = i;
        } else {
            self.bottom = i;
        }
        self.top = i;
    }

    fn remove(&mut self, i: u32) {
        self.unlink(i);
        self.index.remove(&self.nodes[i as usize].blk);
        self.free.push(i);
    }

    /// Looks `blk` up; on a hit updates recency, on a miss inserts it when `insert`
    /// (replacing a block if full). Returns whether it missed.
    pub(crate) fn access(&mut self, blk: u64, insert: bool, rng: &mut Xoshiro256PlusPlus) -> bool {
        if let Some(&i) = self.index.get(&blk) {
            if self.repl == Replacement::Lru && self.top != i {
                self.unlink(i);
                self.push_top(i);
            }
            return false;
        }
        if !insert {
            return true;
        }
        if self.index.len() == self.capacity {
            let victim = match self.repl {
                Replacement::Random => {
                    // Dinero IV: the new block goes on top, then a uniformly chosen one
                    // of the old blocks is replaced; walk the stack to it.
                    let k = (rng.next_u64() % self.capacity as u64) as usize;
                    let mut v = self.top;
                    for _ in 0..k {
                        v = self.nodes[v as usize].down;
                    }
                    v
                }
                _ => self.bottom,
            };
            self.remove(victim);
        }
        let node = Node {
            blk,
            up: NIL,
            down: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.index.insert(blk, i);
        self.push_top(i);
        true
    }

    /// Records `blk` in the infinite cache; true if it had never been seen.
    pub(crate) fn first_touch(&mut self, blk: u64) -> bool {
        self.seen.insert(blk)
    }

    /// Drops `blk` from both reference caches, as Dinero IV's invalidation does, so
    /// that its next miss counts as compulsory again.
    pub(crate) fn invalidate(&mut self, blk: u64) {
        if let Some(&i) = self.index.get(&blk) {
            self.remove(i);
        }
        self.seen.remove(&blk);
    }
}

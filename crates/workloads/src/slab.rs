//! A pool of fixed-size nodes, allocated and freed inside transactions.
//!
//! Two state words in the workload header hold the pool: `free`, the head of a list of
//! freed nodes (each freed node's first word points to the next), and `bump`, the
//! number of nodes ever handed out. Allocation pops the list, or takes node `bump`;
//! freeing pushes. Both are ordinary transactional stores, so a node is allocated
//! exactly when the transaction that links it in commits, under any protocol, and an
//! abort gives it back. The checker accounts for every node below `bump`: reachable
//! from the structure or on the free list, never both, never twice.

use pmlab_spine::Addr;
use pmlab_tx::TxMemory;

use crate::error::{CheckError, WorkloadError};

/// A node pool: `cap` nodes of `node` bytes from `base`; its state words at `state`
/// (`free`) and `state + 8` (`bump`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slab {
    /// Address of node 0.
    pub base: Addr,
    /// Bytes per node.
    pub node: u64,
    /// Nodes in the pool.
    pub cap: u64,
    /// Address of the `free` word (`bump` follows it).
    pub state: Addr,
    /// The workload, for errors.
    pub workload: &'static str,
}

impl Slab {
    /// Bytes the nodes take.
    pub fn bytes(&self) -> u64 {
        self.node * self.cap
    }

    /// A node for the running transaction (its contents are whatever it last held).
    pub fn alloc<T: TxMemory>(&self, m: &mut T) -> Result<Addr, WorkloadError> {
        let free = m.tx_read_u64(self.state)?;
        if free != 0 {
            let next = m.tx_read_u64(free)?;
            m.tx_write_u64(self.state, next)?;
            return Ok(free);
        }
        let bump = m.tx_read_u64(self.state + 8)?;
        if bump >= self.cap {
            return Err(WorkloadError::Full {
                workload: self.workload,
                capacity: self.cap,
                node: self.node,
            });
        }
        m.tx_write_u64(self.state + 8, bump + 1)?;
        Ok(self.base + bump * self.node)
    }

    /// Gives `node` back.
    pub fn free<T: TxMemory>(&self, m: &mut T, node: Addr) -> Result<(), WorkloadError> {
        let free = m.tx_read_u64(self.state)?;
        m.tx_write_u64(node, free)?;
        m.tx_write_u64(self.state, node)?;
        Ok(())
    }

    /// The index of `addr` if it is a node below `bump` (a checker's pointer test).
    pub fn index(&self, addr: Addr, bump: u64) -> Option<u64> {
        let off = addr.checked_sub(self.base)?;
        (off % self.node == 0 && off / self.node < bump).then_some(off / self.node)
    }

    /// The checker's half: `reachable` marks the nodes the structure uses (indices
    /// below `bump`); every other node below `bump` must be on the free list, once.
    pub fn check<T: TxMemory>(&self, m: &mut T, reachable: &Marks) -> Result<u64, CheckError> {
        let w = self.workload;
        let rd = |m: &mut T, a| {
            m.tx_read_u64(a)
                .map_err(|e| crate::error::read_failed(w, a, e))
        };
        let bump = rd(m, self.state + 8)?;
        if bump > self.cap {
            return Err(CheckError::new(
                w,
                self.state + 8,
                format!("bump {bump} exceeds the pool's {} nodes", self.cap),
            ));
        }
        let mut free = Marks::new(bump);
        let mut at = rd(m, self.state)?;
        let mut from = self.state;
        while at != 0 {
            let i = self.index(at, bump).ok_or_else(|| {
                CheckError::new(
                    w,
                    from,
                    format!("free-list link {at:#x} is not an allocated node"),
                )
            })?;
            if reachable.get(i) {
                return Err(CheckError::new(w, at, "a node in use is on the free list"));
            }
            if !free.set(i) {
                return Err(CheckError::new(w, at, "the free list loops"));
            }
            from = at;
            at = rd(m, at)?;
        }
        let used = reachable.count();
        if used + free.count() != bump {
            let lost = (0..bump).find(|&i| !reachable.get(i) && !free.get(i));
            return Err(CheckError::new(
                w,
                lost.map_or(self.base, |i| self.base + i * self.node),
                format!(
                    "a leak: {bump} nodes handed out, {used} in use and {} free",
                    free.count()
                ),
            ));
        }
        Ok(used)
    }
}

/// A set of node indices (a bitmap), for checkers.
#[derive(Clone, Debug)]
pub struct Marks {
    words: Vec<u64>,
    count: u64,
    len: u64,
}

impl Marks {
    /// An empty set of indices below `len`.
    pub fn new(len: u64) -> Marks {
        Marks {
            words: vec![0; len.div_ceil(64) as usize],
            count: 0,
            len,
        }
    }

    /// Adds `i`; false if it was there already (or is out of range).
    pub fn set(&mut self, i: u64) -> bool {
        if i >= self.len {
            return false;
        }
        let (w, b) = ((i / 64) as usize, i % 64);
        if self.words[w] & (1 << b) != 0 {
            return false;
        }
        self.words[w] |= 1 << b;
        self.count += 1;
        true
    }

    /// Whether `i` is in the set.
    pub fn get(&self, i: u64) -> bool {
        i < self.len && self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// How many indices are in the set.
    pub fn count(&self) -> u64 {
        self.count
    }
}

//! The B+-tree workload of paper 001: "each 4KB node contains 200 key(8B)-value(4B)
//! pairs", and "each transaction consists of multiple key-value insert or delete
//! operations" ([`crate::Params::ops_per_tx`], 4 unless asked otherwise). Internal
//! nodes hold 200 separators too. Keys are stored big-endian so that byte order is
//! numeric order; values are the low 4 bytes of the operation's random value.
//!
//! Checker (the engine's, [`crate::bplus`]): keys in order within nodes, within each
//! subtree's separator bounds and across the leaf chain; every node between half full
//! and full (the root at least one key); every leaf at the same depth; the leaf chain
//! visiting the leaves in order and ending in null; the count word right; every node
//! reached once and every other node free.

use pmlab_tx::{Batch, Protocol, TxMemory};

use crate::bplus::{NODE, NodeReads, Shape, Tree};
use crate::contents::Contents;
use crate::error::{CheckError, WorkloadError};
use crate::header::{Header, STRUCT_OFF};
use crate::map::{Map, fill, toggle_tx};
use crate::slab::Slab;
use crate::workload::{Ops, Structure};

/// The workload's name.
pub const NAME: &str = "bptree";
const SHAPE: Shape = Shape {
    key: 8,
    val: 4,
    leaf_cap: 200,
    int_cap: 200,
};
const ROOT: u64 = 0;
const COUNT: u64 = 1;
const POOL: u64 = 2;

/// The tree.
pub struct BpTree {
    h: Header,
    tree: Tree,
}

/// The node pool starts at the first 4 KiB boundary after the header, so that every
/// node is one page (OSP maps and remaps pages).
pub(crate) fn node_base(h: &Header) -> u64 {
    h.body().div_ceil(NODE) * NODE
}

impl Map for BpTree {
    fn get<T: TxMemory>(&self, m: &mut T, key: u64) -> Result<Option<u64>, WorkloadError> {
        let mut v = [0u8; 4];
        let found = self.tree.get(m, &key.to_be_bytes(), &mut v)?;
        Ok(found.then(|| u64::from(u32::from_le_bytes(v))))
    }

    fn insert<T: TxMemory>(&self, m: &mut T, key: u64, value: u64) -> Result<(), WorkloadError> {
        self.tree
            .insert(m, &key.to_be_bytes(), &(value as u32).to_le_bytes())
    }

    fn remove<T: TxMemory>(&self, m: &mut T, key: u64) -> Result<(), WorkloadError> {
        self.tree.remove(m, &key.to_be_bytes())
    }
}

impl BpTree {
    /// Sets how searched nodes are read.
    pub(crate) fn set_node_reads(&mut self, reads: NodeReads) {
        self.tree.reads = reads;
    }
}

impl Structure for BpTree {
    fn footprint(elements: u64) -> u64 {
        // The header may sit anywhere; allow a page to align the nodes.
        STRUCT_OFF + NODE + SHAPE.capacity(2 * elements) * NODE
    }

    fn layout(h: &Header) -> Result<Self, WorkloadError> {
        debug_assert!(SHAPE.fits());
        Ok(BpTree {
            h: *h,
            tree: Tree {
                shape: SHAPE,
                root: h.state(ROOT),
                count: h.state(COUNT),
                slab: Slab {
                    base: node_base(h),
                    node: NODE,
                    cap: SHAPE.capacity(2 * h.elements),
                    state: h.state(POOL),
                    workload: NAME,
                },
                reads: NodeReads::Whole,
            },
        })
    }

    fn universe(&self) -> u64 {
        2 * self.h.elements
    }

    fn init<P: Protocol>(&mut self, p: &mut P, batch: &mut Batch) -> Result<(), WorkloadError> {
        fill(self, p, batch, self.h.elements)
    }

    fn run_tx<P: Protocol>(
        &mut self,
        p: &mut P,
        batch: &mut Batch,
        ops: &mut Ops,
    ) -> Result<(), WorkloadError> {
        toggle_tx(self, p, batch, ops)
    }

    fn check<P: Protocol>(&self, p: &mut P) -> Result<Contents, CheckError> {
        let mut contents = Contents::default();
        self.tree.check(p, NAME, |k, v| {
            let key = u64::from_be_bytes(k.try_into().expect("8-byte key"));
            let val = u32::from_le_bytes(v.try_into().expect("4-byte value"));
            contents.add(key, u64::from(val));
        })?;
        Ok(contents)
    }
}

//! The database workload of paper 001, standing in for its SQLite benchmark (LevelDB's
//! `db_bench` on SQLite 3.7.17): a table of rows with 16-byte keys (the row number as
//! 16 decimal digits, as `db_bench` formats them) and 100-byte values (`db_bench`'s
//! value size), kept in a B+-tree of 4 KiB pages whose leaves hold the rows themselves
//! (35 per page) — as SQLite's table b-tree keeps rows in its leaf pages. A transaction
//! is a batch of row statements (`db_bench`'s batched writes; 4 unless asked
//! otherwise): a row absent is inserted; a row present is updated (half the time) or
//! deleted.
//!
//! What it keeps of SQLite's access pattern: each statement descends root-to-leaf
//! through 4 KiB pages and rewrites part of one leaf page (all of it on a split or a
//! merge), and a transaction changes several pages at once. What it leaves out: the
//! SQL layer, SQLite's own rollback journal (the protocol under test is the journal),
//! its page cache, variable-length records and overflow pages, and the free-list pages.
//!
//! Checker: the B+-tree engine's ([`crate::bplus`]), plus every key well formed.

use pmlab_tx::{Batch, Protocol};

use crate::bplus::{NODE, NodeReads, Shape, Tree};
use crate::contents::Contents;
use crate::error::{CheckError, WorkloadError};
use crate::header::{Header, STRUCT_OFF};
use crate::slab::Slab;
use crate::workload::{Ops, Structure, in_tx};

/// The workload's name.
pub const NAME: &str = "db";
const KEY: usize = 16;
const VALUE: usize = 100;
const SHAPE: Shape = Shape {
    key: KEY,
    val: VALUE,
    leaf_cap: (NODE as usize - 16) / (KEY + VALUE),
    int_cap: (NODE as usize - 16 - 8) / (KEY + 8),
};
const ROOT: u64 = 0;
const COUNT: u64 = 1;
const POOL: u64 = 2;
/// Rows inserted per transaction while the table is first filled.
const FILL_BATCH: u64 = 16;

/// The table.
pub struct Db {
    h: Header,
    tree: Tree,
}

/// Row `rank`'s key: 16 decimal digits.
fn key(rank: u64) -> [u8; KEY] {
    let mut k = [0u8; KEY];
    k.copy_from_slice(format!("{rank:016}").as_bytes());
    k
}

/// A 100-byte value drawn from `seed` (splitmix64 steps).
fn value(seed: u64) -> [u8; VALUE] {
    let mut v = [0u8; VALUE];
    let mut z = seed;
    for chunk in v.chunks_mut(8) {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let x = (x ^ (x >> 31)).to_le_bytes();
        chunk.copy_from_slice(&x[..chunk.len()]);
    }
    v
}

impl Db {
    /// Sets how searched nodes are read.
    pub(crate) fn set_node_reads(&mut self, reads: NodeReads) {
        self.tree.reads = reads;
    }
}

impl Structure for Db {
    fn footprint(elements: u64) -> u64 {
        STRUCT_OFF + NODE + SHAPE.capacity(2 * elements) * NODE
    }

    fn layout(h: &Header) -> Result<Self, WorkloadError> {
        debug_assert!(SHAPE.fits());
        Ok(Db {
            h: *h,
            tree: Tree {
                shape: SHAPE,
                root: h.state(ROOT),
                count: h.state(COUNT),
                slab: Slab {
                    base: crate::bptree::node_base(h),
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
        for first in (0..self.h.elements).step_by(FILL_BATCH as usize) {
            in_tx(p, |p| {
                let mut s = batch.on(p);
                for i in first..(first + FILL_BATCH).min(self.h.elements) {
                    self.tree.insert(&mut s, &key(2 * i), &value(2 * i))?;
                }
                Ok(s.finish()?)
            })?;
        }
        Ok(())
    }

    fn run_tx<P: Protocol>(
        &mut self,
        p: &mut P,
        batch: &mut Batch,
        ops: &mut Ops,
    ) -> Result<(), WorkloadError> {
        in_tx(p, |p| {
            let mut s = batch.on(p);
            let mut old = [0u8; VALUE];
            for _ in 0..ops.per_tx() {
                let k = key(ops.pick());
                let v = value(ops.value());
                if !self.tree.get(&mut s, &k, &mut old)? {
                    self.tree.insert(&mut s, &k, &v)?;
                } else if ops.below(2) == 0 {
                    self.tree.update(&mut s, &k, &v)?;
                } else {
                    self.tree.remove(&mut s, &k)?;
                }
            }
            Ok(s.finish()?)
        })
    }

    fn check<P: Protocol>(&self, p: &mut P) -> Result<Contents, CheckError> {
        let mut contents = Contents::default();
        let mut bad_key = None;
        self.tree.check(p, NAME, |k, v| {
            match std::str::from_utf8(k)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
            {
                Some(rank) => contents.add_bytes(rank, v),
                None => bad_key = Some(k.to_vec()),
            }
        })?;
        if let Some(k) = bad_key {
            return Err(CheckError::new(
                NAME,
                self.h.state(ROOT),
                format!(
                    "a row's key {:?} is not 16 decimal digits",
                    String::from_utf8_lossy(&k)
                ),
            ));
        }
        Ok(contents)
    }
}

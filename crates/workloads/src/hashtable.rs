//! A chained hash table of 8-byte keys and values (papers 000 and 001, after
//! NV-Heaps): a power-of-two array of bucket heads, each a singly linked list of
//! 32-byte nodes (`key`, `value`, `next`). One insert or delete per transaction.
//!
//! Checker: every node is reachable from exactly one bucket, lies in the node pool,
//! hashes to the bucket that holds it, and appears once; no key appears twice; the
//! count word equals the nodes reached; every other node is free (no leak).

use std::collections::HashSet;

use pmlab_spine::Addr;
use pmlab_tx::{Batch, Protocol, TxMemory};

use crate::contents::Contents;
use crate::error::{CheckError, WorkloadError, read_failed};
use crate::header::Header;
use crate::map::{Map, fill, toggle_tx};
use crate::slab::{Marks, Slab};
use crate::workload::{Ops, Structure};

/// The workload's name.
pub const NAME: &str = "hashtable";
const NODE: u64 = 32;
const COUNT: u64 = 0;
const POOL: u64 = 1;

/// The table.
pub struct HashTable {
    h: Header,
    buckets: Addr,
    bits: u32,
    slab: Slab,
}

fn bucket_bits(elements: u64) -> u32 {
    // About one key per bucket at the workload's steady size.
    64 - (elements.max(2) - 1).leading_zeros()
}

fn layout_of(h: &Header) -> (Addr, u32, Slab) {
    let bits = bucket_bits(h.elements);
    let buckets = h.body();
    let nodes = (buckets + 8 * (1u64 << bits)).div_ceil(64) * 64;
    let slab = Slab {
        base: nodes,
        node: NODE,
        // The key space is twice the elements: every key present at worst.
        cap: 2 * h.elements,
        state: h.state(POOL),
        workload: NAME,
    };
    (buckets, bits, slab)
}

impl HashTable {
    fn bucket(&self, key: u64) -> Addr {
        let hash = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.bits);
        self.buckets + 8 * hash
    }
}

impl Map for HashTable {
    fn get<T: TxMemory>(&self, m: &mut T, key: u64) -> Result<Option<u64>, WorkloadError> {
        let mut at = m.tx_read_u64(self.bucket(key))?;
        while at != 0 {
            if m.tx_read_u64(at)? == key {
                return Ok(Some(m.tx_read_u64(at + 8)?));
            }
            at = m.tx_read_u64(at + 16)?;
        }
        Ok(None)
    }

    fn insert<T: TxMemory>(&self, m: &mut T, key: u64, value: u64) -> Result<(), WorkloadError> {
        let b = self.bucket(key);
        let node = self.slab.alloc(m)?;
        let head = m.tx_read_u64(b)?;
        let mut img = [0u8; 24];
        img[0..8].copy_from_slice(&key.to_le_bytes());
        img[8..16].copy_from_slice(&value.to_le_bytes());
        img[16..24].copy_from_slice(&head.to_le_bytes());
        m.tx_write(node, &img)?;
        m.tx_write_u64(b, node)?;
        let count = m.tx_read_u64(self.h.state(COUNT))?;
        m.tx_write_u64(self.h.state(COUNT), count + 1)?;
        Ok(())
    }

    fn remove<T: TxMemory>(&self, m: &mut T, key: u64) -> Result<(), WorkloadError> {
        let mut link = self.bucket(key);
        let mut at = m.tx_read_u64(link)?;
        while at != 0 {
            let next = m.tx_read_u64(at + 16)?;
            if m.tx_read_u64(at)? == key {
                m.tx_write_u64(link, next)?;
                self.slab.free(m, at)?;
                let count = m.tx_read_u64(self.h.state(COUNT))?;
                m.tx_write_u64(self.h.state(COUNT), count.wrapping_sub(1))?;
                return Ok(());
            }
            link = at + 16;
            at = next;
        }
        Ok(())
    }
}

impl Structure for HashTable {
    fn footprint(elements: u64) -> u64 {
        let h = Header {
            base: 0,
            name: NAME,
            elements,
            footprint: 0,
            param: 0,
        };
        let (_, _, slab) = layout_of(&h);
        slab.base + slab.bytes()
    }

    fn layout(h: &Header) -> Result<Self, WorkloadError> {
        let (buckets, bits, slab) = layout_of(h);
        Ok(HashTable {
            h: *h,
            buckets,
            bits,
            slab,
        })
    }

    fn universe(&self) -> u64 {
        2 * self.h.elements
    }

    fn init<P: Protocol>(&mut self, p: &mut P, batch: &mut Batch) -> Result<(), WorkloadError> {
        let zeros = vec![0u8; 4096];
        let len = 8u64 << self.bits;
        for off in (0..len).step_by(4096) {
            let n = 4096.min(len - off) as usize;
            crate::workload::in_tx(p, |p| Ok(p.write(self.buckets + off, &zeros[..n])?))?;
        }
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
        let rd = |p: &mut P, a: Addr| p.read_u64(a).map_err(|e| read_failed(NAME, a, e));
        let bump = rd(p, self.slab.state + 8)?.min(self.slab.cap);
        let mut used = Marks::new(bump);
        let mut keys = HashSet::new();
        let mut contents = Contents::default();
        for b in 0..1u64 << self.bits {
            let bucket = self.buckets + 8 * b;
            let (mut from, mut at) = (bucket, rd(p, bucket)?);
            while at != 0 {
                let i = self.slab.index(at, bump).ok_or_else(|| {
                    CheckError::new(NAME, from, format!("link {at:#x} is not an allocated node"))
                })?;
                if !used.set(i) {
                    return Err(CheckError::new(
                        NAME,
                        at,
                        "a node is reached twice (a cycle or a shared node)",
                    ));
                }
                let (key, value) = (rd(p, at)?, rd(p, at + 8)?);
                if self.bucket(key) != bucket {
                    return Err(CheckError::new(
                        NAME,
                        at,
                        format!("key {key:#x} is in bucket {b}, not its own"),
                    ));
                }
                if !keys.insert(key) {
                    return Err(CheckError::new(
                        NAME,
                        at,
                        format!("key {key:#x} appears twice"),
                    ));
                }
                contents.add(key, value);
                from = at + 16;
                at = rd(p, at + 16)?;
            }
        }
        let count = rd(p, self.h.state(COUNT))?;
        if count != contents.count {
            return Err(CheckError::new(
                NAME,
                self.h.state(COUNT),
                format!(
                    "the count word says {count}, the buckets hold {}",
                    contents.count
                ),
            ));
        }
        self.slab.check(p, &used)?;
        Ok(contents)
    }
}

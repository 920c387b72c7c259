//! The store's checker (its fsck): the crash and kill tests hold every recovered store
//! against it, and it returns the contents for their oracles.
//!
//! It checks that the tables are well formed (power-of-two sizes, a rehash index inside
//! table 0 with every bucket below it empty, no table 1 outside a rehash), that every
//! entry sits in the bucket its stored hash selects, that the hash is the key's, that
//! no key appears twice and no entry is reached twice, that the entry counts are the
//! tables', and that the heap from its start to the bump pointer is exactly the blocks
//! in use (tables and entries) and the blocks on the free list of their class, each
//! once: nothing leaked, nothing both free and in use.

use std::collections::{BTreeMap, HashMap};

use crate::dict::{entry, slot};
use crate::error::KvError;
use crate::heap::{MAX_CLASS, MIN_CLASS, class_of};
use crate::layout::{NOT_REHASHING, hash_key, root};
use crate::view::View;

/// What a consistent store holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every key and its value.
    pub contents: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Buckets of tables 0 and 1.
    pub buckets: [u64; 2],
    /// Whether a rehash is running.
    pub rehashing: bool,
    /// Heap blocks in use and free.
    pub blocks_used: u64,
    /// Free blocks.
    pub blocks_free: u64,
    /// Heap bytes from its start to the bump pointer.
    pub heap_bytes: u64,
    /// SETs committed since format.
    pub sets: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    Table,
    Entry,
    Free,
}

/// Checks the store viewed by `v`.
pub fn check(v: &View<'_>) -> Result<Report, KvError> {
    let h = *v.header();
    let what = "store";
    let bad = |at: u64, p: String| KvError::corrupt(what, at, p);
    let mut uses: HashMap<u64, Use> = HashMap::new();
    let mut claim = |block: u64, u: Use, from: u64| -> Result<(), KvError> {
        if uses.insert(block, u).is_some() {
            return Err(bad(from, format!("block {block:#x} is reached twice")));
        }
        Ok(())
    };
    let mut report = Report {
        sets: v.root(root::SETS)?,
        ..Report::default()
    };
    let rehash = v.root(root::REHASH)?;
    report.rehashing = rehash != NOT_REHASHING;
    for t in 0..2u64 {
        check_table(v, t, rehash, &mut report, &mut claim)?;
    }
    if report.rehashing && rehash >= report.buckets[0] {
        return Err(bad(
            h.root + root::REHASH,
            format!(
                "rehash index {rehash} beyond table 0's {} buckets",
                report.buckets[0]
            ),
        ));
    }
    free_lists(v, &mut claim)?;
    walk_heap(v, &uses, &mut report)?;
    Ok(report)
}

/// Checks table `t` (its buckets, its chains, its entry count) and claims its blocks.
fn check_table(
    v: &View<'_>,
    t: u64,
    rehash: u64,
    report: &mut Report,
    claim: &mut impl FnMut(u64, Use, u64) -> Result<(), KvError>,
) -> Result<(), KvError> {
    let h = *v.header();
    let bad = |at: u64, p: String| KvError::corrupt("store", at, p);
    let (block, size, used) = (
        v.root(root::table(t))?,
        v.root(root::size(t))?,
        v.root(root::used(t))?,
    );
    let at = h.root + root::table(t);
    if block == 0 {
        if size != 0 || used != 0 || (t == 1 && report.rehashing) {
            return Err(bad(
                at,
                format!("table {t} has no buckets but size {size}, {used} entries"),
            ));
        }
        return Ok(());
    }
    if t == 1 && !report.rehashing {
        return Err(bad(at, "table 1 exists outside a rehash".into()));
    }
    if !size.is_power_of_two() {
        return Err(bad(
            at + 8,
            format!("bucket count {size} is not a power of two"),
        ));
    }
    v.check_entry_ptr(block, at)?;
    let class = class_of(v.u64_at(block)?)
        .ok_or_else(|| bad(block, "table block without a block header".into()))?;
    if (1u64 << class) < 8 + 8 * size {
        return Err(bad(
            block,
            format!(
                "table of {size} buckets in a block of {} bytes",
                1u64 << class
            ),
        ));
    }
    claim(block, Use::Table, at)?;
    report.buckets[t as usize] = size;
    let mut count = 0;
    for idx in 0..size {
        let mut link = slot(block, idx);
        let mut e = v.u64_at(link)?;
        if t == 0 && report.rehashing && idx < rehash && e != 0 {
            return Err(bad(
                link,
                format!("bucket {idx} below the rehash index {rehash} is not empty"),
            ));
        }
        while e != 0 {
            v.check_entry_ptr(e, link)?;
            claim(e, Use::Entry, link)?;
            check_entry(v, e, idx, size, report)?;
            count += 1;
            link = e + entry::NEXT;
            e = v.u64_at(link)?;
        }
    }
    if count != used {
        return Err(bad(
            h.root + root::used(t),
            format!("table {t} counts {used} entries, holds {count}"),
        ));
    }
    Ok(())
}

fn check_entry(
    v: &View<'_>,
    e: u64,
    idx: u64,
    size: u64,
    report: &mut Report,
) -> Result<(), KvError> {
    let h = v.header();
    let class = class_of(v.u64_at(e)?)
        .ok_or_else(|| KvError::corrupt("store", e, "entry without a block header"))?;
    let (key, value) = v.entry(e)?;
    if 32 + key.len() as u64 + value.len() as u64 > 1u64 << class {
        return Err(KvError::corrupt("store", e, "entry larger than its block"));
    }
    let hash = v.u64_at(e + entry::HASH)?;
    if hash != hash_key(h.seed, key) {
        return Err(KvError::corrupt(
            "store",
            e + entry::HASH,
            "stored hash is not the key's",
        ));
    }
    if hash & (size - 1) != idx {
        return Err(KvError::corrupt(
            "store",
            e,
            format!(
                "entry in bucket {idx}, its hash selects {}",
                hash & (size - 1)
            ),
        ));
    }
    if report
        .contents
        .insert(key.to_vec(), value.to_vec())
        .is_some()
    {
        return Err(KvError::corrupt(
            "store",
            e,
            format!("key {:?} appears twice", String::from_utf8_lossy(key)),
        ));
    }
    Ok(())
}

fn free_lists(
    v: &View<'_>,
    claim: &mut impl FnMut(u64, Use, u64) -> Result<(), KvError>,
) -> Result<(), KvError> {
    let h = v.header();
    for class in 0..48u32 {
        let at = h.root + root::free(class);
        let mut link = at;
        let mut b = v.u64_at(at)?;
        if b != 0 && !(MIN_CLASS..=MAX_CLASS).contains(&class) {
            return Err(KvError::corrupt(
                "store",
                at,
                format!("free list of unused class {class}"),
            ));
        }
        while b != 0 {
            v.check_entry_ptr(b, link)?;
            if class_of(v.u64_at(b)?) != Some(class) {
                return Err(KvError::corrupt(
                    "store",
                    b,
                    format!("block on the free list of class {class} is not of that class"),
                ));
            }
            claim(b, Use::Free, link)?;
            link = b + 8;
            b = v.u64_at(link)?;
        }
    }
    Ok(())
}

fn walk_heap(v: &View<'_>, uses: &HashMap<u64, Use>, report: &mut Report) -> Result<(), KvError> {
    let h = v.header();
    let bump = v.root(root::BUMP)?;
    if bump < h.heap || bump > h.size {
        return Err(KvError::corrupt(
            "store",
            h.root + root::BUMP,
            format!("bump pointer {bump:#x} outside the heap"),
        ));
    }
    let mut at = h.heap;
    let mut seen = 0;
    while at < bump {
        let class = class_of(v.u64_at(at)?)
            .ok_or_else(|| KvError::corrupt("store", at, "no block header where a block begins"))?;
        match uses.get(&at) {
            None => {
                return Err(KvError::corrupt(
                    "store",
                    at,
                    format!(
                        "block of {} bytes is neither in use nor free: leaked",
                        1u64 << class
                    ),
                ));
            }
            Some(Use::Free) => report.blocks_free += 1,
            Some(_) => report.blocks_used += 1,
        }
        seen += 1;
        at += 1 << class;
    }
    if at != bump {
        return Err(KvError::corrupt(
            "store",
            at,
            "the last block runs past the bump pointer",
        ));
    }
    if seen != uses.len() {
        return Err(KvError::corrupt(
            "store",
            h.heap,
            format!(
                "{} blocks are reached, {seen} lie in the heap: a link into the middle of a block",
                uses.len()
            ),
        ));
    }
    report.heap_bytes = bump - h.heap;
    Ok(())
}

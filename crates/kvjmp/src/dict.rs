//! Redis's dict in the segment: two chained hash tables and incremental rehashing.
//!
//! As in Redis, table 0 is the live table; when its entry count reaches its bucket
//! count it is expanded by starting a rehash into table 1 of twice the entries, and
//! each later update moves one bucket (skipping at most ten empty ones) until table 0
//! is empty, then table 1 becomes table 0. Lookups during a rehash search both tables;
//! new keys go to table 1. Unlike Redis, resizing and rehash steps happen only in SETs,
//! which hold the segment's lock exclusively (§5.3: "we modified it to resize and
//! rehash entries only when a client has an exclusive lock"); GETs hold it shared and
//! never change anything.
//!
//! An entry is one heap block: `next`, `hash`, key length (u32), value length (u32),
//! the key's bytes, the value's bytes. Tables and chains hold block offsets (0: none).

use pmlab_spine::Addr;
use pmlab_tx::TxMemory;

use crate::heap::{self, AllocError, SegTx};
use crate::layout::{Header, NOT_REHASHING, hash_key, root};

/// Payload offset of an entry's fields within its block.
pub mod entry {
    /// The next entry in the chain.
    pub const NEXT: u64 = 8;
    /// The key's hash.
    pub const HASH: u64 = 16;
    /// Key length (u32) then value length (u32).
    pub const LENS: u64 = 24;
    /// The key's first byte; the value follows the key.
    pub const KEY: u64 = 32;
}

/// The bucket slot `idx` of the table in block `table`.
pub fn slot(table: Addr, idx: u64) -> Addr {
    table + 8 + 8 * idx
}

/// What a SET did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetEffect {
    /// The key existed (its value was replaced).
    pub replaced: bool,
    /// A rehash was started by this SET.
    pub expanded: bool,
    /// Buckets this SET moved from table 0 to table 1.
    pub buckets_moved: u64,
}

#[derive(Clone, Copy, Default)]
struct Table {
    block: Addr,
    size: u64,
}

/// The root's first 56 bytes as the running SET sees them: both tables (block, size,
/// entries) and the rehash index. A SET reads them in one transactional read, its
/// steps (rehash, expansion, insert) change this copy, and [`RootLine::write_back`]
/// stores them in one transactional write if anything changed — instead of a read and
/// a write through the transaction per field. Nothing else in a SET reads or writes
/// these bytes (the allocator's fields follow them), so the copy is the transaction's
/// view of them until it is written back.
struct RootLine {
    tables: [Table; 2],
    used: [u64; 2],
    rehash: u64,
    changed: bool,
}

/// Bytes of [`RootLine`] at the root's start.
const ROOT_LINE: usize = 56;

impl RootLine {
    fn read<T: TxMemory>(tx: &mut T, h: &Header) -> Result<RootLine, AllocError> {
        let mut b = [0u8; ROOT_LINE];
        tx.tx_read(h.root, &mut b)?;
        let w = |f: u64| {
            let at = f as usize;
            u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
        };
        let t = |i: u64| Table {
            block: w(root::table(i)),
            size: w(root::size(i)),
        };
        Ok(RootLine {
            tables: [t(0), t(1)],
            used: [w(root::used(0)), w(root::used(1))],
            rehash: w(root::REHASH),
            changed: false,
        })
    }

    fn write_back<T: TxMemory>(&mut self, tx: &mut T, h: &Header) -> Result<(), AllocError> {
        if !self.changed {
            return Ok(());
        }
        self.changed = false;
        let mut b = [0u8; ROOT_LINE];
        let mut put = |f: u64, v: u64| {
            b[f as usize..f as usize + 8].copy_from_slice(&v.to_le_bytes());
        };
        for t in 0..2 {
            put(root::table(t), self.tables[t as usize].block);
            put(root::size(t), self.tables[t as usize].size);
            put(root::used(t), self.used[t as usize]);
        }
        put(root::REHASH, self.rehash);
        tx.tx_write(h.root, &b)?;
        Ok(())
    }

    fn rehashing(&self) -> bool {
        self.rehash != NOT_REHASHING
    }
}

/// An entry's `next`, `hash` and lengths, read in one transactional read.
struct EntryHead {
    next: Addr,
    hash: u64,
    key_len: usize,
    value_len: usize,
}

fn entry_head<T: TxMemory>(tx: &mut T, e: Addr) -> Result<EntryHead, AllocError> {
    let mut b = [0u8; 24];
    tx.tx_read(e + entry::NEXT, &mut b)?;
    let w = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    Ok(EntryHead {
        next: w(0),
        hash: w(1),
        key_len: w(2) as u32 as usize,
        value_len: (w(2) >> 32) as usize,
    })
}

/// Stores `value` under `key` in one running transaction: a rehash step, an expansion
/// when the table is full, then the insert or replacement.
pub fn set<T: SegTx>(
    tx: &mut T,
    h: &Header,
    key: &[u8],
    value: &[u8],
) -> Result<SetEffect, AllocError> {
    set_hashed(tx, h, key, value, hash_key(h.seed, key))
}

/// [`set`] of a key whose hash the caller computed already.
pub fn set_hashed<T: SegTx>(
    tx: &mut T,
    h: &Header,
    key: &[u8],
    value: &[u8],
    hash: u64,
) -> Result<SetEffect, AllocError> {
    let mut effect = SetEffect::default();
    let mut line = RootLine::read(tx, h)?;
    if line.rehashing() {
        effect.buckets_moved = rehash_step(tx, h, &mut line)?;
    }
    if let Some((link, old, head)) = find(tx, &line, key, hash)? {
        effect.replaced = true;
        replace(tx, h, link, old, &head, key, value)?;
    } else {
        effect.expanded = expand_if_needed(tx, h, &mut line)?;
        insert(tx, h, &mut line, key, value, hash)?;
    }
    line.write_back(tx, h)?;
    let sets = tx.tx_read_u64(h.root + root::SETS)?;
    tx.tx_write_u64(h.root + root::SETS, sets + 1)?;
    Ok(effect)
}

/// The tables a SET probes, as of the last committed state a client saw: table 0's
/// block and size, and table 1's during a rehash (block 0: none). A hint for
/// prefetching only (see [`prefetch_slots`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tables(pub [(Addr, u64); 2]);

impl Tables {
    /// The tables as the root's committed fields name them; `seg` is the segment,
    /// readable (switched in).
    pub fn read(seg: &[u8], h: &Header) -> Tables {
        let field = |f: u64| {
            let at = (h.root + f) as usize;
            seg.get(at..at + 8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        let mut t = Tables::default();
        let tables = if field(root::REHASH) == NOT_REHASHING {
            1
        } else {
            2
        };
        for (i, tb) in t.0.iter_mut().enumerate().take(tables) {
            *tb = (field(root::table(i as u64)), field(root::size(i as u64)));
        }
        t
    }

    /// The bucket slots of `hash` in these tables.
    fn slots(&self, hash: u64) -> impl Iterator<Item = Addr> + '_ {
        self.0
            .iter()
            .filter(|(block, size)| *block != 0 && *size != 0)
            .map(move |&(block, size)| slot(block, hash & (size - 1)))
    }
}

/// Starts fetching the cache lines of the bucket slots of `hash` in `tables` (a
/// store's segment is `seg_len` bytes at `base`), so that the miss a SET takes on its
/// bucket overlaps the work before its probe (the switch in, parsing the request). A
/// hint only: a prefetch reads nothing architecturally and never faults, so it may be
/// issued before switching in, from tables remembered from an earlier SET; stale
/// tables merely fetch a line for nothing.
pub fn prefetch_slots(base: *const u8, seg_len: u64, tables: &Tables, hash: u64) {
    for at in tables.slots(hash).filter(|&a| a + 8 <= seg_len) {
        prefetch(base.wrapping_add(at as usize));
    }
}

/// Starts fetching the first entry of each of `hash`'s chains (switched in: the
/// slots are read), so that the probe's second dependent miss overlaps the work
/// between this call and the probe too. A hint only, like [`prefetch_slots`].
pub fn prefetch_entries(seg: &[u8], tables: &Tables, hash: u64) {
    for at in tables.slots(hash) {
        let e = seg
            .get(at as usize..at as usize + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        if e != 0 && e + entry::KEY < seg.len() as u64 {
            prefetch(seg[e as usize..].as_ptr());
        }
    }
}

/// Starts fetching the entry the next rehash step will move: the first one in the
/// next non-empty bucket of table 0, as `rehash_step` looks for it. A SET calls it as
/// it ends, so that the entry's miss is taken between this SET and the next instead of
/// inside the next one's transaction. A hint only, like [`prefetch_slots`]; `seg` is
/// the segment, readable (switched in).
pub fn prefetch_rehash(seg: &[u8], h: &Header) {
    let word = |at: u64| {
        seg.get(at as usize..at as usize + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    let idx = word(h.root + root::REHASH);
    let (t0, size0) = (word(h.root + root::table(0)), word(h.root + root::size(0)));
    if idx == NOT_REHASHING || t0 == 0 {
        return;
    }
    let next = (idx..size0.min(idx.saturating_add(10)))
        .map(|i| word(slot(t0, i)))
        .find(|&e| e != 0);
    if let Some(e) = next.filter(|&e| e + entry::KEY < seg.len() as u64) {
        prefetch(seg[e as usize..].as_ptr());
    }
}

#[cfg(target_arch = "x86_64")]
fn prefetch(at: *const u8) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    // SAFETY: a prefetch has no architectural effect and never faults, whatever the
    // address (it is not dereferenced).
    unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast()) };
}

#[cfg(not(target_arch = "x86_64"))]
fn prefetch(_at: *const u8) {}

/// The link that points to `key`'s entry (a bucket slot or a `next` field), the entry
/// and its head, searching table 0 and, during a rehash, table 1.
fn find<T: TxMemory>(
    tx: &mut T,
    line: &RootLine,
    key: &[u8],
    hash: u64,
) -> Result<Option<(Addr, Addr, EntryHead)>, AllocError> {
    for tb in &line.tables[..if line.rehashing() { 2 } else { 1 }] {
        if tb.block == 0 {
            continue;
        }
        let mut link = slot(tb.block, hash & (tb.size - 1));
        let mut e = tx.tx_read_u64(link)?;
        while e != 0 {
            let head = entry_head(tx, e)?;
            if head.hash == hash && head.key_len == key.len() && key_is(tx, e + entry::KEY, key)? {
                return Ok(Some((link, e, head)));
            }
            link = e + entry::NEXT;
            e = head.next;
        }
    }
    Ok(None)
}

/// Whether the bytes at `at` are `key`, compared a chunk at a time through a buffer on
/// the stack (a SET allocates nothing).
fn key_is<T: TxMemory>(tx: &mut T, at: Addr, key: &[u8]) -> Result<bool, AllocError> {
    let mut buf = [0u8; 64];
    let mut at = at;
    for chunk in key.chunks(buf.len()) {
        let b = &mut buf[..chunk.len()];
        tx.tx_read(at, b)?;
        if b != chunk {
            return Ok(false);
        }
        at += chunk.len() as u64;
    }
    Ok(true)
}

/// An entry's bytes assembled in one buffer (on the stack when they fit, as a SET of
/// a short key and value does), so that it is one write to the transaction.
const ENTRY_ON_STACK: usize = 256;

fn write_entry<T: SegTx>(
    tx: &mut T,
    e: Addr,
    next: Addr,
    hash: u64,
    key: &[u8],
    value: &[u8],
) -> Result<(), AllocError> {
    let n = 24 + key.len() + value.len();
    let mut stack = [0u8; ENTRY_ON_STACK];
    let mut heap = Vec::new();
    let rec = if n <= ENTRY_ON_STACK {
        &mut stack[..n]
    } else {
        heap.resize(n, 0);
        &mut heap[..]
    };
    rec[..8].copy_from_slice(&next.to_le_bytes());
    rec[8..16].copy_from_slice(&hash.to_le_bytes());
    rec[16..20].copy_from_slice(&(key.len() as u32).to_le_bytes());
    rec[20..24].copy_from_slice(&(value.len() as u32).to_le_bytes());
    rec[24..24 + key.len()].copy_from_slice(key);
    rec[24 + key.len()..].copy_from_slice(value);
    tx.tx_write(e + entry::NEXT, rec)?;
    Ok(())
}

/// A new value for an existing key: in place when it has the old one's length (Redis
/// replaces the value object; one small logged write here), else a new entry in the
/// old one's place in the chain and the old block freed.
fn replace<T: SegTx>(
    tx: &mut T,
    h: &Header,
    link: Addr,
    old: Addr,
    head: &EntryHead,
    key: &[u8],
    value: &[u8],
) -> Result<(), AllocError> {
    if head.value_len == value.len() {
        tx.tx_write(old + entry::KEY + key.len() as u64, value)?;
        return Ok(());
    }
    let e = heap::alloc(tx, h, (24 + key.len() + value.len()) as u64)?;
    write_entry(tx, e, head.next, head.hash, key, value)?;
    tx.tx_write_u64(link, e)?;
    heap::free(tx, h, old)
}

fn insert<T: SegTx>(
    tx: &mut T,
    h: &Header,
    line: &mut RootLine,
    key: &[u8],
    value: &[u8],
    hash: u64,
) -> Result<(), AllocError> {
    let t = usize::from(line.rehashing());
    line.used[t] += 1;
    line.changed = true;
    // The root's table fields are final for this SET now. Written before the
    // allocation, they are the transaction's last write when the allocator stores the
    // bump pointer that follows them in the root, so the two are logged as one record
    // (16 bytes of log and one store to apply fewer than two records).
    line.write_back(tx, h)?;
    let e = heap::alloc(tx, h, (24 + key.len() + value.len()) as u64)?;
    let tb = line.tables[t];
    let at = slot(tb.block, hash & (tb.size - 1));
    let head = tx.tx_read_u64(at)?;
    write_entry(tx, e, head, hash, key, value)?;
    tx.tx_write_u64(at, e)?;
    Ok(())
}

/// A zeroed table of `size` buckets; returns its block.
fn new_table<T: SegTx>(tx: &mut T, h: &Header, size: u64) -> Result<Addr, AllocError> {
    let block = heap::alloc(tx, h, size * 8)?;
    tx.tx_write_u64(slot(block, 0), 0)?;
    tx.zero_unlogged(slot(block, 1), (size - 1) * 8)?;
    Ok(block)
}

/// Creates table 0 (4 buckets, Redis's initial size) or starts a rehash into a table
/// for twice the entries, when table 0 is full (Redis's load factor 1).
fn expand_if_needed<T: SegTx>(
    tx: &mut T,
    h: &Header,
    line: &mut RootLine,
) -> Result<bool, AllocError> {
    if line.rehashing() {
        return Ok(false);
    }
    let t0 = line.tables[0];
    if t0.block == 0 {
        line.tables[0] = Table {
            block: new_table(tx, h, 4)?,
            size: 4,
        };
        line.changed = true;
        return Ok(false);
    }
    let used = line.used[0];
    if used < t0.size {
        return Ok(false);
    }
    let size = (used * 2).next_power_of_two();
    line.tables[1] = Table {
        block: new_table(tx, h, size)?,
        size,
    };
    line.used[1] = 0;
    line.rehash = 0;
    line.changed = true;
    Ok(true)
}

/// Redis's `dictRehash(d, 1)`: moves the next non-empty bucket of table 0 (visiting at
/// most ten empty ones) to table 1; finishes the rehash when table 0 is empty.
/// Returns the buckets moved (0 or 1).
fn rehash_step<T: SegTx>(tx: &mut T, h: &Header, line: &mut RootLine) -> Result<u64, AllocError> {
    let [t0, t1] = line.tables;
    let mut idx = line.rehash;
    let mut moved = 0;
    let mut empty_visits = 10;
    // Table 0's count changes only when a bucket moves, which ends the loop.
    while idx < t0.size && line.used[0] != 0 {
        let mut e = tx.tx_read_u64(slot(t0.block, idx))?;
        if e == 0 {
            idx += 1;
            empty_visits -= 1;
            if empty_visits == 0 {
                break;
            }
            continue;
        }
        let mut n = 0;
        while e != 0 {
            let head = entry_head(tx, e)?;
            let (next, to) = (head.next, slot(t1.block, head.hash & (t1.size - 1)));
            let head = tx.tx_read_u64(to)?;
            tx.tx_write_u64(e + entry::NEXT, head)?;
            tx.tx_write_u64(to, e)?;
            e = next;
            n += 1;
        }
        tx.tx_write_u64(slot(t0.block, idx), 0)?;
        line.used[0] = line.used[0].wrapping_sub(n);
        line.used[1] = line.used[1].wrapping_add(n);
        idx += 1;
        moved = 1;
        break;
    }
    if line.used[0] == 0 {
        heap::free(tx, h, t0.block)?;
        line.tables = [t1, Table::default()];
        line.used = [line.used[1], 0];
        idx = NOT_REHASHING;
    }
    line.rehash = idx;
    line.changed = true;
    Ok(moved)
}

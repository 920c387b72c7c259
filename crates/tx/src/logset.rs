//! The redo protocol's write set, kept as the body of the log that will commit it.
//!
//! A redo transaction buffers its stores until commit, then logs them, then applies
//! them. Here they are buffered in the log's own record format — `addr`, `len`, the
//! bytes padded to 8 — in the order the records were made, so that a commit checksums
//! and copies the body as it is instead of encoding every record again; a sorted index
//! of the extents serves the transaction's reads, the search of each write, and the
//! apply and its flushes in address order. Records in the log may come in any order:
//! they are disjoint, so replaying them in any order leaves the same bytes.
//!
//! Each byte is logged once. A write inside an extent lands in its record. A write
//! that overlaps extents merges them into one new record; the old records stay in the
//! body, dead, until commit re-encodes the live ones (rare: a transaction that writes
//! over part of its own earlier writes). A write that only touches an extent stays a
//! record of its own, unless it extends the last record made, which grows in place (an
//! allocator's block header, then the block's contents): merging two records costs
//! copies that one more 16-byte record head does not.
//!
//! A transaction reads far more often than it writes, and mostly bytes it did not
//! write (a hash table's probe, say), so a read first asks a one-word filter of the
//! lines written: a bit per line hashed to 64, set by every insert. A read whose lines
//! have no bit set skips the search of the extents; a set bit searches them, so the
//! filter changes no result.

use pmlab_spine::{Addr, LINE, Memory, SpineError};

use crate::ranges::flush_line_runs;
use crate::redo::redo_record_len;

/// Bytes of a record's head: `addr` and `len`.
const HEAD: usize = 16;

/// One extent: the bytes `[addr, end)`, whose record starts at `at` in the body.
#[derive(Clone, Copy, Debug)]
struct Extent {
    addr: Addr,
    end: Addr,
    at: usize,
}

impl Extent {
    fn len(&self) -> u64 {
        self.end - self.addr
    }

    /// Where the extent's bytes start in the body.
    fn data(&self) -> usize {
        self.at + HEAD
    }
}

/// The bytes a redo transaction wrote, as log records (see the module).
#[derive(Clone, Debug, Default)]
pub(crate) struct LogWriteSet {
    /// In address order, disjoint (touching ones may stay apart).
    extents: Vec<Extent>,
    /// Records in the order they were made; the log body when `dead` is 0.
    body: Vec<u8>,
    /// Bytes of `body` in records that a merge replaced.
    dead: usize,
    /// Where a commit re-encodes the live records when some are dead (kept for its
    /// allocation).
    spare: Vec<u8>,
    lines: u64,
}

/// The filter bits of the lines `[addr, end)` touches; all bits when they are many.
#[inline]
fn line_bits(addr: Addr, end: Addr) -> u64 {
    let bit = |line: u64| 1 << (line.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58);
    let (first, last) = (addr / LINE, (end - 1) / LINE);
    if first == last {
        // Most reads and writes are a word or a few, inside one line.
        return bit(first);
    }
    if last - first >= 8 {
        return u64::MAX;
    }
    (first..=last).fold(0, |m, l| m | bit(l))
}

/// Bytes of the record of `len` data bytes.
fn record_len(len: u64) -> usize {
    redo_record_len(len) as usize
}

/// A record's head: `addr` and `len`.
fn head(addr: Addr, len: u64) -> [u8; HEAD] {
    let mut h = [0u8; HEAD];
    h[..8].copy_from_slice(&addr.to_le_bytes());
    h[8..].copy_from_slice(&len.to_le_bytes());
    h
}

/// Appends the record of `data` for `addr` to `body`.
#[inline]
fn push_record(body: &mut Vec<u8>, addr: Addr, data: &[u8]) {
    if let Ok(word) = <&[u8; 8]>::try_from(data) {
        // Most stores are one word (a pointer, a counter): a fixed-size record, copied
        // without a call.
        let mut rec = [0u8; HEAD + 8];
        rec[..HEAD].copy_from_slice(&head(addr, 8));
        rec[HEAD..].copy_from_slice(word);
        body.extend_from_slice(&rec);
        return;
    }
    push_bytes_record(body, addr, data);
}

/// [`push_record`] of any length, kept apart so that the one-word case, inlined where
/// it is used, pays for none of its registers.
#[inline(never)]
fn push_bytes_record(body: &mut Vec<u8>, addr: Addr, data: &[u8]) {
    let at = body.len();
    body.extend_from_slice(&head(addr, data.len() as u64));
    body.extend_from_slice(data);
    pad_to(body, at + record_len(data.len() as u64));
}

/// Zero-fills `body` up to `len`, less than 8 bytes past its end: one word of zeros
/// appended and cut back, rather than a fill of a length unknown here (a call).
fn pad_to(body: &mut Vec<u8>, len: usize) {
    body.extend_from_slice(&[0u8; 8]);
    body.truncate(len);
}

impl LogWriteSet {
    /// Forgets everything (keeping the allocations for the next transaction).
    pub(crate) fn clear(&mut self) {
        self.extents.clear();
        self.body.clear();
        self.dead = 0;
        self.lines = 0;
    }

    /// Whether nothing was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    /// Bytes of the log body that would commit the writes so far.
    pub(crate) fn log_body_len(&self) -> u64 {
        (self.body.len() - self.dead) as u64
    }

    /// The extents as `(addr, bytes)`, in address order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Addr, &[u8])> + '_ {
        self.extents
            .iter()
            .map(|e| (e.addr, &self.body[e.data()..e.data() + e.len() as usize]))
    }

    /// The log body of the writes and its number of records, re-encoding the live
    /// records first if a merge left dead ones.
    pub(crate) fn log_body(&mut self) -> (&[u8], u64) {
        if self.dead != 0 {
            self.compact();
        }
        (&self.body, self.extents.len() as u64)
    }

    fn compact(&mut self) {
        self.spare.clear();
        for e in &mut self.extents {
            let data = &self.body[e.data()..e.data() + e.len() as usize];
            let at = self.spare.len();
            push_record(&mut self.spare, e.addr, data);
            e.at = at;
        }
        std::mem::swap(&mut self.body, &mut self.spare);
        self.dead = 0;
        self.debug_check_around(0, self.extents.len());
    }

    /// Records `data` (not empty) at `addr` if the log body stays within `limit` bytes;
    /// otherwise changes nothing and returns the body's length had it been recorded.
    pub(crate) fn insert(&mut self, addr: Addr, data: &[u8], limit: u64) -> Result<(), u64> {
        let end = addr + data.len() as u64;
        let first = self.first_after(addr);
        match self.extents.get(first) {
            Some(e) if e.addr <= addr && end <= e.end => {
                // Inside an extent: its lines are in the filter already.
                let at = e.data() + (addr - e.addr) as usize;
                self.body[at..at + data.len()].copy_from_slice(data);
                return Ok(());
            }
            Some(e) if e.addr < end => return self.merge(first, addr, data, limit),
            _ => {}
        }
        let grows = first
            .checked_sub(1)
            .filter(|&i| self.extents[i].end == addr && self.is_last_record(i));
        match grows {
            Some(i) => self.grow(i, data, limit)?,
            None => self.add(first, addr, data, limit)?,
        }
        self.lines |= line_bits(addr, end);
        Ok(())
    }

    /// The index of the first extent that ends after `addr`. A transaction's few
    /// extents are counted, each compared independently of the others, rather than
    /// bisected, where each step's load waits for the step before.
    fn first_after(&self, addr: Addr) -> usize {
        if self.extents.len() <= 16 {
            return self.extents.iter().filter(|e| e.end <= addr).count();
        }
        self.extents.partition_point(|e| e.end <= addr)
    }

    /// Whether extent `i`'s record is the last in the body.
    fn is_last_record(&self, i: usize) -> bool {
        let e = self.extents[i];
        e.at + record_len(e.len()) == self.body.len()
    }

    /// The body's live length after replacing records of `removed` bytes by one of
    /// `added` data bytes, if it stays within `limit`.
    fn fits(&self, removed: usize, added: u64, limit: u64) -> Result<(), u64> {
        let after = self.log_body_len() - removed as u64 + redo_record_len(added);
        if after > limit { Err(after) } else { Ok(()) }
    }

    /// A new record of its own for `data`, extent `first` in address order.
    fn add(&mut self, first: usize, addr: Addr, data: &[u8], limit: u64) -> Result<(), u64> {
        self.fits(0, data.len() as u64, limit)?;
        let at = self.body.len();
        push_record(&mut self.body, addr, data);
        let end = addr + data.len() as u64;
        self.extents.insert(first, Extent { addr, end, at });
        self.debug_check_around(first, first + 1);
        Ok(())
    }

    /// `data` appended to extent `i`, whose record is the body's last and ends where
    /// `data` starts.
    fn grow(&mut self, i: usize, data: &[u8], limit: u64) -> Result<(), u64> {
        let e = self.extents[i];
        let len = e.len() + data.len() as u64;
        self.fits(record_len(e.len()), len, limit)?;
        self.body.truncate(e.data() + e.len() as usize);
        match <&[u8; 8]>::try_from(data) {
            Ok(word) => self.body.extend_from_slice(word),
            Err(_) => self.body.extend_from_slice(data),
        }
        pad_to(&mut self.body, e.at + record_len(len));
        self.body[e.at + 8..e.data()].copy_from_slice(&len.to_le_bytes());
        self.extents[i].end += data.len() as u64;
        self.debug_check_around(i, i + 1);
        Ok(())
    }

    /// `data` over the extents it overlaps, from `first` on: one new record of their
    /// union, theirs left dead. Rare, and kept out of the common paths' code.
    #[cold]
    #[inline(never)]
    fn merge(&mut self, first: usize, addr: Addr, data: &[u8], limit: u64) -> Result<(), u64> {
        let end = addr + data.len() as u64;
        let last = first + self.extents[first..].partition_point(|e| e.addr < end);
        let merged = &self.extents[first..last];
        let lo = merged[0].addr.min(addr);
        let hi = merged[merged.len() - 1].end.max(end);
        let removed: usize = merged.iter().map(|e| record_len(e.len())).sum();
        self.fits(removed, hi - lo, limit)?;
        let at = self.body.len();
        self.body.extend_from_slice(&head(lo, hi - lo));
        self.body.resize(at + record_len(hi - lo), 0);
        for e in first..last {
            let e = self.extents[e];
            let to = at + HEAD + (e.addr - lo) as usize;
            self.body
                .copy_within(e.data()..e.data() + e.len() as usize, to);
        }
        let to = at + HEAD + (addr - lo) as usize;
        self.body[to..to + data.len()].copy_from_slice(data);
        self.dead += removed;
        self.extents[first] = Extent {
            addr: lo,
            end: hi,
            at,
        };
        self.extents.drain(first + 1..last);
        self.lines |= line_bits(addr, end);
        self.debug_check_around(first, first + 1);
        Ok(())
    }

    /// Debug builds: the extents `[lo, hi)` and their neighbours are in address order
    /// and disjoint, and each one's record in the body names it — the invariant the
    /// searches, the reads and the log rely on. Checking only where the set changed
    /// keeps an insert O(log n) when every insert before held the invariant.
    fn debug_check_around(&self, lo: usize, hi: usize) {
        if cfg!(debug_assertions) {
            let lo = lo.saturating_sub(1);
            let hi = (hi + 1).min(self.extents.len());
            for w in self.extents[lo..hi].windows(2) {
                debug_assert!(w[0].end <= w[1].addr, "write set extents {w:?} overlap");
            }
            for e in &self.extents[lo..hi] {
                let word = |at: usize| {
                    self.body
                        .get(at..at + 8)
                        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                };
                debug_assert!(
                    e.len() > 0
                        && e.at + record_len(e.len()) <= self.body.len()
                        && word(e.at) == Some(e.addr)
                        && word(e.at + 8) == Some(e.len()),
                    "extent {e:?} does not match its record"
                );
            }
        }
    }

    /// Lays the recorded bytes that overlap `[addr, addr + buf.len())` over `buf`.
    #[inline]
    pub(crate) fn overlay(&self, addr: Addr, buf: &mut [u8]) {
        let end = addr + buf.len() as u64;
        if buf.is_empty() || self.lines & line_bits(addr, end) == 0 {
            return;
        }
        self.overlay_extents(addr, buf);
    }

    /// [`LogWriteSet::overlay`] past the filter: the search of the extents.
    fn overlay_extents(&self, addr: Addr, buf: &mut [u8]) {
        let end = addr + buf.len() as u64;
        let first = self.extents.partition_point(|e| e.end <= addr);
        for e in &self.extents[first..] {
            if e.addr >= end {
                break;
            }
            let (s, t) = (e.addr.max(addr), e.end.min(end));
            let src = e.data() + (s - e.addr) as usize;
            buf[(s - addr) as usize..(t - addr) as usize]
                .copy_from_slice(&self.body[src..src + (t - s) as usize]);
        }
    }

    /// Flushes (`clwb`) every line the extents touch, each once, in address order.
    pub(crate) fn flush_lines<M: Memory + ?Sized>(&self, mem: &mut M) -> Result<(), SpineError> {
        flush_line_runs(mem, self.extents.iter().map(|e| (e.addr, e.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// The body as a log: replaying its records in order over `buf` (at offset 0).
    fn replay(body: &[u8], buf: &mut [Option<u8>]) -> usize {
        let word = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().unwrap());
        let (mut at, mut records) = (0, 0);
        while at < body.len() {
            let (addr, len) = (word(at) as usize, word(at + 8) as usize);
            for i in 0..len {
                buf[addr + i] = Some(body[at + HEAD + i]);
            }
            at += record_len(len as u64);
            records += 1;
        }
        assert_eq!(at, body.len());
        records
    }

    /// The write set against a byte-array model: every read overlays exactly the last
    /// bytes written, the extents stay sorted and disjoint, and the log body, replayed,
    /// writes exactly the model's bytes, each once.
    #[test]
    fn write_set_matches_a_byte_model() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for round in 0..300 {
            let mut ws = LogWriteSet::default();
            let mut model: Vec<Option<u8>> = vec![None; 512];
            for _ in 0..rng.gen_range(1..20) {
                // Small and word-sized writes, some right after the one before (the
                // growing case).
                let len = match rng.gen_range(0..4) {
                    0 => 8,
                    _ => rng.gen_range(1..40usize),
                };
                let addr = rng.gen_range(0..512 - len);
                let data: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
                let before = ws.log_body_len();
                // An insert refused by its limit changes nothing, and says what it needed.
                let body = ws.body.clone();
                if let Err(needed) = ws.insert(addr as u64, &data, before) {
                    assert!(needed > before);
                    assert_eq!(ws.body, body);
                }
                ws.insert(addr as u64, &data, u64::MAX).unwrap();
                for (i, b) in data.iter().enumerate() {
                    model[addr + i] = Some(*b);
                }
                // Small reads anywhere (most of them pass the line filter alone) see
                // exactly the model's bytes.
                for _ in 0..8 {
                    let len = rng.gen_range(1..24usize);
                    let at = rng.gen_range(0..512 - len);
                    let mut buf = vec![0x55u8; len];
                    ws.overlay(at as u64, &mut buf);
                    for (i, b) in buf.iter().enumerate() {
                        assert_eq!(*b, model[at + i].unwrap_or(0x55), "byte {}", at + i);
                    }
                }
            }
            let mut buf = vec![0xAAu8; 512];
            ws.overlay(0, &mut buf);
            for (i, m) in model.iter().enumerate() {
                assert_eq!(buf[i], m.unwrap_or(0xAA), "byte {i}");
            }
            let ext: Vec<(u64, u64)> = ws.iter().map(|(a, d)| (a, d.len() as u64)).collect();
            for w in ext.windows(2) {
                assert!(w[0].0 + w[0].1 <= w[1].0, "{ext:?}");
            }
            let covered: usize = ext.iter().map(|e| e.1 as usize).sum();
            assert_eq!(covered, model.iter().filter(|m| m.is_some()).count());
            let live = ws.log_body_len();
            let (body, count) = ws.log_body();
            assert_eq!(body.len() as u64, live, "round {round}");
            let mut replayed = vec![None; 512];
            assert_eq!(replay(body, &mut replayed), count as usize);
            assert_eq!(replayed, model, "round {round}");
            // Records of the extents, each once: the body holds nothing else.
            let want: usize = ext.iter().map(|e| record_len(e.1)).sum();
            assert_eq!(body.len(), want);
        }
    }

    #[test]
    fn a_write_after_the_last_record_grows_it_and_touching_ones_stay_apart() {
        let mut ws = LogWriteSet::default();
        ws.insert(100, &[1; 8], u64::MAX).unwrap();
        ws.insert(108, &[2; 28], u64::MAX).unwrap(); // grows the last record
        ws.insert(92, &[3; 8], u64::MAX).unwrap(); // touches it from below: apart
        ws.insert(136, &[4; 8], u64::MAX).unwrap(); // the last record now is 92's
        let ext: Vec<(u64, usize)> = ws.iter().map(|(a, d)| (a, d.len())).collect();
        assert_eq!(ext, vec![(92, 8), (100, 36), (136, 8)]);
        assert_eq!(ws.log_body_len(), 24 + 16 + 40 + 24);
        // A write over two of them merges them; the body is re-encoded at commit.
        ws.insert(98, &[5; 4], u64::MAX).unwrap();
        let (body, count) = ws.log_body();
        assert_eq!((body.len(), count), (16 + 48 + 24, 2));
        let mut buf = [0u8; 52];
        ws.overlay(92, &mut buf);
        assert_eq!(&buf[..6], &[3; 6]);
        assert_eq!(&buf[6..10], &[5; 4]);
        assert_eq!(&buf[10..16], &[1; 6]);
        assert_eq!(&buf[16..44], &[2; 28][..]);
        assert_eq!(&buf[44..], &[4; 8]);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "overlap")]
    fn the_invariant_check_catches_overlapping_extents() {
        // Two overlapping extents are what a broken merge would leave behind.
        let mut w = LogWriteSet::default();
        push_record(&mut w.body, 0, &[0; 8]);
        push_record(&mut w.body, 4, &[0; 8]);
        w.extents = vec![
            Extent {
                addr: 0,
                end: 8,
                at: 0,
            },
            Extent {
                addr: 4,
                end: 12,
                at: 24,
            },
        ];
        w.lines = u64::MAX;
        w.debug_check_around(0, 1);
    }
}

//! A metadata transaction: an overlay of sealed page images over the media.
//!
//! Validation and application of a batch read through the overlay and write into it;
//! nothing reaches the media until the redo log commits the overlay. Rejecting a batch
//! is dropping its transaction, so a rejected batch provably changes nothing.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::{FsError, Location, Result};
use crate::inode::Inode;
use crate::layout::{BITS_PER_PAGE, Superblock};
use crate::media::{MediaRead, PageBuf, Tag, seal};
use crate::view::PageSource;

/// Pages changed by a transaction, each with the tag it is sealed with.
///
/// A hash map: libFS's overlay is one of these, thousands of pages between ships, and
/// every page read of every local check looks it up (an ordered map spent a tenth of
/// a create in its searches). What writes pages out in order sorts them first
/// ([`sorted`]).
pub type Changes = FxHashMap<u64, PageBuf>;

/// The pages of `changes` in page order: a redo log written in the same order for the
/// same changes, however the map was built.
pub fn sorted(changes: &Changes) -> Vec<(u64, &PageBuf)> {
    let mut v: Vec<(u64, &PageBuf)> = changes.iter().map(|(&p, img)| (p, img)).collect();
    v.sort_unstable_by_key(|&(p, _)| p);
    v
}

/// `p`, page `pno`, if it is of kind `tag` (its whole seal is verified if not, which
/// says what is wrong with it).
fn of_kind(p: &PageBuf, pno: u64, tag: Tag) -> Result<&PageBuf> {
    if crate::media::le::u32_at(&p[..], crate::media::BODY + 4) != tag as u32 {
        crate::media::verify(p, pno, tag)?;
    }
    Ok(p)
}

/// Unchanged pages read from the media and found sound, by page number.
pub type Clean = FxHashMap<u64, PageBuf>;

/// A transaction over a metadata space.
pub struct Txn<'a, R: MediaRead + ?Sized> {
    mem: &'a mut R,
    sb: Superblock,
    /// Pages changed, with their tag in the trailer; their checksums are computed once,
    /// when the transaction hands them out ([`Txn::into_changes`]), however often the
    /// transaction changed them.
    dirty: Changes,
    /// Pages this transaction changed. The same as `dirty`'s keys unless the
    /// transaction began with images of its own ([`Txn::over_own_pages`]).
    changed: FxHashSet<u64>,
    /// Unchanged pages read so far, checked once: a batch reads the same bitmap, inode
    /// and directory pages over and over, and each check is a checksum of a whole page.
    clean: Clean,
    /// Hint for the next metadata page allocation search.
    alloc_hint: u64,
    /// Pool pages freed, in order: freeing clears a bitmap bit and leaves the page as
    /// it was, so whoever cached the page by its number must learn of it here.
    freed_meta: Vec<u64>,
}

impl<'a, R: MediaRead + ?Sized> Txn<'a, R> {
    /// A transaction over `mem`, whose superblock is `sb`; metadata pages are searched
    /// from the first pool page.
    pub fn new(mem: &'a mut R, sb: Superblock) -> Self {
        Self::with_meta_cursor(mem, sb, sb.pool_first)
    }

    /// A transaction whose metadata page search starts at `cursor` (next-fit across
    /// transactions; a cursor outside the pool starts at its first page).
    pub fn with_meta_cursor(mem: &'a mut R, sb: Superblock, cursor: u64) -> Self {
        Self::over_own_pages(mem, sb, cursor, Changes::default(), Clean::default())
    }

    /// A transaction that starts from `own`, images it trusts as its own (libFS's
    /// overlay of operations recorded and not yet applied by the service), laid over
    /// `mem`; its metadata page search starts at `cursor`.
    ///
    /// The images are taken, not shared: a page the transaction changes is changed in
    /// place, with no 4 KiB copy per page per operation (sharing them with the caller
    /// made every change of a page the overlay held copy it first). The price is that a
    /// transaction dropped half-way leaves no intact overlay behind: the caller rebuilds
    /// it (libFS waits for the service to apply what the overlay showed and reads the
    /// mapping again).
    ///
    /// `clean` holds pages already read from `mem` and found sound, trusted like
    /// `own` (libFS keeps them from one local check to the next while its overlay
    /// stands: see `crate::client`'s state); they come back with the transaction's
    /// own reads added ([`Txn::into_unsealed_parts`]).
    pub fn over_own_pages(
        mem: &'a mut R,
        sb: Superblock,
        cursor: u64,
        own: Changes,
        clean: Clean,
    ) -> Self {
        Txn {
            mem,
            sb,
            dirty: own,
            // Room for what one recorded operation changes (an inode page, a bitmap
            // page, an index or directory page or two) in one allocation, not three.
            changed: FxHashSet::with_capacity_and_hasher(16, Default::default()),
            clean,
            alloc_hint: cursor,
            freed_meta: Vec::new(),
        }
    }

    /// The sealed images of every page changed, by page number.
    pub fn into_changes(self) -> Changes {
        let mut dirty = self.dirty;
        for page in dirty.values_mut() {
            let tag = crate::media::le::u32_at(&page[..], crate::media::BODY + 4);
            // Every image got its tag from `put_page`, so the tag is always known.
            if let Some(tag) = Tag::from_u32(tag) {
                seal(page, tag);
            }
        }
        dirty
    }

    /// The images of every page changed, and of the pages it began with
    /// ([`Txn::over_own_pages`]), with their tag but a stale checksum: for a reader
    /// that trusts them as its own (libFS's overlay), never for the media.
    pub fn into_unsealed_changes(self) -> Changes {
        self.dirty
    }

    /// [`Txn::into_unsealed_changes`], and the unchanged pages read and found sound.
    pub fn into_unsealed_parts(self) -> (Changes, Clean) {
        (self.dirty, self.clean)
    }

    /// Number of pages changed so far.
    pub fn changed_pages(&self) -> usize {
        self.changed.len()
    }

    /// The pages changed so far, in no particular order (images the transaction began
    /// with and did not change are not among them).
    pub fn changed_page_numbers(&self) -> Vec<u64> {
        self.changed.iter().copied().collect()
    }

    /// Replaces page `pno` with `page`, to be sealed as `tag`.
    pub fn put_page(&mut self, pno: u64, mut page: PageBuf, tag: Tag) {
        page[crate::media::BODY + 4..].copy_from_slice(&(tag as u32).to_le_bytes());
        self.clean.remove(&pno);
        self.changed.insert(pno);
        self.dirty.insert(pno, page);
    }

    /// The image of page `pno`, changed by this transaction from now on: changes go
    /// into it in place, with no copy of the page per change. (Changing a copy from
    /// [`PageSource::page`] and handing it back with [`Txn::put_page`] copies the
    /// whole page, since the transaction still holds the original.)
    pub fn page_mut(&mut self, pno: u64, tag: Tag) -> Result<&mut PageBuf> {
        // Checks the page, leaving it among the changed or the clean pages.
        self.page_ref(pno, tag)?;
        self.changed.insert(pno);
        Ok(match self.dirty.entry(pno) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.clean.remove(&pno).expect("page_ref left it clean"))
            }
        })
    }

    /// Page `pno` as this transaction sees it, checked to be of kind `tag`, borrowed.
    fn page_ref(&mut self, pno: u64, tag: Tag) -> Result<&PageBuf> {
        // One map lookup per place a page can be: this runs for every page read of
        // every check, on libFS's overlay of thousands of pages.
        if let Some(p) = self.dirty.get(&pno) {
            // Written by this transaction: its contents are its own; only its kind can
            // be wrong (and then `verify` says so, as it checks the kind first).
            return of_kind(p, pno, tag);
        }
        crate::view::check_page_number(&self.sb, pno, tag)?;
        match self.clean.entry(pno) {
            // Checked when first read; a different kind asked for is checked again.
            std::collections::hash_map::Entry::Occupied(e) => of_kind(e.into_mut(), pno, tag),
            // Through the source's own check: libFS's overlay vouches for the pages the
            // client changed itself and checksums only what it reads from the mapping.
            std::collections::hash_map::Entry::Vacant(e) => {
                Ok(e.insert(self.mem.checked_page(pno, tag)?))
            }
        }
    }

    /// Writes inode `ino`.
    pub fn put_inode(&mut self, ino: u64, inode: &Inode) -> Result<()> {
        let (pno, off) = self.sb.inode_pos(ino);
        let p = self.page_mut(pno, Tag::Inodes)?;
        inode.encode(&mut p[off..off + crate::inode::INODE_SIZE]);
        Ok(())
    }

    fn bit(&mut self, first: u64, idx: u64) -> Result<(u64, usize, u8)> {
        let pno = first + idx / BITS_PER_PAGE;
        let bit = idx % BITS_PER_PAGE;
        Ok((pno, (bit / 8) as usize, 1u8 << (bit % 8)))
    }

    /// Whether bit `idx` of the bitmap starting at page `first` is set.
    pub fn test_bit(&mut self, first: u64, idx: u64) -> Result<bool> {
        let (pno, byte, mask) = self.bit(first, idx)?;
        let p = self.page_ref(pno, Tag::Bitmap)?;
        Ok(p[byte] & mask != 0)
    }

    /// Sets or clears bit `idx` of the bitmap starting at page `first`.
    pub fn set_bit(&mut self, first: u64, idx: u64, on: bool) -> Result<()> {
        let (pno, byte, mask) = self.bit(first, idx)?;
        let p = self.page_mut(pno, Tag::Bitmap)?;
        if on {
            p[byte] |= mask;
        } else {
            p[byte] &= !mask;
        }
        Ok(())
    }

    /// The first set bit among bits `from .. from + count` of the bitmap starting at
    /// page `first`, if any: one page lookup per bitmap page the range covers, and a
    /// 64-bit word at a time within it (a KVFS object's extent is dozens of pages).
    pub fn first_set_bit(&mut self, first: u64, from: u64, count: u64) -> Result<Option<u64>> {
        self.first_bit(first, from, count, true)
    }

    /// The first clear bit among bits `from .. from + count` of the bitmap starting at
    /// page `first`, if any, searched like [`Txn::first_set_bit`].
    pub fn first_clear_bit(&mut self, first: u64, from: u64, count: u64) -> Result<Option<u64>> {
        self.first_bit(first, from, count, false)
    }

    fn first_bit(&mut self, first: u64, from: u64, count: u64, set: bool) -> Result<Option<u64>> {
        for (pno, bits) in bitmap_pages(first, from, count) {
            let p = self.page_ref(pno, Tag::Bitmap)?;
            let base = bits.start - bits.start % BITS_PER_PAGE;
            let local = bits.start - base..bits.end - base;
            if let Some(i) = find_bit(&p[..crate::media::BODY], local, set) {
                return Ok(Some(base + i));
            }
        }
        Ok(None)
    }

    /// Sets or clears bits `from .. from + count` of the bitmap starting at page
    /// `first`, one page lookup per bitmap page the range covers.
    pub fn set_bits(&mut self, first: u64, from: u64, count: u64, on: bool) -> Result<()> {
        for (pno, bits) in bitmap_pages(first, from, count) {
            // Borrowed as bytes once: each write through the page image itself would
            // check again that the image is not shared (an atomic read-modify-write per
            // bit, most of a KVFS erase's bitmap update).
            let p: &mut [u8] = &mut self.page_mut(pno, Tag::Bitmap)?[..];
            for i in bits {
                if on {
                    p[byte_of(i)] |= mask_of(i);
                } else {
                    p[byte_of(i)] &= !mask_of(i);
                }
            }
        }
        Ok(())
    }

    /// Where the next metadata page search starts (next-fit): a service keeps it from
    /// one transaction to the next ([`Txn::with_meta_cursor`]).
    pub fn meta_cursor(&self) -> u64 {
        self.alloc_hint
    }

    /// Allocates a pool page for a structure of kind `tag`, zero-filled and sealed.
    ///
    /// Next-fit from the cursor, wrapping once, reading the metadata bitmap a 64-bit
    /// word at a time: with tens of thousands of pool pages in use, a search from the
    /// first pool page, bit by bit, cost most of a create.
    pub fn alloc_meta_page(&mut self, tag: Tag) -> Result<u64> {
        let sb = self.sb;
        let (lo, hi) = (sb.pool_first, sb.meta_pages);
        let start = if (lo..hi).contains(&self.alloc_hint) {
            self.alloc_hint
        } else {
            lo
        };
        for (from, to) in [(start, hi), (lo, start)] {
            if let Some(pno) = self.first_clear_bit(sb.mbitmap_first, from, to - from)? {
                debug_assert!((lo..hi).contains(&pno), "pool page {pno} outside the pool");
                self.set_bit(sb.mbitmap_first, pno, true)?;
                self.put_page(pno, crate::media::zero_page(), tag);
                self.alloc_hint = if pno + 1 >= hi { lo } else { pno + 1 };
                return Ok(pno);
            }
        }
        Err(FsError::NoSpace("metadata pool exhausted".into()))
    }

    /// Returns pool page `pno` to the free pool.
    pub fn free_meta_page(&mut self, pno: u64) -> Result<()> {
        if pno < self.sb.pool_first || pno >= self.sb.meta_pages {
            return Err(FsError::Corrupt {
                what: "pool page reference",
                at: Location {
                    page: pno,
                    offset: 0,
                },
                why: "page lies outside the pool".into(),
            });
        }
        self.set_bit(self.sb.mbitmap_first, pno, false)?;
        // A freed page no longer needs its image committed.
        self.dirty.remove(&pno);
        self.changed.remove(&pno);
        self.freed_meta.push(pno);
        Ok(())
    }

    /// The pool pages freed so far (see [`Txn::free_meta_page`]).
    pub fn freed_meta_pages(&self) -> &[u64] {
        &self.freed_meta
    }
}

/// Bits `from .. from + count` of the bitmap starting at page `first`, split by the
/// bitmap page holding them: (page, its bits in the range).
fn bitmap_pages(
    first: u64,
    from: u64,
    count: u64,
) -> impl Iterator<Item = (u64, std::ops::Range<u64>)> {
    let end = from.saturating_add(count);
    let mut idx = from;
    std::iter::from_fn(move || {
        (idx < end).then(|| {
            let stop = end.min((idx / BITS_PER_PAGE + 1) * BITS_PER_PAGE);
            let run = (first + idx / BITS_PER_PAGE, idx..stop);
            idx = stop;
            run
        })
    })
}

/// The first bit in `bits` (indices within `body`, little-endian bit order) that is set
/// (`set`) or clear: the unaligned ends bit by bit, the rest a 64-bit word at a time.
fn find_bit(body: &[u8], bits: std::ops::Range<u64>, set: bool) -> Option<u64> {
    let test = |i: u64| (body[(i / 8) as usize] >> (i % 8)) & 1 == u8::from(set);
    let mut i = bits.start;
    while i < bits.end && !i.is_multiple_of(64) {
        if test(i) {
            return Some(i);
        }
        i += 1;
    }
    while i + 64 <= bits.end {
        let at = (i / 8) as usize;
        let w = u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
        let w = if set { w } else { !w };
        if w != 0 {
            return Some(i + u64::from(w.trailing_zeros()));
        }
        i += 64;
    }
    (i..bits.end).find(|&i| test(i))
}

/// The byte of its bitmap page holding bit `i` of a bitmap.
fn byte_of(i: u64) -> usize {
    ((i % BITS_PER_PAGE) / 8) as usize
}

/// The mask of bit `i` of a bitmap within its byte.
fn mask_of(i: u64) -> u8 {
    1u8 << (i % 8)
}

impl<R: MediaRead + ?Sized> PageSource for Txn<'_, R> {
    fn sb(&self) -> &Superblock {
        &self.sb
    }
    fn page(&mut self, pno: u64, tag: Tag) -> Result<PageBuf> {
        self.page_ref(pno, tag).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time search agrees with a bit-by-bit one on every range of a
    /// pattern with set and clear runs of all lengths around word boundaries.
    #[test]
    fn find_bit_matches_a_bit_by_bit_search() {
        let mut body = vec![0u8; 64];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for b in body.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = (x as u8) & if x.is_multiple_of(3) { 0xff } else { 0 };
        }
        body[20..28].fill(0xff);
        body[40..48].fill(0);
        let bit = |i: u64| (body[(i / 8) as usize] >> (i % 8)) & 1 == 1;
        for from in (0..512).step_by(7) {
            for to in (from..=512).step_by(13) {
                for set in [true, false] {
                    let slow = (from..to).find(|&i| bit(i) == set);
                    assert_eq!(find_bit(&body, from..to, set), slow, "{from}..{to} {set}");
                }
            }
        }
    }
}

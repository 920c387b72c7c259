//! A metadata transaction: an overlay of sealed page images over the media.
//!
//! Validation and application of a batch read through the overlay and write into it;
//! nothing reaches the media until the redo log commits the overlay. Rejecting a batch
//! is dropping its transaction, so a rejected batch provably changes nothing.

use std::collections::BTreeMap;

use crate::error::{FsError, Location, Result};
use crate::inode::Inode;
use crate::layout::{BITS_PER_PAGE, Superblock};
use crate::media::{MediaRead, PageBuf, Tag, read_checked, seal};
use crate::view::PageSource;

/// Pages changed by a transaction, each with the tag it is sealed with.
pub type Changes = BTreeMap<u64, PageBuf>;

/// A transaction over a metadata space.
pub struct Txn<'a, R: MediaRead + ?Sized> {
    mem: &'a mut R,
    sb: Superblock,
    dirty: Changes,
    /// Hint for the next metadata page allocation search.
    alloc_hint: u64,
}

impl<'a, R: MediaRead + ?Sized> Txn<'a, R> {
    /// A transaction over `mem`, whose superblock is `sb`.
    pub fn new(mem: &'a mut R, sb: Superblock) -> Self {
        Txn {
            mem,
            sb,
            dirty: Changes::new(),
            alloc_hint: sb.pool_first,
        }
    }

    /// The sealed images of every page changed, by page number.
    pub fn into_changes(self) -> Changes {
        self.dirty
    }

    /// Number of pages changed so far.
    pub fn changed_pages(&self) -> usize {
        self.dirty.len()
    }

    /// Replaces page `pno` with `page`, sealed as `tag`.
    pub fn put_page(&mut self, pno: u64, mut page: PageBuf, tag: Tag) {
        seal(&mut page, tag);
        self.dirty.insert(pno, page);
    }

    /// Writes inode `ino`.
    pub fn put_inode(&mut self, ino: u64, inode: &Inode) -> Result<()> {
        let (pno, off) = self.sb.inode_pos(ino);
        let mut p = self.page(pno, Tag::Inodes)?;
        inode.encode(&mut p[off..off + crate::inode::INODE_SIZE]);
        self.put_page(pno, p, Tag::Inodes);
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
        let p = self.page(pno, Tag::Bitmap)?;
        Ok(p[byte] & mask != 0)
    }

    /// Sets or clears bit `idx` of the bitmap starting at page `first`.
    pub fn set_bit(&mut self, first: u64, idx: u64, on: bool) -> Result<()> {
        let (pno, byte, mask) = self.bit(first, idx)?;
        let mut p = self.page(pno, Tag::Bitmap)?;
        if on {
            p[byte] |= mask;
        } else {
            p[byte] &= !mask;
        }
        self.put_page(pno, p, Tag::Bitmap);
        Ok(())
    }

    /// Allocates a pool page for a structure of kind `tag`, zero-filled and sealed.
    pub fn alloc_meta_page(&mut self, tag: Tag) -> Result<u64> {
        let sb = self.sb;
        let span = sb.meta_pages - sb.pool_first;
        // One read (and checksum) per bitmap page scanned, not one per bit tested.
        let mut held: Option<(u64, PageBuf)> = None;
        for k in 0..span {
            let pno = sb.pool_first + (self.alloc_hint - sb.pool_first + k) % span;
            let (bp, byte, mask) = self.bit(sb.mbitmap_first, pno)?;
            if held.as_ref().is_none_or(|h| h.0 != bp) {
                held = Some((bp, self.page(bp, Tag::Bitmap)?));
            }
            if held.as_ref().is_some_and(|h| h.1[byte] & mask == 0) {
                self.set_bit(sb.mbitmap_first, pno, true)?;
                self.put_page(pno, crate::media::zero_page(), tag);
                self.alloc_hint = pno + 1;
                if self.alloc_hint >= sb.meta_pages {
                    self.alloc_hint = sb.pool_first;
                }
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
        Ok(())
    }
}

impl<R: MediaRead + ?Sized> PageSource for Txn<'_, R> {
    fn sb(&self) -> &Superblock {
        &self.sb
    }
    fn page(&mut self, pno: u64, tag: Tag) -> Result<PageBuf> {
        if let Some(p) = self.dirty.get(&pno) {
            // Sealed by this transaction: its checksum is right; only its kind can be
            // wrong (and then `verify` says so).
            if crate::media::le::u32_at(&p[..], crate::media::BODY + 4) != tag as u32 {
                crate::media::verify(p, pno, tag)?;
            }
            return Ok(p.clone());
        }
        if pno >= self.sb.meta_pages {
            return Err(FsError::Corrupt {
                what: tag.name(),
                at: Location {
                    page: pno,
                    offset: 0,
                },
                why: format!(
                    "page number beyond the {} metadata pages",
                    self.sb.meta_pages
                ),
            });
        }
        read_checked(self.mem, pno, tag)
    }
}

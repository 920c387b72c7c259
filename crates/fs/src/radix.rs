//! Files as radix trees of pages.
//!
//! A file of height 0 has at most one data page, `root` itself. A file of height h > 0
//! has an index page at `root` with 511 entries, each the root of a subtree of height
//! h - 1; entries of height-1 index pages are data page numbers in the file's domain.
//! Index pages live in the metadata pool (clients map them read-only); data pages live
//! in the domain's data space (mapped writable for clients allowed to write). 0 is a hole.

use crate::error::{FsError, Location, Result};
use crate::inode::Inode;
use crate::media::{BODY, MediaRead, Tag, le};
use crate::txn::Txn;
use crate::view::PageSource;

/// Entries of an index page.
pub const FANOUT: u64 = (BODY / 8) as u64;
/// Tallest tree (FANOUT^4 pages is far beyond any domain).
pub const MAX_HEIGHT: u8 = 4;

/// Data pages a tree of `height` can address.
pub fn capacity(height: u8) -> u64 {
    FANOUT.saturating_pow(height as u32)
}

/// The data page holding page `index` of the file, 0 for a hole.
pub fn lookup<S: PageSource + ?Sized>(src: &mut S, inode: &Inode, index: u64) -> Result<u64> {
    if index >= capacity(inode.height) {
        return Ok(0);
    }
    let mut node = inode.root;
    let mut h = inode.height;
    while h > 0 && node != 0 {
        let span = capacity(h - 1);
        let p = src.page(node, Tag::Radix)?;
        node = le::u64_at(&p[..], 8 * ((index / span) % FANOUT) as usize);
        h -= 1;
    }
    Ok(node)
}

/// Maps page `index` of the file to data page `data`, growing the tree as needed.
/// Returns the data page it replaced (0 if it was a hole).
pub fn map<R: MediaRead + ?Sized>(
    txn: &mut Txn<'_, R>,
    inode: &mut Inode,
    index: u64,
    data: u64,
) -> Result<u64> {
    while index >= capacity(inode.height) {
        if inode.height >= MAX_HEIGHT {
            return Err(FsError::NoSpace(format!(
                "page index {index} beyond the largest file"
            )));
        }
        if inode.root != 0 {
            let top = txn.alloc_meta_page(Tag::Radix)?;
            let p = txn.page_mut(top, Tag::Radix)?;
            le::put_u64(&mut p[..], 0, inode.root);
            inode.root = top;
        }
        inode.height += 1;
    }
    if inode.height == 0 {
        let old = inode.root;
        inode.root = data;
        return Ok(old);
    }
    if inode.root == 0 {
        inode.root = txn.alloc_meta_page(Tag::Radix)?;
    }
    let mut node = inode.root;
    let mut h = inode.height;
    loop {
        let span = capacity(h - 1);
        let slot = 8 * ((index / span) % FANOUT) as usize;
        let child = le::u64_at(&txn.page(node, Tag::Radix)?[..], slot);
        if h == 1 {
            le::put_u64(&mut txn.page_mut(node, Tag::Radix)?[..], slot, data);
            return Ok(child);
        }
        let child = if child == 0 {
            let c = txn.alloc_meta_page(Tag::Radix)?;
            le::put_u64(&mut txn.page_mut(node, Tag::Radix)?[..], slot, c);
            c
        } else {
            child
        };
        node = child;
        h -= 1;
    }
}

/// Visits every mapped data page as (file page index, data page), and every index page.
pub fn walk<S: PageSource + ?Sized>(
    src: &mut S,
    inode: &Inode,
    data: &mut dyn FnMut(u64, u64),
    index_pages: &mut dyn FnMut(u64),
) -> Result<()> {
    fn rec<S: PageSource + ?Sized>(
        src: &mut S,
        node: u64,
        h: u8,
        base: u64,
        data: &mut dyn FnMut(u64, u64),
        index_pages: &mut dyn FnMut(u64),
    ) -> Result<()> {
        if node == 0 {
            return Ok(());
        }
        if h == 0 {
            data(base, node);
            return Ok(());
        }
        index_pages(node);
        let p = src.page(node, Tag::Radix)?;
        let span = capacity(h - 1);
        for i in 0..FANOUT {
            let c = le::u64_at(&p[..], 8 * i as usize);
            rec(src, c, h - 1, base + i * span, data, index_pages)?;
        }
        Ok(())
    }
    if inode.height > MAX_HEIGHT {
        return Err(FsError::Corrupt {
            what: "inode",
            at: Location { page: 0, offset: 1 },
            why: format!("radix height {} exceeds {MAX_HEIGHT}", inode.height),
        });
    }
    rec(src, inode.root, inode.height, 0, data, index_pages)
}

/// Unmaps every page at index `keep` and beyond; returns the data pages released.
/// Index pages left empty are freed; the height is kept (shrinking it buys nothing).
pub fn truncate<R: MediaRead + ?Sized>(
    txn: &mut Txn<'_, R>,
    inode: &mut Inode,
    keep: u64,
) -> Result<Vec<u64>> {
    fn rec<R: MediaRead + ?Sized>(
        txn: &mut Txn<'_, R>,
        node: u64,
        h: u8,
        base: u64,
        keep: u64,
        freed: &mut Vec<u64>,
    ) -> Result<bool> {
        // Returns whether the subtree is now empty (and `node` released).
        if h == 0 {
            if base >= keep {
                freed.push(node);
                return Ok(true);
            }
            return Ok(false);
        }
        let span = capacity(h - 1);
        let mut p = txn.page(node, Tag::Radix)?;
        let mut changed = false;
        let mut any = false;
        for i in 0..FANOUT {
            let c = le::u64_at(&p[..], 8 * i as usize);
            if c == 0 {
                continue;
            }
            let b = base + i * span;
            if b + span > keep && rec(txn, c, h - 1, b, keep, freed)? {
                le::put_u64(&mut p[..], 8 * i as usize, 0);
                changed = true;
            } else {
                any = true;
            }
        }
        if !any {
            txn.free_meta_page(node)?;
            return Ok(true);
        }
        if changed {
            txn.put_page(node, p, Tag::Radix);
        }
        Ok(false)
    }
    let mut freed = Vec::new();
    if inode.root != 0 && rec(txn, inode.root, inode.height, 0, keep, &mut freed)? {
        inode.root = 0;
        inode.height = 0;
    }
    Ok(freed)
}

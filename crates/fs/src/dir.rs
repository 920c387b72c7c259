//! Directories: hash tables from names to inode numbers.
//!
//! The root page holds 16 reserved (zero) bytes, then 509 bucket heads (a prime, so the
//! modulus spreads names well); the number of entries is the directory inode's size,
//! kept by the caller, so a name added or removed changes no root page unless its
//! bucket's chain gains or loses a page;
//! each bucket is a chain of pages of 31 fixed 128-byte slots. The paper uses a linear
//! hash table; a fixed bucket array with chained pages is the simplest table with the
//! same page-granular structure, and it gives KVFS the per-page locks the paper
//! describes (one lease per bucket).

use crate::error::{FsError, Result};
use crate::media::{BODY, MediaRead, Tag, le};
use crate::txn::Txn;
use crate::view::PageSource;

/// Buckets of a directory.
pub const BUCKETS: u64 = ((BODY - 16) / 8) as u64;
/// Bytes of a slot.
const SLOT: usize = 128;
/// Slots per bucket page.
pub const SLOTS: usize = (BODY - 16) / SLOT;
/// Longest name, in bytes.
pub const MAX_NAME: usize = SLOT - 9;

/// Checks that `name` may be a directory entry.
pub fn check_name(name: &str) -> Result<()> {
    let why = if name.is_empty() {
        "empty"
    } else if name.len() > MAX_NAME {
        "longer than 119 bytes"
    } else if name.contains('/') || name.contains('\0') {
        "contains '/' or NUL"
    } else if name == "." || name == ".." {
        "reserved"
    } else {
        return Ok(());
    };
    Err(FsError::BadName {
        name: name.to_string(),
        why,
    })
}

/// The bucket `name` hashes to (FNV-1a, 64 bit).
pub fn bucket_of(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h % BUCKETS
}

fn bucket_head<S: PageSource + ?Sized>(src: &mut S, root: u64, b: u64) -> Result<u64> {
    let p = src.page(root, Tag::DirRoot)?;
    Ok(le::u64_at(&p[..], 16 + 8 * b as usize))
}

fn slot_name(p: &[u8], s: usize) -> &[u8] {
    let off = 16 + s * SLOT;
    let len = (p[off + 8] as usize).min(MAX_NAME);
    &p[off + 9..off + 9 + len]
}

/// Whether the reserved bytes of a directory's root page hold zeros, as they must.
pub fn root_reserved_clear<S: PageSource + ?Sized>(src: &mut S, root: u64) -> Result<bool> {
    Ok(src.page(root, Tag::DirRoot)?[..16].iter().all(|&b| b == 0))
}

/// Looks `name` up in the directory whose root page is `root`.
pub fn lookup<S: PageSource + ?Sized>(src: &mut S, root: u64, name: &str) -> Result<Option<u64>> {
    let mut pno = bucket_head(src, root, bucket_of(name))?;
    let mut hops = 0;
    while pno != 0 {
        let p = src.page(pno, Tag::DirBucket)?;
        for s in 0..SLOTS {
            let ino = le::u64_at(&p[..], 16 + s * SLOT);
            if ino != 0 && slot_name(&p[..], s) == name.as_bytes() {
                return Ok(Some(ino));
            }
        }
        pno = le::u64_at(&p[..], 0);
        hops += 1;
        if hops > src.sb().meta_pages {
            return Err(cycle(root));
        }
    }
    Ok(None)
}

fn cycle(root: u64) -> FsError {
    FsError::Corrupt {
        what: "directory bucket chain",
        at: crate::error::Location {
            page: root,
            offset: 0,
        },
        why: "chain loops".into(),
    }
}

/// A directory's entries (name, inode) and the bucket pages holding them.
pub type Listing = (Vec<(String, u64)>, Vec<u64>);

/// Every (name, inode) of a directory, and every bucket page it uses, bucket by bucket.
pub fn entries<S: PageSource + ?Sized>(src: &mut S, root: u64) -> Result<Listing> {
    let rp = src.page(root, Tag::DirRoot)?;
    let mut out = Vec::new();
    let mut pages = Vec::new();
    for b in 0..BUCKETS as usize {
        let mut pno = le::u64_at(&rp[..], 16 + 8 * b);
        while pno != 0 {
            if pages.len() as u64 > src.sb().meta_pages {
                return Err(cycle(root));
            }
            pages.push(pno);
            let p = src.page(pno, Tag::DirBucket)?;
            for s in 0..SLOTS {
                let ino = le::u64_at(&p[..], 16 + s * SLOT);
                if ino != 0 {
                    out.push((String::from_utf8_lossy(slot_name(&p[..], s)).into(), ino));
                }
            }
            pno = le::u64_at(&p[..], 0);
        }
    }
    Ok((out, pages))
}

/// Creates an empty directory table; returns its root page.
pub fn create<R: MediaRead + ?Sized>(txn: &mut Txn<'_, R>) -> Result<u64> {
    txn.alloc_meta_page(Tag::DirRoot)
}

/// Sets bucket `b`'s chain head in the directory's root page.
fn set_head<R: MediaRead + ?Sized>(
    txn: &mut Txn<'_, R>,
    root: u64,
    b: u64,
    head: u64,
) -> Result<()> {
    let rp = txn.page_mut(root, Tag::DirRoot)?;
    le::put_u64(&mut rp[..], 16 + 8 * b as usize, head);
    Ok(())
}

/// Adds `name -> ino`; the caller has checked that `name` is absent.
pub fn insert<R: MediaRead + ?Sized>(
    txn: &mut Txn<'_, R>,
    root: u64,
    name: &str,
    ino: u64,
) -> Result<()> {
    check_name(name)?;
    let b = bucket_of(name);
    let head = bucket_head(txn, root, b)?;
    let mut pno = head;
    while pno != 0 {
        let p = txn.page(pno, Tag::DirBucket)?;
        if let Some(s) = (0..SLOTS).find(|&s| le::u64_at(&p[..], 16 + s * SLOT) == 0) {
            // Changed in the transaction's own image, not in this copy of it.
            drop(p);
            let p = txn.page_mut(pno, Tag::DirBucket)?;
            write_slot(&mut p[..], s, name, ino);
            let used = le::u32_at(&p[..], 8) + 1;
            le::put_u32(&mut p[..], 8, used);
            return Ok(());
        }
        pno = le::u64_at(&p[..], 0);
    }
    // Every page of the chain is full: push a new page at the head (filled in the
    // zeroed image the allocation made, not in a second one).
    let new = txn.alloc_meta_page(Tag::DirBucket)?;
    let p = txn.page_mut(new, Tag::DirBucket)?;
    le::put_u64(&mut p[..], 0, head);
    le::put_u32(&mut p[..], 8, 1);
    write_slot(&mut p[..], 0, name, ino);
    set_head(txn, root, b, new)
}

fn write_slot(p: &mut [u8], s: usize, name: &str, ino: u64) {
    let off = 16 + s * SLOT;
    p[off..off + SLOT].fill(0);
    le::put_u64(p, off, ino);
    p[off + 8] = name.len() as u8;
    p[off + 9..off + 9 + name.len()].copy_from_slice(name.as_bytes());
}

/// Removes `name`; returns the inode it named. An emptied bucket page is unlinked from
/// its chain and freed, so an emptied directory holds only its root page.
pub fn remove<R: MediaRead + ?Sized>(
    txn: &mut Txn<'_, R>,
    root: u64,
    name: &str,
) -> Result<Option<u64>> {
    let b = bucket_of(name);
    let mut prev = 0u64;
    let mut pno = bucket_head(txn, root, b)?;
    while pno != 0 {
        let p = txn.page(pno, Tag::DirBucket)?;
        let next = le::u64_at(&p[..], 0);
        for s in 0..SLOTS {
            let ino = le::u64_at(&p[..], 16 + s * SLOT);
            if ino != 0 && slot_name(&p[..], s) == name.as_bytes() {
                let used = le::u32_at(&p[..], 8) - 1;
                // Changed in the transaction's own images, not in this copy.
                drop(p);
                if used == 0 {
                    if prev == 0 {
                        set_head(txn, root, b, next)?;
                    } else {
                        let pp = txn.page_mut(prev, Tag::DirBucket)?;
                        le::put_u64(&mut pp[..], 0, next);
                    }
                    txn.free_meta_page(pno)?;
                } else {
                    let p = txn.page_mut(pno, Tag::DirBucket)?;
                    p[16 + s * SLOT..16 + (s + 1) * SLOT].fill(0);
                    le::put_u32(&mut p[..], 8, used);
                }
                return Ok(Some(ino));
            }
        }
        prev = pno;
        pno = next;
    }
    Ok(None)
}

/// Frees a directory's pages (the caller has checked it is empty).
pub fn destroy<R: MediaRead + ?Sized>(txn: &mut Txn<'_, R>, root: u64) -> Result<()> {
    let (_, pages) = entries(txn, root)?;
    for p in pages {
        txn.free_meta_page(p)?;
    }
    txn.free_meta_page(root)
}

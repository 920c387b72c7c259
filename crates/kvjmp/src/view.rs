//! GET: a lookup by plain loads from the segment, mapped read-only (no transaction, no
//! writes). The segment is treated as hostile input: every offset is bounds-checked and
//! chains are walked at most as far as the heap could hold entries, so a damaged store
//! yields an error with the offset, never a fault or a hang.

use crate::dict::{entry, slot};
use crate::error::KvError;
use crate::layout::{Header, NOT_REHASHING, hash_key, root};

/// A read-only view of a store's segment.
pub struct View<'a> {
    seg: &'a [u8],
    h: Header,
    what: &'a str,
}

impl<'a> View<'a> {
    /// Views `seg` (the whole segment), checking its header.
    pub fn new(seg: &'a [u8], what: &'a str) -> Result<View<'a>, KvError> {
        if seg.len() < 64 {
            return Err(KvError::BadFormat {
                what: what.to_string(),
                offset: 0,
                field: "size",
                problem: format!("{} bytes hold no header", seg.len()),
            });
        }
        let h = Header::decode(&seg[..64], seg.len() as u64, what)?;
        Ok(View { seg, h, what })
    }

    /// Views `seg` with a header this client checked when it opened the store (the
    /// header never changes after format), without reading it again.
    pub fn with_header(seg: &'a [u8], h: Header, what: &'a str) -> View<'a> {
        View { seg, h, what }
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.h
    }

    /// The `u64` at `at`, or a corruption error naming `at`.
    pub fn u64_at(&self, at: u64) -> Result<u64, KvError> {
        let a = usize::try_from(at).unwrap_or(usize::MAX);
        match self.seg.get(a..a.saturating_add(8)) {
            Some(b) => Ok(u64::from_le_bytes(b.try_into().expect("8 bytes"))),
            None => Err(KvError::corrupt(self.what, at, "offset beyond the segment")),
        }
    }

    /// The bytes `[at, at + len)`.
    pub fn bytes(&self, at: u64, len: u64) -> Result<&'a [u8], KvError> {
        let a = usize::try_from(at).unwrap_or(usize::MAX);
        let e = a.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
        self.seg.get(a..e).ok_or_else(|| {
            KvError::corrupt(self.what, at, format!("{len} bytes beyond the segment"))
        })
    }

    /// A root field.
    pub fn root(&self, field: u64) -> Result<u64, KvError> {
        self.u64_at(self.h.root + field)
    }

    /// Checks that `e` can be an entry block: inside the heap, 8-aligned.
    pub fn check_entry_ptr(&self, e: u64, from: u64) -> Result<(), KvError> {
        if e < self.h.heap || e >= self.h.size || e % 8 != 0 {
            return Err(KvError::corrupt(
                self.what,
                from,
                format!("link {e:#x} points outside the heap"),
            ));
        }
        Ok(())
    }

    /// An entry's key and value.
    pub fn entry(&self, e: u64) -> Result<(&'a [u8], &'a [u8]), KvError> {
        let lens = self.u64_at(e + entry::LENS)?;
        let (klen, vlen) = (lens & 0xffff_ffff, lens >> 32);
        let key = self.bytes(e + entry::KEY, klen)?;
        let value = self.bytes(e + entry::KEY + klen, vlen)?;
        Ok((key, value))
    }

    /// The value stored under `key`, if any.
    pub fn get(&self, key: &[u8]) -> Result<Option<&'a [u8]>, KvError> {
        let hash = hash_key(self.h.seed, key);
        let rehashing = self.root(root::REHASH)? != NOT_REHASHING;
        let budget = (self.h.size - self.h.heap) / 32;
        for t in 0..if rehashing { 2 } else { 1 } {
            let (block, size) = (self.root(root::table(t))?, self.root(root::size(t))?);
            if block == 0 {
                continue;
            }
            if !size.is_power_of_two() {
                return Err(KvError::corrupt(
                    self.what,
                    self.h.root + root::size(t),
                    format!("bucket count {size} is not a power of two"),
                ));
            }
            let mut link = slot(block, hash & (size - 1));
            let mut e = self.u64_at(link)?;
            let mut steps = 0;
            while e != 0 {
                self.check_entry_ptr(e, link)?;
                steps += 1;
                if steps > budget {
                    return Err(KvError::corrupt(
                        self.what,
                        link,
                        "chain longer than the heap can hold: a cycle",
                    ));
                }
                if self.u64_at(e + entry::HASH)? == hash {
                    let (k, v) = self.entry(e)?;
                    if k == key {
                        return Ok(Some(v));
                    }
                }
                link = e + entry::NEXT;
                e = self.u64_at(link)?;
            }
        }
        Ok(None)
    }
}

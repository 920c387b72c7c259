//! Pages and their checksums: the unit every metadata structure is built from.
//!
//! Every metadata page ends with an 8-byte trailer: a CRC-32 (Castagnoli-free IEEE, as
//! `crc32fast` computes it) of the page body and a tag naming what the page holds. A
//! reader that finds a bad trailer knows exactly which page is damaged and what it was
//! supposed to be; fsck reports both.

use crate::error::{FsError, Location, Result};
use pmlab_spine::{Addr, Memory, SpineError};

pub use crate::pagebuf::{PageBuf, zero_page};
pub use crate::place::PAGE;
/// Bytes of a page available to its structure (the rest is the trailer).
pub const BODY: usize = PAGE as usize - 8;

/// What a metadata page holds; stored in its trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Tag {
    /// The superblock (page 0).
    Super = 0x5355_5052,
    /// The table of permission domains.
    Domains = 0x444f_4d53,
    /// A page of an allocation bitmap.
    Bitmap = 0x424d_4150,
    /// A page of the inode table.
    Inodes = 0x494e_4f44,
    /// The root page of a directory hash table (bucket heads).
    DirRoot = 0x4452_4f54,
    /// A bucket page of a directory hash table.
    DirBucket = 0x4442_4b54,
    /// An index page of a file's radix tree.
    Radix = 0x5244_5858,
}

impl Tag {
    /// The tag stored as `v`, if any.
    pub fn from_u32(v: u32) -> Option<Tag> {
        [
            Tag::Super,
            Tag::Domains,
            Tag::Bitmap,
            Tag::Inodes,
            Tag::DirRoot,
            Tag::DirBucket,
            Tag::Radix,
        ]
        .into_iter()
        .find(|t| *t as u32 == v)
    }

    /// A human name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Tag::Super => "superblock",
            Tag::Domains => "domain table",
            Tag::Bitmap => "bitmap page",
            Tag::Inodes => "inode table page",
            Tag::DirRoot => "directory root page",
            Tag::DirBucket => "directory bucket page",
            Tag::Radix => "radix index page",
        }
    }
}

/// Read access to a metadata space. Every [`Memory`] provides it; a client's read-only
/// mapping provides only this, so code that merely reads the file system runs on both.
pub trait MediaRead {
    /// Size of the space in bytes.
    fn media_size(&self) -> u64;
    /// Copies `buf.len()` bytes at `addr` into `buf`.
    fn media_read(&mut self, addr: Addr, buf: &mut [u8]) -> std::result::Result<(), SpineError>;
    /// Page `pno`, checked to be a sound page of kind `tag` ([`read_checked`]). A
    /// source holding images whose checksums it already knows to be right (pages it
    /// sealed, or checked on the way in) may skip recomputing them.
    fn checked_page(&mut self, pno: u64, tag: Tag) -> Result<PageBuf> {
        read_checked(self, pno, tag)
    }
}

impl<M: Memory + ?Sized> MediaRead for M {
    fn media_size(&self) -> u64 {
        self.size()
    }
    fn media_read(&mut self, addr: Addr, buf: &mut [u8]) -> std::result::Result<(), SpineError> {
        self.read(addr, buf)
    }
}

/// Writes the trailer (checksum and tag) of a page image.
pub fn seal(page: &mut [u8; PAGE as usize], tag: Tag) {
    let crc = crc32fast::hash(&page[..BODY]);
    page[BODY..BODY + 4].copy_from_slice(&crc.to_le_bytes());
    page[BODY + 4..].copy_from_slice(&(tag as u32).to_le_bytes());
}

/// Checks the trailer of page `pno` against the tag it should carry.
pub fn verify(page: &[u8; PAGE as usize], pno: u64, tag: Tag) -> Result<()> {
    let stored_tag = u32::from_le_bytes(page[BODY + 4..].try_into().unwrap());
    if stored_tag != tag as u32 {
        let found = Tag::from_u32(stored_tag)
            .map(|t| t.name().to_string())
            .unwrap_or_else(|| format!("unknown tag {stored_tag:#010x}"));
        return Err(FsError::Corrupt {
            what: tag.name(),
            at: Location {
                page: pno,
                offset: BODY as u64 + 4,
            },
            why: format!("page holds a {found}, expected a {}", tag.name()),
        });
    }
    let stored = u32::from_le_bytes(page[BODY..BODY + 4].try_into().unwrap());
    let computed = crc32fast::hash(&page[..BODY]);
    if stored != computed {
        return Err(FsError::Corrupt {
            what: tag.name(),
            at: Location {
                page: pno,
                offset: BODY as u64,
            },
            why: format!("checksum {stored:#010x} stored, {computed:#010x} computed"),
        });
    }
    Ok(())
}

/// Reads page `pno` without checking it.
pub fn read_raw<R: MediaRead + ?Sized>(mem: &mut R, pno: u64) -> Result<PageBuf> {
    let mut p = PageBuf::to_overwrite();
    mem.media_read(pno * PAGE, &mut p[..])?;
    Ok(p)
}

/// Reads page `pno` and checks that it is a sound page of kind `tag`.
pub fn read_checked<R: MediaRead + ?Sized>(mem: &mut R, pno: u64, tag: Tag) -> Result<PageBuf> {
    let p = read_raw(mem, pno)?;
    verify(&p, pno, tag)?;
    Ok(p)
}

/// Little-endian field accessors on byte slices (offsets are within the slice).
pub mod le {
    /// Reads a `u64` at `off`.
    pub fn u64_at(b: &[u8], off: usize) -> u64 {
        u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
    }
    /// Reads a `u32` at `off`.
    pub fn u32_at(b: &[u8], off: usize) -> u32 {
        u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
    }
    /// Reads a `u16` at `off`.
    pub fn u16_at(b: &[u8], off: usize) -> u16 {
        u16::from_le_bytes(b[off..off + 2].try_into().unwrap())
    }
    /// Writes a `u64` at `off`.
    pub fn put_u64(b: &mut [u8], off: usize, v: u64) {
        b[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }
    /// Writes a `u32` at `off`.
    pub fn put_u32(b: &mut [u8], off: usize, v: u32) {
        b[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }
    /// Writes a `u16` at `off`.
    pub fn put_u16(b: &mut [u8], off: usize, v: u16) {
        b[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_verify_and_detect_flip() {
        let mut p = zero_page();
        p[17] = 5;
        seal(&mut p, Tag::Radix);
        verify(&p, 3, Tag::Radix).unwrap();
        assert!(verify(&p, 3, Tag::Inodes).is_err());
        p[100] ^= 1;
        let e = verify(&p, 3, Tag::Radix).unwrap_err().to_string();
        assert!(e.contains("checksum") && e.contains("page 3"), "{e}");
    }
}

//! Reading the file system's metadata: straight from the media, or through a
//! transaction's overlay of pages it has changed but not yet committed.

use crate::error::{FsError, Location, Result};
use crate::inode::Inode;
use crate::layout::Superblock;
use crate::media::{MediaRead, PageBuf, Tag};

/// A source of checked metadata pages and inodes.
pub trait PageSource {
    /// The superblock.
    fn sb(&self) -> &Superblock;
    /// Page `pno`, checked to be a sound page of kind `tag`.
    fn page(&mut self, pno: u64, tag: Tag) -> Result<PageBuf>;

    /// Inode `ino`.
    fn inode(&mut self, ino: u64) -> Result<Inode> {
        let sb = *self.sb();
        if ino == 0 || ino >= sb.inode_count {
            return Err(FsError::Corrupt {
                what: "inode reference",
                at: Location { page: 0, offset: 0 },
                why: format!("inode number {ino} outside 1..{}", sb.inode_count),
            });
        }
        let (pno, off) = sb.inode_pos(ino);
        let p = self.page(pno, Tag::Inodes)?;
        Inode::decode(&p[off..off + crate::inode::INODE_SIZE]).map_err(|(o, why)| {
            FsError::Corrupt {
                what: "inode",
                at: Location {
                    page: pno,
                    offset: (off + o) as u64,
                },
                why: format!("inode {ino}: {why}"),
            }
        })
    }
}

/// Checked reads straight from a metadata space.
pub struct MediaView<'a, R: MediaRead + ?Sized> {
    mem: &'a mut R,
    sb: Superblock,
}

impl<'a, R: MediaRead + ?Sized> MediaView<'a, R> {
    /// Opens a view, reading and checking the superblock.
    pub fn new(mem: &'a mut R) -> Result<Self> {
        let sb = Superblock::read(mem)?;
        Ok(MediaView { mem, sb })
    }

    /// A view with an already-checked superblock.
    pub fn with_sb(mem: &'a mut R, sb: Superblock) -> Self {
        MediaView { mem, sb }
    }
}

impl<R: MediaRead + ?Sized> PageSource for MediaView<'_, R> {
    fn sb(&self) -> &Superblock {
        &self.sb
    }
    fn page(&mut self, pno: u64, tag: Tag) -> Result<PageBuf> {
        check_page_number(&self.sb, pno, tag)?;
        self.mem.checked_page(pno, tag)
    }
}

/// Refuses a page number beyond the metadata space (a reference read from a damaged
/// page), naming the kind of page it was to be.
pub fn check_page_number(sb: &Superblock, pno: u64, tag: Tag) -> Result<()> {
    if pno >= sb.meta_pages {
        return Err(FsError::Corrupt {
            what: tag.name(),
            at: Location {
                page: pno,
                offset: 0,
            },
            why: format!("page number beyond the {} metadata pages", sb.meta_pages),
        });
    }
    Ok(())
}

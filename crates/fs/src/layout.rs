//! The superblock and the geometry of a volume.
//!
//! A volume is one metadata space plus one data space per permission domain. The
//! metadata space is laid out as:
//!
//! ```text
//! page 0            superblock
//! page 1            domain table
//! log               the service's redo log (log_pages pages, a pmlab-tx RedoLog)
//! meta bitmap       one bit per metadata page (1 = in use)
//! data bitmaps      max_domains bitmaps, one bit per data page of each domain
//! inode table       31 inodes of 128 bytes per page
//! pool              directory pages and radix index pages
//! ```
//!
//! Object identifiers are inode numbers rather than virtual addresses (the paper names an
//! object by its address): clients map the volume wherever the kernel places it, so an
//! index into the inode table is the position-independent equivalent.

use crate::error::{FsError, Location, Result};
use crate::media::{BODY, MediaRead, PAGE, Tag, le, read_raw, seal, verify, zero_page};

/// The magic bytes at the start of the superblock.
pub const MAGIC: &[u8; 8] = b"PMLABAER";
/// The on-media format version this code reads and writes. Version 2: the log pages
/// hold a pmlab-tx redo log (version 1 had a log of its own, cleared after each commit).
/// Version 3: a directory's root page no longer counts its entries (the directory's
/// inode does, in its size), so adding or removing a name changes one page less.
/// Version 4: inodes carry mtime and ctime.
pub const VERSION: u32 = 4;
/// Bits held by one bitmap page.
pub const BITS_PER_PAGE: u64 = BODY as u64 * 8;
/// Inodes held by one inode-table page.
pub const INODES_PER_PAGE: u64 = (BODY / crate::inode::INODE_SIZE) as u64;
/// The inode number of the root directory.
pub const ROOT_INO: u64 = 1;
/// Bytes of one domain-table entry.
pub const DOMAIN_ENTRY: usize = 32;
/// Largest number of permission domains a volume can have.
pub const MAX_DOMAINS_LIMIT: u64 = (BODY / DOMAIN_ENTRY) as u64;

/// What `mkfs` is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Pages of the metadata space.
    pub meta_pages: u64,
    /// Inodes in the inode table (inode 0 is never used).
    pub inodes: u64,
    /// Pages of the service's redo log (bounds the pages one batch may change).
    pub log_pages: u64,
    /// Most permission domains the volume can hold.
    pub max_domains: u64,
    /// Pages of each domain's data space.
    pub domain_pages: u64,
    /// Pages of one KVFS object (KVFS files are fixed-size and contiguous).
    pub kv_object_pages: u64,
    /// An identifier stamped into the volume (lets a client check it mapped the right one).
    pub volume_id: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            meta_pages: 4096,
            inodes: 31 * 256,
            log_pages: 260,
            max_domains: 16,
            domain_pages: 16384,
            kv_object_pages: 4,
            volume_id: 0x00ae_21e0,
        }
    }
}

/// The decoded superblock: the geometry of a volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Pages of the metadata space.
    pub meta_pages: u64,
    /// First page of the redo log.
    pub log_first: u64,
    /// Pages of the redo log.
    pub log_pages: u64,
    /// Page of the domain table.
    pub domtab: u64,
    /// First page of the metadata bitmap.
    pub mbitmap_first: u64,
    /// Pages of the metadata bitmap.
    pub mbitmap_pages: u64,
    /// First page of the data bitmaps.
    pub dbitmap_first: u64,
    /// Pages of one domain's data bitmap.
    pub dbitmap_pages: u64,
    /// First page of the inode table.
    pub itable_first: u64,
    /// Pages of the inode table.
    pub itable_pages: u64,
    /// Inodes in the table.
    pub inode_count: u64,
    /// First page of the pool.
    pub pool_first: u64,
    /// Most permission domains.
    pub max_domains: u64,
    /// Pages of each domain's data space.
    pub domain_pages: u64,
    /// Pages of one KVFS object.
    pub kv_object_pages: u64,
    /// The volume identifier.
    pub volume_id: u64,
}

fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

impl Superblock {
    /// The geometry `p` asks for, or why it cannot be built.
    pub fn plan(p: &Params) -> Result<Superblock> {
        let bad = |why: String| Err(FsError::Foreign(format!("unusable geometry: {why}")));
        if p.max_domains == 0 || p.max_domains > MAX_DOMAINS_LIMIT {
            return bad(format!(
                "max_domains must be 1..={MAX_DOMAINS_LIMIT}, got {}",
                p.max_domains
            ));
        }
        if p.inodes < 2 {
            return bad("at least 2 inodes are needed (0 is unused, 1 is the root)".into());
        }
        if p.domain_pages < 2 || p.kv_object_pages == 0 || p.kv_object_pages >= p.domain_pages {
            return bad("domain_pages must be >= 2 and exceed kv_object_pages >= 1".into());
        }
        if p.log_pages < 3 {
            return bad("the redo log needs at least 3 pages".into());
        }
        let log_first = 2;
        let mbitmap_first = log_first + p.log_pages;
        let mbitmap_pages = div_ceil(p.meta_pages, BITS_PER_PAGE);
        let dbitmap_first = mbitmap_first + mbitmap_pages;
        let dbitmap_pages = div_ceil(p.domain_pages, BITS_PER_PAGE);
        let itable_first = dbitmap_first + dbitmap_pages * p.max_domains;
        let itable_pages = div_ceil(p.inodes, INODES_PER_PAGE);
        let pool_first = itable_first + itable_pages;
        // The root directory needs one pool page; a volume with no room beyond it is useless.
        if pool_first + 2 > p.meta_pages {
            return bad(format!(
                "{} metadata pages cannot hold the fixed areas ({} pages) and a pool",
                p.meta_pages, pool_first
            ));
        }
        Ok(Superblock {
            meta_pages: p.meta_pages,
            log_first,
            log_pages: p.log_pages,
            domtab: 1,
            mbitmap_first,
            mbitmap_pages,
            dbitmap_first,
            dbitmap_pages,
            itable_first,
            itable_pages,
            inode_count: p.inodes,
            pool_first,
            max_domains: p.max_domains,
            domain_pages: p.domain_pages,
            kv_object_pages: p.kv_object_pages,
            volume_id: p.volume_id,
        })
    }

    fn fields(&self) -> [(usize, u64); 16] {
        [
            (16, self.meta_pages),
            (24, self.log_first),
            (32, self.log_pages),
            (40, self.domtab),
            (48, self.mbitmap_first),
            (56, self.mbitmap_pages),
            (64, self.dbitmap_first),
            (72, self.dbitmap_pages),
            (80, self.itable_first),
            (88, self.itable_pages),
            (96, self.inode_count),
            (104, self.pool_first),
            (112, self.max_domains),
            (120, self.domain_pages),
            (128, self.kv_object_pages),
            (136, self.volume_id),
        ]
    }

    /// The sealed superblock page.
    pub fn encode(&self) -> crate::media::PageBuf {
        let mut p = zero_page();
        p[..8].copy_from_slice(MAGIC);
        le::put_u32(&mut p[..], 8, VERSION);
        le::put_u32(&mut p[..], 12, PAGE as u32);
        for (off, v) in self.fields() {
            le::put_u64(&mut p[..], off, v);
        }
        seal(&mut p, Tag::Super);
        p
    }

    /// Reads and checks the superblock of a metadata space: a foreign or damaged
    /// superblock, or one whose geometry does not fit the space, is refused.
    pub fn read<R: MediaRead + ?Sized>(mem: &mut R) -> Result<Superblock> {
        if mem.media_size() < PAGE {
            return Err(FsError::Foreign(format!(
                "the space holds {} bytes, less than one page",
                mem.media_size()
            )));
        }
        let p = read_raw(mem, 0)?;
        if &p[..8] != MAGIC {
            return Err(FsError::Foreign(format!(
                "bad magic {:02x?} at byte 0 (expected {:?})",
                &p[..8],
                std::str::from_utf8(MAGIC).unwrap()
            )));
        }
        let version = le::u32_at(&p[..], 8);
        if version != VERSION {
            return Err(FsError::Foreign(format!(
                "format version {version} at byte 8 (this code reads version {VERSION})"
            )));
        }
        verify(&p, 0, Tag::Super)?;
        let page_size = le::u32_at(&p[..], 12);
        if page_size as u64 != PAGE {
            return Err(FsError::Foreign(format!(
                "page size {page_size} at byte 12 (this code uses {PAGE})"
            )));
        }
        let sb = Superblock::decode(&p[..]);
        sb.check_geometry(mem.media_size())?;
        Ok(sb)
    }

    /// The superblock's fields as stored (unchecked).
    fn decode(p: &[u8]) -> Superblock {
        let g = |off| le::u64_at(p, off);
        Superblock {
            meta_pages: g(16),
            log_first: g(24),
            log_pages: g(32),
            domtab: g(40),
            mbitmap_first: g(48),
            mbitmap_pages: g(56),
            dbitmap_first: g(64),
            dbitmap_pages: g(72),
            itable_first: g(80),
            itable_pages: g(88),
            inode_count: g(96),
            pool_first: g(104),
            max_domains: g(112),
            domain_pages: g(120),
            kv_object_pages: g(128),
            volume_id: g(136),
        }
    }

    /// Refuses a geometry that a plan from the same parameters does not reproduce
    /// exactly (the checksum can be right while the geometry is not: a buggy writer),
    /// or that does not fit a space of `space` bytes.
    fn check_geometry(&self, space: u64) -> Result<()> {
        let at = |offset: u64, why: String| FsError::Corrupt {
            what: "superblock",
            at: Location { page: 0, offset },
            why,
        };
        let planned = Superblock::plan(&Params {
            meta_pages: self.meta_pages,
            inodes: self.inode_count,
            log_pages: self.log_pages,
            max_domains: self.max_domains,
            domain_pages: self.domain_pages,
            kv_object_pages: self.kv_object_pages,
            volume_id: self.volume_id,
        })
        .map_err(|e| at(16, e.to_string()))?;
        if planned != *self {
            let off = self
                .fields()
                .iter()
                .zip(planned.fields().iter())
                .find(|(a, b)| a.1 != b.1)
                .map(|(a, _)| a.0)
                .unwrap_or(0);
            return Err(at(
                off as u64,
                "geometry field inconsistent with the volume parameters".into(),
            ));
        }
        if self.meta_pages * PAGE > space {
            return Err(at(
                16,
                format!(
                    "{} metadata pages do not fit a space of {space} bytes",
                    self.meta_pages
                ),
            ));
        }
        Ok(())
    }

    /// Page and byte offset of inode `ino` in the inode table.
    pub fn inode_pos(&self, ino: u64) -> (u64, usize) {
        (
            self.itable_first + ino / INODES_PER_PAGE,
            (ino % INODES_PER_PAGE) as usize * crate::inode::INODE_SIZE,
        )
    }

    /// First page of domain `d`'s data bitmap.
    pub fn dbitmap_of(&self, d: u64) -> u64 {
        self.dbitmap_first + d * self.dbitmap_pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmlab_spine::{Memory, VecMemory};

    /// Volumes of the previous formats (a log of its own in version 1, counted
    /// directories in version 2, no timestamps in version 3) are
    /// refused by name before anything replays a log.
    #[test]
    fn a_volume_of_a_previous_format_is_refused() {
        let sb = Superblock::plan(&Params::default()).unwrap();
        let mut m = VecMemory::new((sb.meta_pages * PAGE) as usize);
        for old in [1, 2, 3] {
            let mut p = sb.encode();
            le::put_u32(&mut p[..], 8, old);
            seal(&mut p, Tag::Super);
            m.write(0, &p[..]).unwrap();
            let e = Superblock::read(&mut m).unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "format version {old} at byte 8 (this code reads version 4)"
                )),
                "{e}"
            );
        }
        m.write(0, &sb.encode()[..]).unwrap();
        assert_eq!(Superblock::read(&mut m).unwrap(), sb);
    }
}

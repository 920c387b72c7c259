//! Building an empty volume.

use crate::error::Result;
use crate::inode::{Inode, Kind};
use crate::layout::{Params, ROOT_INO, Superblock};
use crate::media::{PAGE, Tag, seal, zero_page};
use pmlab_spine::Memory;

/// Owner and permission bits of the root directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootOwner {
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Permission bits.
    pub mode: u32,
}

impl RootOwner {
    /// The calling process's user and group, with permission bits `mode`.
    pub fn current_user(mode: u32) -> RootOwner {
        RootOwner {
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            mode,
        }
    }
}

/// The current time in nanoseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Writes an empty file system into `mem` ([`mkfs_at`]), its root directory stamped
/// with the current time.
pub fn mkfs<M: Memory + ?Sized>(mem: &mut M, p: &Params, owner: RootOwner) -> Result<Superblock> {
    mkfs_at(mem, p, owner, now_ns())
}

/// Writes an empty file system into `mem`: superblock, empty domain table, empty redo
/// log (a formatted [`pmlab_tx::RedoLog`]), bitmaps, inode table and a root directory
/// whose times are `now` (nanoseconds since the epoch; the crash test passes a fixed
/// time so that its images are a function of its seed). Returns the superblock.
pub fn mkfs_at<M: Memory + ?Sized>(
    mem: &mut M,
    p: &Params,
    owner: RootOwner,
    now: u64,
) -> Result<Superblock> {
    let sb = Superblock::plan(p)?;
    if sb.meta_pages * PAGE > mem.size() {
        return Err(crate::error::FsError::NoSpace(format!(
            "{} metadata pages need {} bytes, the space has {}",
            sb.meta_pages,
            sb.meta_pages * PAGE,
            mem.size()
        )));
    }
    let write = |mem: &mut M, pno: u64, page: &[u8]| mem.write(pno * PAGE, page);
    // The root directory's table is the first pool page.
    let root_dir_page = sb.pool_first;

    let mut dt = zero_page();
    seal(&mut dt, Tag::Domains);
    write(mem, sb.domtab, &dt[..])?;

    // The log pages hold a pmlab-tx redo log (crate::redo): zeroed, then formatted
    // (header only). mkfs is the only writer of metadata pages outside a transaction.
    for pno in sb.log_first..sb.log_first + sb.log_pages {
        write(mem, pno, &zero_page()[..])?;
    }
    crate::redo::MetaLog::format(mem, &sb)?;

    write_bitmaps(mem, &sb, root_dir_page)?;
    write_inode_table(mem, &sb, owner, root_dir_page, now)?;
    let mut r = zero_page();
    seal(&mut r, Tag::DirRoot);
    write(mem, root_dir_page, &r[..])?;
    // The superblock goes last: a space whose mkfs was interrupted is not a volume.
    mem.persist(PAGE, (sb.meta_pages - 1) * PAGE)?;
    write(mem, 0, &sb.encode()[..])?;
    mem.persist(0, PAGE)?;
    Ok(sb)
}

/// The metadata bitmap (every page up to the root directory's table in use) and each
/// domain's data bitmap (data page 0 in use: 0 means "hole").
fn write_bitmaps<M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    root_dir_page: u64,
) -> Result<()> {
    let write = |mem: &mut M, pno: u64, page: &[u8]| mem.write(pno * PAGE, page);
    for i in 0..sb.mbitmap_pages {
        let mut b = zero_page();
        let first_bit = i * crate::layout::BITS_PER_PAGE;
        for pno in 0..=root_dir_page {
            if pno >= first_bit && pno < first_bit + crate::layout::BITS_PER_PAGE {
                let bit = pno - first_bit;
                b[(bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        seal(&mut b, Tag::Bitmap);
        write(mem, sb.mbitmap_first + i, &b[..])?;
    }
    for d in 0..sb.max_domains {
        for i in 0..sb.dbitmap_pages {
            let mut b = zero_page();
            if i == 0 {
                b[0] = 1;
            }
            seal(&mut b, Tag::Bitmap);
            write(mem, sb.dbitmap_of(d) + i, &b[..])?;
        }
    }
    Ok(())
}

/// The inode table, empty but for the root directory owned by `owner`, stamped `now`.
fn write_inode_table<M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    owner: RootOwner,
    root_dir_page: u64,
    now: u64,
) -> Result<()> {
    let write = |mem: &mut M, pno: u64, page: &[u8]| mem.write(pno * PAGE, page);
    for i in 0..sb.itable_pages {
        let mut b = zero_page();
        if i == 0 {
            let root = Inode {
                kind: Kind::Dir,
                height: 0,
                domain: 0,
                mode: owner.mode & 0o7777,
                uid: owner.uid,
                gid: owner.gid,
                nlink: 1,
                size: 0,
                root: root_dir_page,
                parent: ROOT_INO,
                generation: 1,
                bucket: 0,
                mtime: now,
                ctime: now,
            };
            let (_, off) = sb.inode_pos(ROOT_INO);
            root.encode(&mut b[off..off + crate::inode::INODE_SIZE]);
        }
        seal(&mut b, Tag::Inodes);
        write(mem, sb.itable_first + i, &b[..])?;
    }
    Ok(())
}

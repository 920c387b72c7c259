//! Validating and applying a batch: the trusted service's core, a pure function of the
//! volume's metadata and the batch (plus what the service knows about the client), so
//! that it runs unchanged on the machine model for crash exploration.
//!
//! Every operation is checked against the invariants the paper names (names unique in a
//! directory, link counts, allocation status) and against the client's rights
//! (permissions from its kernel credentials, the leases it holds, the inodes and pages
//! reserved to it). The first failing operation rejects the whole batch; since all
//! changes live in the transaction's overlay, a rejected batch changes nothing.

use crate::dir;
use crate::domain::{self, Domain};
use crate::error::{FsError, Result};
use crate::inode::{Inode, Kind, access};
use crate::journal::Op;
use crate::layout::{ROOT_INO, Superblock};
use crate::lease::bucket_key;
use crate::media::{MediaRead, PAGE};
use crate::radix;
use crate::txn::{Changes, Txn};
use crate::view::PageSource;

/// What the service knows about the client whose batch is applied.
pub trait Authority {
    /// The client's user and group, from its kernel credentials.
    fn cred(&self) -> (u32, u32);
    /// Whether the client holds an exclusive lease on `ino` itself.
    fn holds_lease(&self, ino: u64) -> bool;
    /// Whether inode `ino` is reserved to the client.
    fn inode_reserved(&self, ino: u64) -> bool;
    /// Whether data page `page` of `domain` is reserved to the client.
    fn page_reserved(&self, domain: u16, page: u64) -> bool;
    /// The first of data pages `first .. first + count` of `domain` not reserved to the
    /// client, if any (an extent is checked as a whole; an authority that keeps its
    /// reservations as runs answers without a lookup per page).
    fn first_unreserved(&self, domain: u16, first: u64, count: u64) -> Option<u64> {
        (first..first.saturating_add(count)).find(|&p| !self.page_reserved(domain, p))
    }
    /// Whether any client holds `ino` open (an unlinked open file becomes an orphan).
    fn is_open(&self, ino: u64) -> bool;
    /// Whether the changed pages come back sealed (checksummed). The service commits
    /// them, so it needs the seals; libFS's local check only lays them over its own view,
    /// which trusts pages the client wrote itself and checks only their kind
    /// ([`crate::overlay::Overlay`]), so it skips a checksum of every page it changes.
    fn seals_changes(&self) -> bool {
        true
    }
}

/// An authority that holds every right: root, every lease, every inode and data page
/// reserved, nothing open. The crash test of the commit path and the unit tests speak
/// for it; the service never applies a client's batch under it.
pub struct AllRights;

impl Authority for AllRights {
    fn cred(&self) -> (u32, u32) {
        (0, 0)
    }
    fn holds_lease(&self, _: u64) -> bool {
        true
    }
    fn inode_reserved(&self, _: u64) -> bool {
        true
    }
    fn page_reserved(&self, _: u16, _: u64) -> bool {
        true
    }
    fn is_open(&self, _: u64) -> bool {
        false
    }
}

/// Why a batch was rejected: the operation and what it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Index of the operation in the batch.
    pub index: usize,
    /// The operation's name.
    pub op: &'static str,
    /// What was wrong.
    pub why: String,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "operation {} ({}): {}", self.index, self.op, self.why)
    }
}

/// The effect of an accepted batch.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Sealed page images to commit.
    pub changes: Changes,
    /// Reserved inodes the batch consumed.
    pub used_inodes: Vec<u64>,
    /// Reserved data pages the batch consumed.
    pub used_pages: Vec<(u16, u64)>,
    /// Objects whose last name went while open: kept until closed.
    pub orphaned: Vec<u64>,
}

type OpResult = std::result::Result<(), String>;

struct Applier<'a, 'm, R: MediaRead + ?Sized> {
    txn: Txn<'m, R>,
    auth: &'a dyn Authority,
    out: Outcome,
}

fn fs(e: FsError) -> String {
    e.to_string()
}

impl<R: MediaRead + ?Sized> Applier<'_, '_, R> {
    fn sb(&self) -> Superblock {
        *self.txn.sb()
    }

    fn inode(&mut self, ino: u64) -> std::result::Result<Inode, String> {
        if ino == 0 || ino >= self.sb().inode_count {
            return Err(format!("inode {ino} outside the table"));
        }
        self.txn.inode(ino).map_err(fs)
    }

    /// A lease on `ino` or on any directory above it covers `ino`.
    fn covered(&mut self, ino: u64) -> std::result::Result<bool, String> {
        let mut x = ino;
        for _ in 0..self.sb().inode_count {
            if self.auth.holds_lease(x) {
                return Ok(true);
            }
            if x == ROOT_INO {
                return Ok(false);
            }
            let i = self.inode(x)?;
            if self.auth.holds_lease(bucket_key(i.parent, i.bucket as u64)) {
                return Ok(true);
            }
            x = i.parent;
        }
        Err(format!("parent chain of inode {ino} loops"))
    }

    fn need_lease(&mut self, ino: u64) -> OpResult {
        if self.covered(ino)? {
            Ok(())
        } else {
            Err(format!("the client holds no lease covering inode {ino}"))
        }
    }

    /// Checks that the client may change the entry `name` of directory `ino`: write
    /// permission, and a lease on the directory (or above) or on the name's bucket.
    fn writable_dir(&mut self, ino: u64, name: &str) -> std::result::Result<Inode, String> {
        let d = self.inode(ino)?;
        if d.kind != Kind::Dir {
            return Err(format!("inode {ino} is not a directory"));
        }
        let (uid, gid) = self.auth.cred();
        if !access(uid, gid, d.uid, d.gid, d.mode).write {
            return Err(format!("uid {uid} may not write directory inode {ino}"));
        }
        if !self.auth.holds_lease(bucket_key(ino, dir::bucket_of(name))) {
            self.need_lease(ino)?;
        }
        Ok(d)
    }

    fn writable_object(&mut self, ino: u64) -> std::result::Result<Inode, String> {
        let i = self.inode(ino)?;
        if i.kind != Kind::File && i.kind != Kind::Kv {
            return Err(format!("inode {ino} is a {:?}, not a file", i.kind));
        }
        let (uid, gid) = self.auth.cred();
        if !access(uid, gid, i.uid, i.gid, i.mode).write {
            return Err(format!("uid {uid} may not write inode {ino}"));
        }
        self.need_lease(ino)?;
        Ok(i)
    }

    fn add_entry(&mut self, dino: u64, mut d: Inode, name: &str, ino: u64) -> OpResult {
        dir::check_name(name).map_err(fs)?;
        if let Some(existing) = dir::lookup(&mut self.txn, d.root, name).map_err(fs)? {
            return Err(format!(
                "name {name:?} already exists in directory inode {dino} (inode {existing})"
            ));
        }
        dir::insert(&mut self.txn, d.root, name, ino).map_err(fs)?;
        d.size += 1;
        self.txn.put_inode(dino, &d).map_err(fs)
    }

    fn drop_entry(&mut self, dino: u64, name: &str, ino: u64) -> OpResult {
        let mut d = self.inode(dino)?;
        match dir::lookup(&mut self.txn, d.root, name).map_err(fs)? {
            Some(x) if x == ino => {}
            Some(x) => return Err(format!("name {name:?} refers to inode {x}, not {ino}")),
            None => return Err(format!("no name {name:?} in directory inode {dino}")),
        }
        dir::remove(&mut self.txn, d.root, name).map_err(fs)?;
        d.size -= 1;
        self.txn.put_inode(dino, &d).map_err(fs)
    }

    fn free_data(&mut self, domain: u16, pages: &[u64]) -> OpResult {
        let first = self.sb().dbitmap_of(domain as u64);
        for &p in pages {
            self.txn.set_bit(first, p, false).map_err(fs)?;
        }
        Ok(())
    }

    /// Frees data pages `first .. first + count` of `domain` (a KVFS object's extent).
    fn free_extent(&mut self, domain: u16, first: u64, count: u64) -> OpResult {
        let bitmap = self.sb().dbitmap_of(domain as u64);
        self.txn.set_bits(bitmap, first, count, false).map_err(fs)
    }

    /// Frees an object with no names left.
    fn release(&mut self, ino: u64, mut i: Inode) -> OpResult {
        match i.kind {
            Kind::File => {
                let freed = radix::truncate(&mut self.txn, &mut i, 0).map_err(fs)?;
                self.free_data(i.domain, &freed)?;
            }
            Kind::Kv if i.root != 0 => {
                self.free_extent(i.domain, i.root, self.sb().kv_object_pages)?;
            }
            _ => {}
        }
        let freed = Inode {
            generation: i.generation + 1,
            ..Inode::FREE
        };
        self.txn.put_inode(ino, &freed).map_err(fs)
    }

    fn op(&mut self, op: &Op) -> OpResult {
        let sb = self.sb();
        match op {
            Op::Create {
                parent,
                name,
                ino,
                kind,
                mode,
                domain,
            } => {
                let d = self.writable_dir(*parent, name)?;
                if !self.auth.inode_reserved(*ino) {
                    return Err(format!("inode {ino} is not reserved to the client"));
                }
                let old = self.inode(*ino)?;
                if old.kind != Kind::Free {
                    return Err(format!("inode {ino} is already in use"));
                }
                let (uid, gid) = self.auth.cred();
                let mode = mode & 0o777;
                let mut new = Inode {
                    kind: *kind,
                    height: 0,
                    domain: 0,
                    mode,
                    uid,
                    gid,
                    nlink: 1,
                    size: 0,
                    root: 0,
                    parent: *parent,
                    generation: old.generation + 1,
                    bucket: dir::bucket_of(name) as u16,
                };
                match kind {
                    Kind::Dir => new.root = dir::create(&mut self.txn).map_err(fs)?,
                    Kind::File | Kind::Kv => {
                        let table = domain::read_table(&mut self.txn).map_err(fs)?;
                        let want = Domain { uid, gid, mode };
                        if table.get(*domain as usize).copied().flatten() != Some(want) {
                            return Err(format!(
                                "domain {domain} is not the domain of owner {uid}, group {gid}, mode {mode:o}"
                            ));
                        }
                        new.domain = *domain;
                    }
                    Kind::Free => return Err("cannot create a free inode".into()),
                }
                self.add_entry(*parent, d, name, *ino)?;
                self.txn.put_inode(*ino, &new).map_err(fs)?;
                self.out.used_inodes.push(*ino);
                Ok(())
            }
            Op::Link { parent, name, ino } => {
                let d = self.writable_dir(*parent, name)?;
                let mut i = self.inode(*ino)?;
                if i.kind != Kind::File {
                    return Err(format!(
                        "inode {ino} is a {:?}; only files take extra names",
                        i.kind
                    ));
                }
                if i.nlink == 0 {
                    return Err(format!("inode {ino} has been unlinked"));
                }
                self.add_entry(*parent, d, name, *ino)?;
                i.nlink += 1;
                self.txn.put_inode(*ino, &i).map_err(fs)
            }
            Op::Unlink { parent, name, ino } => {
                self.writable_dir(*parent, name)?;
                let mut i = self.inode(*ino)?;
                if i.kind == Kind::Dir {
                    return Err(format!("inode {ino} is a directory; use rmdir"));
                }
                self.drop_entry(*parent, name, *ino)?;
                i.nlink = i
                    .nlink
                    .checked_sub(1)
                    .ok_or_else(|| format!("inode {ino} has link count 0"))?;
                if i.nlink > 0 {
                    return self.txn.put_inode(*ino, &i).map_err(fs);
                }
                if self.auth.is_open(*ino) {
                    self.out.orphaned.push(*ino);
                    return self.txn.put_inode(*ino, &i).map_err(fs);
                }
                self.release(*ino, i)
            }
            Op::Rmdir { parent, name, ino } => {
                self.writable_dir(*parent, name)?;
                if *ino == ROOT_INO {
                    return Err("the root cannot be removed".into());
                }
                let i = self.inode(*ino)?;
                if i.kind != Kind::Dir {
                    return Err(format!("inode {ino} is not a directory"));
                }
                if i.size != 0 {
                    return Err(format!("directory inode {ino} holds {} entries", i.size));
                }
                self.drop_entry(*parent, name, *ino)?;
                dir::destroy(&mut self.txn, i.root).map_err(fs)?;
                self.release(*ino, i)
            }
            Op::Rename {
                from_parent,
                from_name,
                to_parent,
                to_name,
                ino,
            } => {
                self.writable_dir(*from_parent, from_name)?;
                self.writable_dir(*to_parent, to_name)?;
                let mut i = self.inode(*ino)?;
                if i.kind == Kind::Dir {
                    // A directory may not move below itself.
                    let mut x = *to_parent;
                    for _ in 0..sb.inode_count {
                        if x == *ino {
                            return Err(format!("directory inode {ino} cannot move below itself"));
                        }
                        if x == ROOT_INO {
                            break;
                        }
                        x = self.inode(x)?.parent;
                    }
                }
                self.drop_entry(*from_parent, from_name, *ino)?;
                let d = self.inode(*to_parent)?;
                self.add_entry(*to_parent, d, to_name, *ino)?;
                i.parent = *to_parent;
                i.bucket = dir::bucket_of(to_name) as u16;
                self.txn.put_inode(*ino, &i).map_err(fs)
            }
            Op::SetSize { ino, size } => {
                let mut i = self.writable_object(*ino)?;
                match i.kind {
                    Kind::Kv if *size > sb.kv_object_pages * PAGE => {
                        return Err(format!(
                            "size {size} exceeds the {}-byte KVFS object",
                            sb.kv_object_pages * PAGE
                        ));
                    }
                    Kind::File if *size < i.size => {
                        let keep = size.div_ceil(PAGE);
                        let freed = radix::truncate(&mut self.txn, &mut i, keep).map_err(fs)?;
                        self.free_data(i.domain, &freed)?;
                    }
                    _ => {}
                }
                if *size > radix::capacity(radix::MAX_HEIGHT).saturating_mul(PAGE) {
                    return Err(format!("size {size} beyond the largest file"));
                }
                i.size = *size;
                self.txn.put_inode(*ino, &i).map_err(fs)
            }
            Op::MapPages {
                ino,
                index,
                page,
                count,
            } => {
                let mut i = self.writable_object(*ino)?;
                if *count == 0 || *count > sb.domain_pages {
                    return Err(format!("extent of {count} pages"));
                }
                let first = sb.dbitmap_of(i.domain as u64);
                // The extent is checked as a whole, page by page in what it reports: the
                // first page outside the domain, not reserved, or already allocated.
                if *page == 0 || page.saturating_add(*count) > sb.domain_pages {
                    let p = if *page == 0 {
                        0
                    } else {
                        sb.domain_pages.max(*page)
                    };
                    return Err(format!("data page {p} outside domain {}", i.domain));
                }
                if let Some(p) = self.auth.first_unreserved(i.domain, *page, *count) {
                    return Err(format!(
                        "data page {p} of domain {} is not reserved to the client",
                        i.domain
                    ));
                }
                if let Some(p) = self.txn.first_set_bit(first, *page, *count).map_err(fs)? {
                    return Err(format!(
                        "data page {p} of domain {} is already allocated",
                        i.domain
                    ));
                }
                self.txn.set_bits(first, *page, *count, true).map_err(fs)?;
                self.out
                    .used_pages
                    .extend((*page..*page + *count).map(|p| (i.domain, p)));
                match i.kind {
                    Kind::Kv => {
                        if *index != 0 || *count != sb.kv_object_pages {
                            return Err(format!(
                                "a KVFS object is one extent of {} pages at index 0",
                                sb.kv_object_pages
                            ));
                        }
                        if i.root != 0 {
                            self.free_extent(i.domain, i.root, sb.kv_object_pages)?;
                        }
                        i.root = *page;
                    }
                    _ => {
                        for k in 0..*count {
                            let old = radix::map(
                                &mut self.txn,
                                &mut i,
                                index.saturating_add(k),
                                page + k,
                            )
                            .map_err(fs)?;
                            if old != 0 {
                                self.free_data(i.domain, &[old])?;
                            }
                        }
                    }
                }
                self.txn.put_inode(*ino, &i).map_err(fs)
            }
        }
    }
}

/// Validates `ops` for the client `auth` describes and, if every operation is valid,
/// returns the pages to commit. Nothing in `mem` is changed.
pub fn apply_batch<R: MediaRead + ?Sized>(
    mem: &mut R,
    sb: Superblock,
    auth: &dyn Authority,
    ops: &[Op],
) -> std::result::Result<Outcome, Rejection> {
    let mut a = Applier {
        txn: Txn::new(mem, sb),
        auth,
        out: Outcome::default(),
    };
    for (index, op) in ops.iter().enumerate() {
        a.op(op).map_err(|why| Rejection {
            index,
            op: op.name(),
            why,
        })?;
    }
    let cap = crate::redo::capacity(&sb);
    if a.txn.changed_pages() as u64 > cap {
        return Err(Rejection {
            index: ops.len().saturating_sub(1),
            op: "batch",
            why: format!(
                "changes {} metadata pages; one transaction may change {cap}",
                a.txn.changed_pages()
            ),
        });
    }
    let mut out = a.out;
    out.changes = if auth.seals_changes() {
        a.txn.into_changes()
    } else {
        a.txn.into_unsealed_changes()
    };
    Ok(out)
}

/// Frees an orphan (an unlinked object whose last opener closed it, or left over from a
/// crash). Returns the pages to commit.
pub fn reclaim_orphan<R: MediaRead + ?Sized>(
    mem: &mut R,
    sb: Superblock,
    ino: u64,
) -> Result<Changes> {
    struct Nobody;
    impl Authority for Nobody {
        fn cred(&self) -> (u32, u32) {
            (0, 0)
        }
        fn holds_lease(&self, _: u64) -> bool {
            true
        }
        fn inode_reserved(&self, _: u64) -> bool {
            false
        }
        fn page_reserved(&self, _: u16, _: u64) -> bool {
            false
        }
        fn is_open(&self, _: u64) -> bool {
            false
        }
    }
    let auth = Nobody;
    let mut a = Applier {
        txn: Txn::new(mem, sb),
        auth: &auth,
        out: Outcome::default(),
    };
    let i = a.txn.inode(ino)?;
    if i.kind == Kind::Free || i.kind == Kind::Dir || i.nlink != 0 {
        return Ok(Changes::new());
    }
    a.release(ino, i).map_err(FsError::Refused)?;
    Ok(a.txn.into_changes())
}

/// Finds the domain for new objects of a client, adding it if needed. Returns the
/// domain, whether it is new, and the pages to commit.
pub fn domain_for<R: MediaRead + ?Sized>(
    mem: &mut R,
    sb: Superblock,
    d: Domain,
) -> Result<(u16, bool, Changes)> {
    let mut txn = Txn::new(mem, sb);
    let (id, added) = domain::find_or_add(&mut txn, d)?;
    Ok((id, added, txn.into_changes()))
}

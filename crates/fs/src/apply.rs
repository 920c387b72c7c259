//! Validating and applying a batch: the trusted service's core, a pure function of the
//! volume's metadata and the batch (plus what the service knows about the client), so
//! that it runs unchanged on the machine model for crash exploration.
//!
//! Every operation is checked against the invariants the paper names (names unique in a
//! directory, link counts, allocation status) and against the client's rights
//! (permissions from its kernel credentials, the leases it holds, the inodes and pages
//! reserved to it). The first failing operation rejects the whole batch; since all
//! changes live in the transaction's overlay, a rejected batch changes nothing.
//!
//! The rights, POSIX's where POSIX has one:
//! - a name is added or removed only in a directory the client may write and search,
//!   under a lease covering the directory (or the name's bucket);
//! - an object whose link count, parent or size changes (link, unlink, rmdir, rename,
//!   set-size, map-pages) must be covered by one of the client's exclusive leases too,
//!   so that whoever holds it is made to ship its own pending changes first (a client
//!   that renamed another client's file out from under that client's lease once made
//!   the owner's next batch fail as a whole, losing a write that had returned success);
//! - a new name for a file (link) needs the file's owner or read and write permission
//!   on it (Linux's protected hard links), so that no one can pin or move another
//!   user's private file by naming it in a directory of their own;
//! - moving a directory to another parent needs write permission on the directory
//!   itself (its ".." changes), as in POSIX;
//! - data changes (set-size, map-pages) need write permission on the object.

mod attr;

pub use attr::{AttrChange, DataMove, SetAttr, pages_to_move, plan as plan_attr, set_attr};

use rustc_hash::FxHashSet;

use crate::dir;
use crate::domain::{self, Domain};
use crate::error::{FsError, Result};
use crate::inode::{Inode, Kind, access};
use crate::journal::Op;
use crate::layout::{ROOT_INO, Superblock};
use crate::lease::bucket_key;
use crate::media::{MediaRead, PAGE};
use crate::radix;
use crate::txn::{Changes, Clean, Txn};
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
    /// The time stamped into the mtime and ctime of what the batch changes, in
    /// nanoseconds since the Unix epoch. The service's clock when it applies a batch
    /// (libFS's local check uses its own, and its overlay shows that until the batch is
    /// applied); a clock of its own for the crash test, whose images must be a function
    /// of its seed. The default, 0, is for authorities that stamp nothing.
    fn now(&self) -> u64 {
        0
    }
    /// The time to stamp for a client's [`Op::Stamp`] of `claimed`: the claim, kept
    /// within [`MAX_STAMP_AGE_NS`] behind [`Authority::now`] and never after it. A
    /// client may thus date what it changes only to when it could have recorded it,
    /// give or take the window. libFS sends what it records at once when nothing of
    /// its is in flight, else with its next batch, so its own stamps fall in the
    /// window and the service writes the pages libFS's check wrote, which libFS then
    /// keeps cached; a batch held longer is clamped, and its pages leave the cache.
    fn stamp(&self, claimed: u64) -> u64 {
        let now = self.now();
        claimed.clamp(now.saturating_sub(MAX_STAMP_AGE_NS), now)
    }
}

/// How far behind the applier's clock a client's stamp may date its changes. Aerie's
/// libFS makes its changes itself and the trusted service only checks them, so the
/// changes' times are libFS's (as a kernel file system's are the time of the call,
/// not of the write back); the window bounds what a client with the right to change
/// an object can backdate (a second, where POSIX lets an owner set any time).
pub const MAX_STAMP_AGE_NS: u64 = 1_000_000_000;

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
    /// Sealed page images to commit (unsealed, and with the images the check began
    /// with, for a local check over libFS's overlay: [`apply_batch_over`]).
    pub changes: Changes,
    /// The pages the batch changed, in no particular order.
    pub changed: Vec<u64>,
    /// For a local check ([`apply_batch_over`]): the unchanged pages it read and
    /// found sound, those it was handed included.
    pub clean: Clean,
    /// Inodes the batch wrote, in the order written (an inode may appear more than
    /// once): a client drops or refreshes what it cached of these alone.
    pub written_inodes: Vec<u64>,
    /// Reserved inodes the batch consumed.
    pub used_inodes: Vec<u64>,
    /// Reserved data pages the batch consumed: (domain, first page, pages) per extent.
    pub used_pages: Vec<(u16, u64, u64)>,
    /// Objects whose last name went while open: kept until closed.
    pub orphaned: Vec<u64>,
    /// Inodes the batch freed: leases on them name nothing any more.
    pub freed_inodes: Vec<u64>,
    /// Per domain whose data pages the batch freed, the lowest of them (a page search
    /// may start there again: freed pages are used again before untouched ones).
    pub lowest_freed: Vec<(u16, u64)>,
    /// Objects the batch added to (positive) or took from (negative) each domain: the
    /// service keeps the counts, to free domains left without objects.
    pub domain_objects: Vec<(u16, i64)>,
    /// Where the next metadata page search starts (next-fit across batches).
    pub meta_cursor: u64,
    /// Pool pages (index and directory pages) the batch freed. Their contents stay as
    /// they were, and the service may place a later batch's pages there: a client
    /// that caches pages by number drops these (see `crate::cache`).
    pub freed_meta_pages: Vec<u64>,
    /// Objects found covered by the client's leases, unless an operation of the batch
    /// took a name away or moved one (which can change an ancestry): the ones it was
    /// handed too ([`apply_batch_over`]).
    pub covered: FxHashSet<u64>,
}

type OpResult = std::result::Result<(), String>;

pub(crate) struct Applier<'a, 'm, R: MediaRead + ?Sized> {
    pub(crate) txn: Txn<'m, R>,
    pub(crate) auth: &'a dyn Authority,
    pub(crate) out: Outcome,
    pub(crate) now: u64,
    /// Objects found covered by a lease earlier in the batch: an append's page maps
    /// and new size check the file's cover once. An operation that takes a name away
    /// or moves one ends it, as it can change an ancestry.
    covered: FxHashSet<u64>,
}

pub(crate) fn fs(e: FsError) -> String {
    e.to_string()
}

impl<'a, 'm, R: MediaRead + ?Sized> Applier<'a, 'm, R> {
    pub(crate) fn new(
        mem: &'m mut R,
        sb: Superblock,
        auth: &'a dyn Authority,
        cursor: u64,
    ) -> Self {
        Self::over(
            Txn::with_meta_cursor(mem, sb, cursor),
            auth,
            FxHashSet::default(),
        )
    }

    fn over(txn: Txn<'m, R>, auth: &'a dyn Authority, covered: FxHashSet<u64>) -> Self {
        Applier {
            txn,
            auth,
            out: Outcome::default(),
            now: auth.now(),
            covered,
        }
    }

    fn sb(&self) -> Superblock {
        *self.txn.sb()
    }

    pub(crate) fn inode(&mut self, ino: u64) -> std::result::Result<Inode, String> {
        if ino == 0 || ino >= self.sb().inode_count {
            return Err(format!("inode {ino} outside the table"));
        }
        self.txn.inode(ino).map_err(fs)
    }

    pub(crate) fn put_inode(&mut self, ino: u64, i: &Inode) -> OpResult {
        debug_assert!(
            i.kind != Kind::Free || i.nlink == 0,
            "inode {ino}: a free inode with {} names",
            i.nlink
        );
        debug_assert!(
            i.height <= radix::MAX_HEIGHT,
            "inode {ino}: height {}",
            i.height
        );
        self.txn.put_inode(ino, i).map_err(fs)?;
        self.out.written_inodes.push(ino);
        Ok(())
    }

    /// A lease on `ino` or on any directory above it covers `ino`.
    fn covered(&mut self, ino: u64) -> std::result::Result<bool, String> {
        if self.covered.contains(&ino) {
            return Ok(true);
        }
        let hit = self.covered_up_the_tree(ino)?;
        if hit {
            self.covered.insert(ino);
        }
        Ok(hit)
    }

    fn covered_up_the_tree(&mut self, ino: u64) -> std::result::Result<bool, String> {
        let mut x = ino;
        for _ in 0..self.sb().inode_count {
            if self.auth.holds_lease(x) {
                return Ok(true);
            }
            if x == ROOT_INO {
                return Ok(false);
            }
            let i = self.inode(x)?;
            if i.kind == Kind::Free {
                // A free inode is below nothing; only a lease on it could cover it.
                return Ok(false);
            }
            if self.auth.holds_lease(bucket_key(i.parent, i.bucket as u64)) {
                return Ok(true);
            }
            x = i.parent;
        }
        Err(format!("parent chain of inode {ino} loops"))
    }

    pub(crate) fn need_lease(&mut self, ino: u64) -> OpResult {
        if self.covered(ino)? {
            Ok(())
        } else {
            Err(format!("the client holds no lease covering inode {ino}"))
        }
    }

    /// Checks that the client may change the entry `name` of directory `ino`: write and
    /// search permission, and a lease on the directory (or above) or on the name's bucket.
    fn writable_dir(&mut self, ino: u64, name: &str) -> std::result::Result<Inode, String> {
        let d = self.inode(ino)?;
        if d.kind != Kind::Dir {
            return Err(format!("inode {ino} is not a directory"));
        }
        let (uid, gid) = self.auth.cred();
        let acc = access(uid, gid, d.uid, d.gid, d.mode);
        if !(acc.write && acc.exec) {
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

    /// Adds `name -> ino` to directory `dino` (inode `d`), touching its times.
    fn add_entry(&mut self, dino: u64, mut d: Inode, name: &str, ino: u64) -> OpResult {
        dir::check_name(name).map_err(fs)?;
        if let Some(existing) = dir::lookup(&mut self.txn, d.root, name).map_err(fs)? {
            return Err(format!(
                "name {name:?} already exists in directory inode {dino} (inode {existing})"
            ));
        }
        dir::insert(&mut self.txn, d.root, name, ino).map_err(fs)?;
        d.size += 1;
        d.mtime = self.now;
        d.ctime = self.now;
        self.put_inode(dino, &d)
    }

    /// Removes `name -> ino` from directory `dino`, touching its times.
    fn drop_entry(&mut self, dino: u64, name: &str, ino: u64) -> OpResult {
        let mut d = self.inode(dino)?;
        match dir::lookup(&mut self.txn, d.root, name).map_err(fs)? {
            Some(x) if x == ino => {}
            Some(x) => return Err(format!("name {name:?} refers to inode {x}, not {ino}")),
            None => return Err(format!("no name {name:?} in directory inode {dino}")),
        }
        dir::remove(&mut self.txn, d.root, name).map_err(fs)?;
        debug_assert!(
            d.size > 0,
            "directory inode {dino} lost a name it did not count"
        );
        d.size -= 1;
        d.mtime = self.now;
        d.ctime = self.now;
        self.put_inode(dino, &d)
    }

    fn note_freed(&mut self, domain: u16, page: u64) {
        match self.out.lowest_freed.iter_mut().find(|x| x.0 == domain) {
            Some(x) => x.1 = x.1.min(page),
            None => self.out.lowest_freed.push((domain, page)),
        }
    }

    pub(crate) fn free_data(&mut self, domain: u16, pages: &[u64]) -> OpResult {
        let first = self.sb().dbitmap_of(domain as u64);
        for &p in pages {
            debug_assert!(
                self.txn.first_set_bit(first, p, 1).ok().flatten() == Some(p),
                "data page {p} of domain {domain} freed twice"
            );
            self.txn.set_bit(first, p, false).map_err(fs)?;
            self.note_freed(domain, p);
        }
        Ok(())
    }

    /// Frees data pages `first .. first + count` of `domain` (a KVFS object's extent).
    pub(crate) fn free_extent(&mut self, domain: u16, first: u64, count: u64) -> OpResult {
        let bitmap = self.sb().dbitmap_of(domain as u64);
        self.txn.set_bits(bitmap, first, count, false).map_err(fs)?;
        self.note_freed(domain, first);
        Ok(())
    }

    /// Notes an object added to (`delta` 1) or taken from (-1) domain `d`.
    pub(crate) fn count_object(&mut self, d: u16, delta: i64) -> OpResult {
        match self.out.domain_objects.iter_mut().find(|x| x.0 == d) {
            Some(x) => x.1 += delta,
            None => self.out.domain_objects.push((d, delta)),
        }
        Ok(())
    }

    /// Frees an object with no names left.
    fn release(&mut self, ino: u64, mut i: Inode) -> OpResult {
        debug_assert_eq!(i.nlink, 0, "inode {ino} released with names left");
        match i.kind {
            Kind::File => {
                let freed = radix::truncate(&mut self.txn, &mut i, 0).map_err(fs)?;
                self.free_data(i.domain, &freed)?;
                self.count_object(i.domain, -1)?;
            }
            Kind::Kv => {
                if i.root != 0 {
                    self.free_extent(i.domain, i.root, self.sb().kv_object_pages)?;
                }
                self.count_object(i.domain, -1)?;
            }
            _ => {}
        }
        let freed = Inode {
            generation: i.generation + 1,
            ..Inode::FREE
        };
        self.out.freed_inodes.push(ino);
        self.put_inode(ino, &freed)
    }

    /// Takes one name away from object `ino` (inode `i`): it lives on with its other
    /// names, as an orphan while someone holds it open, or is freed.
    fn unname(&mut self, ino: u64, mut i: Inode) -> OpResult {
        i.nlink = i
            .nlink
            .checked_sub(1)
            .ok_or_else(|| format!("inode {ino} has link count 0"))?;
        i.ctime = self.now;
        if i.nlink > 0 {
            return self.put_inode(ino, &i);
        }
        if self.auth.is_open(ino) {
            self.out.orphaned.push(ino);
            return self.put_inode(ino, &i);
        }
        self.release(ino, i)
    }

    fn op(&mut self, op: &Op) -> OpResult {
        if matches!(
            op,
            Op::Unlink { .. } | Op::Rmdir { .. } | Op::Rename { .. } | Op::Link { .. }
        ) {
            self.covered.clear();
        }
        match op {
            Op::Create {
                parent,
                name,
                ino,
                kind,
                mode,
                domain,
            } => self.create(*parent, name, *ino, *kind, *mode, *domain),
            Op::Link { parent, name, ino } => self.link(*parent, name, *ino),
            Op::Unlink { parent, name, ino } => self.unlink(*parent, name, *ino),
            Op::Rmdir { parent, name, ino } => self.rmdir(*parent, name, *ino),
            Op::Rename {
                from_parent,
                from_name,
                to_parent,
                to_name,
                ino,
                replace,
            } => self.rename(
                (*from_parent, from_name),
                (*to_parent, to_name),
                *ino,
                *replace,
            ),
            Op::SetSize { ino, size } => self.set_size(*ino, *size),
            Op::MapPages {
                ino,
                index,
                page,
                count,
            } => self.map_pages(*ino, *index, *page, *count),
            Op::Stamp { now } => {
                self.now = self.auth.stamp(*now);
                Ok(())
            }
        }
    }

    fn create(
        &mut self,
        parent: u64,
        name: &str,
        ino: u64,
        kind: Kind,
        mode: u32,
        domain: u16,
    ) -> OpResult {
        let d = self.writable_dir(parent, name)?;
        if !self.auth.inode_reserved(ino) {
            return Err(format!("inode {ino} is not reserved to the client"));
        }
        let old = self.inode(ino)?;
        if old.kind != Kind::Free {
            return Err(format!("inode {ino} is already in use"));
        }
        let (uid, gid) = self.auth.cred();
        let mode = mode & 0o777;
        let mut new = Inode {
            kind,
            mode,
            uid,
            gid,
            nlink: 1,
            parent,
            generation: old.generation + 1,
            bucket: dir::bucket_of(name) as u16,
            mtime: self.now,
            ctime: self.now,
            ..Inode::FREE
        };
        match kind {
            Kind::Dir => new.root = dir::create(&mut self.txn).map_err(fs)?,
            Kind::File | Kind::Kv => {
                let want = Domain { uid, gid, mode };
                if domain::entry(&mut self.txn, domain).map_err(fs)? != Some(want) {
                    return Err(format!(
                        "domain {domain} is not the domain of owner {uid}, group {gid}, mode {mode:o}"
                    ));
                }
                new.domain = domain;
                self.count_object(domain, 1)?;
            }
            Kind::Free => return Err("cannot create a free inode".into()),
        }
        self.add_entry(parent, d, name, ino)?;
        self.put_inode(ino, &new)?;
        self.out.used_inodes.push(ino);
        Ok(())
    }

    fn link(&mut self, parent: u64, name: &str, ino: u64) -> OpResult {
        let d = self.writable_dir(parent, name)?;
        let mut i = self.inode(ino)?;
        if i.kind != Kind::File {
            return Err(format!(
                "inode {ino} is a {:?}; only files take extra names",
                i.kind
            ));
        }
        if i.nlink == 0 {
            return Err(format!("inode {ino} has been unlinked"));
        }
        let (uid, gid) = self.auth.cred();
        let acc = access(uid, gid, i.uid, i.gid, i.mode);
        if uid != 0 && uid != i.uid && !(acc.read && acc.write) {
            return Err(format!(
                "uid {uid} may not link inode {ino}: it neither owns it nor may read and write it"
            ));
        }
        self.need_lease(ino)?;
        self.add_entry(parent, d, name, ino)?;
        i.nlink += 1;
        i.ctime = self.now;
        self.put_inode(ino, &i)
    }

    fn unlink(&mut self, parent: u64, name: &str, ino: u64) -> OpResult {
        self.writable_dir(parent, name)?;
        let i = self.inode(ino)?;
        if i.kind == Kind::Dir {
            return Err(format!("inode {ino} is a directory; use rmdir"));
        }
        self.drop_entry(parent, name, ino)?;
        self.need_lease(ino)?;
        self.unname(ino, i)
    }

    fn rmdir(&mut self, parent: u64, name: &str, ino: u64) -> OpResult {
        self.writable_dir(parent, name)?;
        if ino == ROOT_INO {
            return Err("the root cannot be removed".into());
        }
        let mut i = self.inode(ino)?;
        if i.kind != Kind::Dir {
            return Err(format!("inode {ino} is not a directory"));
        }
        if i.size != 0 {
            return Err(format!("directory inode {ino} holds {} entries", i.size));
        }
        self.need_lease(ino)?;
        self.drop_entry(parent, name, ino)?;
        dir::destroy(&mut self.txn, i.root).map_err(fs)?;
        i.nlink = 0;
        self.release(ino, i)
    }

    /// Refuses to move directory `ino` below itself.
    fn no_cycle(&mut self, ino: u64, to_parent: u64) -> OpResult {
        let mut x = to_parent;
        for _ in 0..self.sb().inode_count {
            if x == ino {
                return Err(format!("directory inode {ino} cannot move below itself"));
            }
            if x == ROOT_INO {
                return Ok(());
            }
            x = self.inode(x)?.parent;
        }
        Err(format!("parent chain of inode {to_parent} loops"))
    }

    /// The name `to_name` of `to_parent` before a rename onto it: free (`replace` 0) or
    /// naming file `replace`, which then loses it.
    fn clear_target(&mut self, to_parent: u64, to_name: &str, ino: u64, replace: u64) -> OpResult {
        let d = self.inode(to_parent)?;
        let existing = dir::lookup(&mut self.txn, d.root, to_name).map_err(fs)?;
        match (existing, replace) {
            (None, 0) => Ok(()),
            (Some(x), 0) => Err(format!(
                "name {to_name:?} already exists in directory inode {to_parent} (inode {x})"
            )),
            (None, r) => Err(format!(
                "no name {to_name:?} in directory inode {to_parent} for inode {r} to lose"
            )),
            (Some(x), r) if x != r => Err(format!("name {to_name:?} refers to inode {x}, not {r}")),
            (Some(x), _) if x == ino => Err(format!("name {to_name:?} already names inode {ino}")),
            (Some(x), _) => {
                let t = self.inode(x)?;
                let src = self.inode(ino)?;
                if t.kind == Kind::Dir || src.kind == Kind::Dir {
                    return Err(format!(
                        "inode {ino} cannot replace inode {x}: only a file replaces a file"
                    ));
                }
                self.need_lease(x)?;
                self.drop_entry(to_parent, to_name, x)?;
                self.unname(x, t)
            }
        }
    }

    fn rename(
        &mut self,
        (from_parent, from_name): (u64, &str),
        (to_parent, to_name): (u64, &str),
        ino: u64,
        replace: u64,
    ) -> OpResult {
        self.writable_dir(from_parent, from_name)?;
        self.writable_dir(to_parent, to_name)?;
        let i = self.inode(ino)?;
        if i.kind == Kind::Free {
            return Err(format!("inode {ino} is not in use"));
        }
        self.need_lease(ino)?;
        if i.kind == Kind::Dir && from_parent != to_parent {
            let (uid, gid) = self.auth.cred();
            if !access(uid, gid, i.uid, i.gid, i.mode).write {
                return Err(format!(
                    "uid {uid} may not move directory inode {ino} to another directory: it may not write it"
                ));
            }
            self.no_cycle(ino, to_parent)?;
        }
        self.clear_target(to_parent, to_name, ino, replace)?;
        self.drop_entry(from_parent, from_name, ino)?;
        let d = self.inode(to_parent)?;
        self.add_entry(to_parent, d, to_name, ino)?;
        // Read again: the target's removal may have shared its inode-table page.
        let mut i = self.inode(ino)?;
        i.parent = to_parent;
        i.bucket = dir::bucket_of(to_name) as u16;
        i.ctime = self.now;
        self.put_inode(ino, &i)
    }

    fn set_size(&mut self, ino: u64, size: u64) -> OpResult {
        let sb = self.sb();
        let mut i = self.writable_object(ino)?;
        match i.kind {
            Kind::Kv if size > sb.kv_object_pages * PAGE => {
                return Err(format!(
                    "size {size} exceeds the {}-byte KVFS object",
                    sb.kv_object_pages * PAGE
                ));
            }
            Kind::File if size < i.size => {
                let keep = size.div_ceil(PAGE);
                let freed = radix::truncate(&mut self.txn, &mut i, keep).map_err(fs)?;
                self.free_data(i.domain, &freed)?;
            }
            _ => {}
        }
        if size > radix::capacity(radix::MAX_HEIGHT).saturating_mul(PAGE) {
            return Err(format!("size {size} beyond the largest file"));
        }
        i.size = size;
        i.mtime = self.now;
        i.ctime = self.now;
        self.put_inode(ino, &i)
    }

    /// Checks that data pages `page .. page + count` of domain `d` lie in the domain,
    /// are reserved to the client and free, and marks them allocated.
    fn take_extent(&mut self, d: u16, page: u64, count: u64) -> OpResult {
        let sb = self.sb();
        if count == 0 || count > sb.domain_pages {
            return Err(format!("extent of {count} pages"));
        }
        // The extent is checked as a whole, page by page in what it reports: the first
        // page outside the domain, not reserved, or already allocated.
        if page == 0 || page.saturating_add(count) > sb.domain_pages {
            let p = if page == 0 {
                0
            } else {
                sb.domain_pages.max(page)
            };
            return Err(format!("data page {p} outside domain {d}"));
        }
        if let Some(p) = self.auth.first_unreserved(d, page, count) {
            return Err(format!(
                "data page {p} of domain {d} is not reserved to the client"
            ));
        }
        let first = sb.dbitmap_of(d as u64);
        if let Some(p) = self.txn.first_set_bit(first, page, count).map_err(fs)? {
            return Err(format!("data page {p} of domain {d} is already allocated"));
        }
        self.txn.set_bits(first, page, count, true).map_err(fs)?;
        self.out.used_pages.push((d, page, count));
        Ok(())
    }

    fn map_pages(&mut self, ino: u64, index: u64, page: u64, count: u64) -> OpResult {
        let sb = self.sb();
        let mut i = self.writable_object(ino)?;
        self.take_extent(i.domain, page, count)?;
        match i.kind {
            Kind::Kv => {
                if index != 0 || count != sb.kv_object_pages {
                    return Err(format!(
                        "a KVFS object is one extent of {} pages at index 0",
                        sb.kv_object_pages
                    ));
                }
                if i.root != 0 {
                    self.free_extent(i.domain, i.root, sb.kv_object_pages)?;
                }
                i.root = page;
            }
            _ => {
                for k in 0..count {
                    let at = index.saturating_add(k);
                    let old = radix::map(&mut self.txn, &mut i, at, page + k).map_err(fs)?;
                    if old != 0 {
                        self.free_data(i.domain, &[old])?;
                    }
                }
            }
        }
        i.mtime = self.now;
        i.ctime = self.now;
        self.put_inode(ino, &i)
    }

    /// Ends the transaction: refused if it changes more pages than one redo
    /// transaction holds, else the outcome with its (sealed, if asked) pages.
    pub(crate) fn finish(self, last: usize) -> std::result::Result<Outcome, Rejection> {
        let sb = *self.txn.sb();
        let cap = crate::redo::capacity(&sb);
        if self.txn.changed_pages() as u64 > cap {
            return Err(Rejection {
                index: last,
                op: "batch",
                why: format!(
                    "changes {} metadata pages; one transaction may change {cap}",
                    self.txn.changed_pages()
                ),
            });
        }
        let mut out = self.out;
        out.covered = self.covered;
        out.meta_cursor = self.txn.meta_cursor();
        out.freed_meta_pages = self.txn.freed_meta_pages().to_vec();
        out.changed = self.txn.changed_page_numbers();
        if self.auth.seals_changes() {
            out.changes = self.txn.into_changes();
        } else {
            (out.changes, out.clean) = self.txn.into_unsealed_parts();
        }
        Ok(out)
    }
}

/// Validates `ops` for the client `auth` describes and, if every operation is valid,
/// returns the pages to commit. Nothing in `mem` is changed. Metadata pages are searched
/// from the first pool page ([`apply_batch_from`] continues a search).
pub fn apply_batch<R: MediaRead + ?Sized>(
    mem: &mut R,
    sb: Superblock,
    auth: &dyn Authority,
    ops: &[Op],
) -> std::result::Result<Outcome, Rejection> {
    apply_batch_from(mem, sb, auth, ops, sb.pool_first)
}

/// [`apply_batch`] with the metadata page search starting at `cursor` (the
/// [`Outcome::meta_cursor`] of the previous batch: next-fit across batches).
pub fn apply_batch_from<R: MediaRead + ?Sized>(
    mem: &mut R,
    sb: Superblock,
    auth: &dyn Authority,
    ops: &[Op],
    cursor: u64,
) -> std::result::Result<Outcome, Rejection> {
    apply_all(Applier::new(mem, sb, auth, cursor), ops)
}

/// [`apply_batch_from`] over `own`, page images the caller vouches for and hands over
/// (libFS's overlay: its recorded operations not yet applied by the service), and
/// `clean`, unchanged pages it read from `mem` before and found sound. The outcome's
/// `changes` are `own` with the batch's changes made in place, unsealed, and its
/// `clean` the unchanged pages read (see [`Txn::over_own_pages`]); a rejection
/// consumes `own`, changed half-way.
///
/// `covered` holds objects an earlier check found covered by the client's leases,
/// trusted as if this batch had found them (libFS carries them from one local check
/// to the next while it has lost no lease and no operation took a name away or moved
/// one: an append then walks its file's ancestry once, not once per write); they come
/// back in the outcome's `covered` with this batch's finds added.
pub fn apply_batch_over<R: MediaRead + ?Sized>(
    mem: &mut R,
    sb: Superblock,
    auth: &dyn Authority,
    ops: &[Op],
    (cursor, own, clean, covered): (u64, Changes, Clean, FxHashSet<u64>),
) -> std::result::Result<Outcome, Rejection> {
    let txn = Txn::over_own_pages(mem, sb, cursor, own, clean);
    apply_all(Applier::over(txn, auth, covered), ops)
}

fn apply_all<R: MediaRead + ?Sized>(
    mut a: Applier<'_, '_, R>,
    ops: &[Op],
) -> std::result::Result<Outcome, Rejection> {
    for (index, op) in ops.iter().enumerate() {
        a.op(op).map_err(|why| Rejection {
            index,
            op: op.name(),
            why,
        })?;
    }
    a.finish(ops.len().saturating_sub(1))
}

/// The authority the service frees orphans under: it holds every lease, nothing else.
struct Reclaimer;

impl Authority for Reclaimer {
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

/// Frees an orphan (an unlinked object whose last opener closed it, or left over from a
/// crash). Returns what to commit (no changes if `ino` is no orphan).
pub fn reclaim_orphan<R: MediaRead + ?Sized>(
    mem: &mut R,
    sb: Superblock,
    ino: u64,
) -> Result<Outcome> {
    let mut a = Applier::new(mem, sb, &Reclaimer, sb.pool_first);
    let i = a.txn.inode(ino)?;
    if i.kind == Kind::Free || i.kind == Kind::Dir || i.nlink != 0 {
        return Ok(Outcome::default());
    }
    a.release(ino, i).map_err(FsError::Refused)?;
    a.finish(0).map_err(|r| FsError::Refused(r.to_string()))
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

/// Frees domain `d`, which must hold no object. Returns the pages to commit.
pub fn free_domain<R: MediaRead + ?Sized>(mem: &mut R, sb: Superblock, d: u16) -> Result<Changes> {
    let mut txn = Txn::new(mem, sb);
    domain::free(&mut txn, d)?;
    Ok(txn.into_changes())
}

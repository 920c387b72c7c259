//! Changing an object's attributes: chmod, chown and setting its mtime.
//!
//! A PXFS file or KVFS object lives in the permission domain of its (owner, group,
//! mode), so changing any of them moves its data to the data space of another domain
//! (the grouping `crate::domain` chose so that protection changes move files rather
//! than re-protect their pages one by one). Only the service can do that: it may be
//! the only party allowed to read the old pages and write the new ones. It picks free
//! pages in the new domain, copies the data there and makes them durable, then commits
//! this transaction, which maps the new pages in place of the old, frees the old ones
//! and moves the object between the domains' counts; a crash before the commit leaves
//! the copies in pages nobody maps.

use super::{Applier, Authority, OpResult, Outcome, Rejection, fs};
use crate::domain;
use crate::error::Result;
use crate::inode::{Inode, Kind};
use crate::layout::Superblock;
use crate::media::MediaRead;
use crate::radix;
use crate::view::PageSource;

/// A change of attributes; `None` leaves one as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttrChange {
    /// New permission bits (chmod).
    pub mode: Option<u32>,
    /// New owner (chown; only root may give a file away).
    pub uid: Option<u32>,
    /// New group (chown; the owner may pick only its own group).
    pub gid: Option<u32>,
    /// New modification time, nanoseconds since the epoch (utimes).
    pub mtime: Option<u64>,
}

/// How an object's data must move for a change of attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataMove {
    /// The domain the data lies in now.
    pub from: u16,
    /// Data pages to place in the new domain.
    pub pages: u64,
    /// Whether they must be one run of consecutive pages (a KVFS object's extent).
    pub contiguous: bool,
}

/// An accepted change of attributes.
#[derive(Debug)]
pub struct SetAttr {
    /// What to commit.
    pub outcome: Outcome,
    /// Data pages to copy before the commit: (old page in `from`, new page in `to`).
    pub copies: Vec<(u64, u64)>,
    /// The domain the data leaves (equal to `to` when nothing moves).
    pub from: u16,
    /// The domain the data goes to.
    pub to: u16,
}

/// The attributes `c` asks for, checked against the rights of the client `auth`
/// describes: who may change what follows POSIX (mode: owner or root; owner: root; group:
/// root, or the owner choosing its own group; mtime: owner or root).
fn checked_change(
    auth: &dyn Authority,
    ino: u64,
    i: &Inode,
    c: &AttrChange,
) -> std::result::Result<Inode, String> {
    let (uid, gid) = auth.cred();
    let owner = uid == 0 || uid == i.uid;
    let mut n = *i;
    if let Some(m) = c.mode {
        if !owner {
            return Err(format!("uid {uid} may not change the mode of inode {ino}"));
        }
        n.mode = m & 0o777;
    }
    if let Some(u) = c.uid.filter(|&u| u != i.uid) {
        if uid != 0 {
            return Err(format!("only root may give inode {ino} to uid {u}"));
        }
        n.uid = u;
    }
    if let Some(g) = c.gid.filter(|&g| g != i.gid) {
        if !(uid == 0 || (uid == i.uid && g == gid)) {
            return Err(format!("uid {uid} may not give inode {ino} to group {g}"));
        }
        n.gid = g;
    }
    if let Some(t) = c.mtime {
        if !owner {
            return Err(format!("uid {uid} may not set the times of inode {ino}"));
        }
        n.mtime = t;
    }
    Ok(n)
}

/// The data pages of object `i`, in file order (a KVFS object: its whole extent).
pub fn pages_to_move<S: PageSource + ?Sized>(src: &mut S, i: &Inode) -> Result<Vec<u64>> {
    let sb = *src.sb();
    match i.kind {
        Kind::Kv if i.root != 0 => Ok((i.root..i.root + sb.kv_object_pages).collect()),
        Kind::File => {
            let mut v = Vec::new();
            radix::walk(src, i, &mut |_, p| v.push(p), &mut |_| {})?;
            Ok(v)
        }
        _ => Ok(Vec::new()),
    }
}

/// Deliberately broken (feature `broken-attr-domains`, for the second-user test to
/// catch): chmod and chown change the inode and leave the data in its old domain,
/// which the old group and others may still map.
const BROKEN_LEAVE_DATA: bool = cfg!(feature = "broken-attr-domains");

/// Checks a change of attributes of `ino` without changing anything: the new
/// (owner, group, mode) the object's domain must have, and the data that must move
/// there (`None`: none, the object keeps its domain or has none).
pub fn plan<R: MediaRead + ?Sized>(
    mem: &mut R,
    sb: Superblock,
    auth: &dyn Authority,
    ino: u64,
    c: &AttrChange,
) -> std::result::Result<(Inode, Option<DataMove>), Rejection> {
    let mut a = Applier::new(mem, sb, auth, sb.pool_first);
    let r = (|| {
        let i = a.inode(ino)?;
        if i.kind == Kind::Free {
            return Err(format!("inode {ino} is not in use"));
        }
        a.need_lease(ino)?;
        let n = checked_change(auth, ino, &i, c)?;
        let moves = matches!(i.kind, Kind::File | Kind::Kv)
            && (n.uid, n.gid, n.mode) != (i.uid, i.gid, i.mode)
            && !BROKEN_LEAVE_DATA;
        let mv = if moves {
            let pages = pages_to_move(&mut a.txn, &i).map_err(fs)?.len() as u64;
            Some(DataMove {
                from: i.domain,
                pages,
                contiguous: i.kind == Kind::Kv,
            })
        } else {
            None
        };
        Ok((n, mv))
    })();
    r.map_err(|why| Rejection {
        index: 0,
        op: "set-attr",
        why,
    })
}

/// Applies a change of attributes of `ino` for the client `auth` describes. If the
/// object's data moves, `to` is its new domain (which must be the domain of its new
/// owner, group and mode) and `new_pages` the free pages of `to` chosen for it, one per
/// page [`plan`] counted (a KVFS object's: one run). Nothing in `mem` is changed.
pub fn set_attr<R: MediaRead + ?Sized>(
    mem: &mut R,
    sb: Superblock,
    auth: &dyn Authority,
    ino: u64,
    c: &AttrChange,
    to: u16,
    new_pages: &[u64],
) -> std::result::Result<SetAttr, Rejection> {
    let mut a = Applier::new(mem, sb, auth, sb.pool_first);
    let reject = |why: String| Rejection {
        index: 0,
        op: "set-attr",
        why,
    };
    let i = a.inode(ino).map_err(reject)?;
    if i.kind == Kind::Free {
        return Err(reject(format!("inode {ino} is not in use")));
    }
    a.need_lease(ino).map_err(reject)?;
    let mut n = checked_change(auth, ino, &i, c).map_err(reject)?;
    n.ctime = a.now;
    let moves = matches!(i.kind, Kind::File | Kind::Kv)
        && (n.uid, n.gid, n.mode) != (i.uid, i.gid, i.mode)
        && !BROKEN_LEAVE_DATA;
    let mut copies = Vec::new();
    if moves {
        copies = move_data(&mut a, &i, &mut n, to, new_pages).map_err(reject)?;
    }
    a.put_inode(ino, &n).map_err(reject)?;
    let outcome = a.finish(0)?;
    Ok(SetAttr {
        outcome,
        copies,
        from: i.domain,
        to: if moves { to } else { i.domain },
    })
}

/// Maps `new_pages` of domain `to` in place of the object's pages, frees the old ones,
/// and moves the object from its domain's count to `to`'s. Returns the copies to make.
fn move_data<R: MediaRead + ?Sized>(
    a: &mut Applier<'_, '_, R>,
    i: &Inode,
    n: &mut Inode,
    to: u16,
    new_pages: &[u64],
) -> std::result::Result<Vec<(u64, u64)>, String> {
    let sb = *a.txn.sb();
    let table = domain::read_table(&mut a.txn).map_err(fs)?;
    let want = domain::Domain {
        uid: n.uid,
        gid: n.gid,
        mode: n.mode,
    };
    if table.get(to as usize).copied().flatten() != Some(want) {
        return Err(format!(
            "domain {to} is not the domain of owner {}, group {}, mode {:o}",
            n.uid, n.gid, n.mode
        ));
    }
    let old = pages_to_move(&mut a.txn, i).map_err(fs)?;
    if old.len() != new_pages.len() {
        return Err(format!(
            "{} new pages for the {} data pages of the object",
            new_pages.len(),
            old.len()
        ));
    }
    let bitmap = sb.dbitmap_of(to as u64);
    for &p in new_pages {
        if p == 0 || p >= sb.domain_pages {
            return Err(format!("data page {p} outside domain {to}"));
        }
        if a.txn.first_set_bit(bitmap, p, 1).map_err(fs)?.is_some() {
            return Err(format!("data page {p} of domain {to} is already allocated"));
        }
        a.txn.set_bit(bitmap, p, true).map_err(fs)?;
    }
    match i.kind {
        Kind::Kv => {
            let first = new_pages.first().copied().unwrap_or(0);
            let run = new_pages.windows(2).all(|w| w[1] == w[0] + 1);
            if !run {
                return Err("a KVFS object's new extent is not one run of pages".into());
            }
            if i.root != 0 {
                a.free_extent(i.domain, i.root, sb.kv_object_pages)?;
            }
            n.root = first;
        }
        _ => remap_file(a, i, n, new_pages)?,
    }
    a.count_object(i.domain, -1)?;
    a.count_object(to, 1)?;
    n.domain = to;
    Ok(old.into_iter().zip(new_pages.iter().copied()).collect())
}

/// Points every mapped page of file `i` at its new page (in file order) and frees the
/// old data pages.
fn remap_file<R: MediaRead + ?Sized>(
    a: &mut Applier<'_, '_, R>,
    i: &Inode,
    n: &mut Inode,
    new_pages: &[u64],
) -> OpResult {
    let mut mapped = Vec::new();
    radix::walk(
        &mut a.txn,
        i,
        &mut |idx, p| mapped.push((idx, p)),
        &mut |_| {},
    )
    .map_err(fs)?;
    let mut freed = Vec::with_capacity(mapped.len());
    for ((idx, _), &new) in mapped.iter().zip(new_pages) {
        let old = radix::map(&mut a.txn, n, *idx, new).map_err(fs)?;
        freed.push(old);
    }
    a.free_data(i.domain, &freed)
}

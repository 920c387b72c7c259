//! PXFS: the POSIX-style interface on libFS.
//!
//! Hierarchical names, open files with offsets, and POSIX sharing: an open file is a
//! volatile *shadow object* (the inode number plus offset). libFS registers it with the
//! service lazily, when a lease covering it is given back (see [`crate::client`]), so it
//! stays readable and writable after another client unlinks or renames it, while
//! opening and closing it normally need no call into the service; the service frees an
//! unlinked file when the last opener closes it or dies.

use std::path::Path;
use std::sync::Mutex;

use crate::apply::AttrChange;
use crate::client::{Client, StateGuard};
use crate::dir;
use crate::error::{FsError, Result};
use crate::inode::{Inode, Kind, access};
use crate::journal::Op;

mod data;
mod fds;
use data::zero_gap;
use fds::{FdTable, Shadow};

/// An open file of a [`Pxfs`] mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fd(pub u32);

/// How to open a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFlags {
    /// Create the file if it does not exist.
    pub create: bool,
    /// With `create`: fail if it exists.
    pub exclusive: bool,
    /// Cut the file to length 0.
    pub truncate: bool,
    /// Every write goes to the end.
    pub append: bool,
    /// Open for writing.
    pub write: bool,
}

/// What `stat` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Inode number.
    pub ino: u64,
    /// File, directory or KVFS object.
    pub kind: Kind,
    /// Size in bytes (directories: entries).
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Names referring to it.
    pub nlink: u32,
    /// Last change of its contents, nanoseconds since the Unix epoch.
    pub mtime: u64,
    /// Last change of the inode (contents, names, attributes), nanoseconds since the
    /// Unix epoch, by the service's clock.
    pub ctime: u64,
}

/// What `stat` reports of inode `ino`, whose attributes are `i`.
fn stat_of(ino: u64, i: &Inode) -> Stat {
    Stat {
        ino,
        kind: i.kind,
        size: i.size,
        mode: i.mode,
        uid: i.uid,
        gid: i.gid,
        nlink: i.nlink,
        mtime: i.mtime,
        ctime: i.ctime,
    }
}

/// A PXFS mount.
pub struct Pxfs {
    client: Client,
    files: FdTable,
    /// Losses the mount's own [`Pxfs::sync`] has reported.
    seen: Mutex<u64>,
}

impl Pxfs {
    /// Mounts the volume served on `socket`.
    pub fn mount(socket: &Path) -> Result<Pxfs> {
        Ok(Pxfs {
            client: Client::connect(socket)?,
            files: FdTable::new(),
            seen: Mutex::new(0),
        })
    }

    /// The libFS connection underneath.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Gives up the PXFS layer, keeping the connection (open files are forgotten).
    pub fn into_client(self) -> Client {
        self.client
    }

    fn new_object(&self, path: &str, mode: u32, kind: Kind) -> Result<u64> {
        let (s, parent, name, existing) = self.client.resolve_parent_locked(path)?;
        if existing.is_some() {
            return Err(FsError::Exists(path.into()));
        }
        self.new_object_in(s, parent, name, path, mode, kind)
            .map(|(_, ino)| ino)
    }

    /// Creates `name` in directory `parent` (`path` names it in errors). The state `s`
    /// the walk to `parent` locked is kept while the lease the create needs is held, as
    /// it nearly always is: the walk and the create are then one hold of the state,
    /// which the process's other threads wait for (fileserver x50 took it three times a
    /// create, once each for the walk, the create and the new file's lease). Returns
    /// the state, still locked, with the new object's inode.
    fn new_object_in<'s>(
        &'s self,
        s: StateGuard<'s>,
        parent: u64,
        name: &str,
        path: &str,
        mode: u32,
        kind: Kind,
    ) -> Result<(StateGuard<'s>, u64)> {
        dir::check_name(name)?;
        let key = self.client.entry_key(parent, name);
        let mut s = self.client.keep_leased_widening(s, &[(key, true)])?;
        if s.lookup(parent, name)?.is_some() {
            return Err(FsError::Exists(path.into()));
        }
        let domain = if kind == Kind::Dir {
            0
        } else {
            s.domain_for(mode)?
        };
        let ino = s.take_inode()?;
        s.record(Op::Create {
            parent,
            name: name.into(),
            ino,
            kind,
            mode,
            domain,
        })?;
        Ok((s, ino))
    }

    /// Creates a directory.
    pub fn mkdir(&self, path: &str, mode: u32) -> Result<()> {
        self.new_object(path, mode, Kind::Dir).map(|_| ())
    }

    /// Creates (or truncates) a file and opens it for writing.
    pub fn create(&self, path: &str, mode: u32) -> Result<Fd> {
        self.open_mode(
            path,
            OpenFlags {
                create: true,
                truncate: true,
                write: true,
                ..Default::default()
            },
            mode,
        )
    }

    /// Opens a file (created with mode 0644 if `flags.create` and missing).
    pub fn open(&self, path: &str, flags: OpenFlags) -> Result<Fd> {
        self.open_mode(path, flags, 0o644)
    }

    fn open_mode(&self, path: &str, flags: OpenFlags, mode: u32) -> Result<Fd> {
        // A create is not tried from the caches: its name is new, so the walk there
        // would miss at its end and be paid twice.
        if !flags.create
            && let Some(fd) = self.open_cached(path, flags)
        {
            return Ok(fd);
        }
        let (s, parent, name, found) = self.client.resolve_parent_locked(path)?;
        let write = flags.write || flags.truncate;
        let (mut s, ino) = match found {
            Some(ino) if flags.create && flags.exclusive => {
                return Err(FsError::Exists(format!("{path} (inode {ino})")));
            }
            Some(ino) => (self.client.keep_leased(s, ino, write)?, ino),
            None if flags.create => {
                let (s, ino) = self.new_object_in(s, parent, name, path, mode, Kind::File)?;
                (self.client.keep_leased(s, ino, write)?, ino)
            }
            None => return Err(FsError::NotFound(path.into())),
        };
        let i = s.inode(ino)?;
        if i.kind == Kind::Dir {
            return Err(FsError::WrongKind(format!("{path} is a directory")));
        }
        let (uid, gid) = s.cred();
        let acc = access(uid, gid, i.uid, i.gid, i.mode);
        if (flags.write && !acc.write) || (!flags.write && !acc.read) {
            return Err(FsError::Denied(path.into()));
        }
        if flags.truncate && i.size != 0 {
            s.record(Op::SetSize { ino, size: 0 })?;
        }
        s.note_open(ino);
        let seen = s.losses();
        drop(s);
        Ok(self.new_fd(ino, flags, seen))
    }

    /// [`Pxfs::open`] of an existing file whose leases are held, under the state
    /// shared with the process's other threads, with its names and inode cached or,
    /// while another thread holds the state, read from the mapping (see
    /// `client::shared`); `None` leaves the open to the exclusive path, which also
    /// words any refusal.
    fn open_cached(&self, path: &str, flags: OpenFlags) -> Option<Fd> {
        let (reach, _reader) = self.client.shared_reach();
        let s = self.client.state_shared();
        let mut found = Vec::new();
        let write = flags.write || flags.truncate;
        let (ino, i) = self
            .client
            .object_within(&s, path, write, reach, &mut found)?;
        let (uid, gid) = s.cred();
        let acc = access(uid, gid, i.uid, i.gid, i.mode);
        let allowed = if flags.write { acc.write } else { acc.read };
        if i.kind == Kind::Dir || !allowed || (flags.truncate && i.size != 0) {
            return None;
        }
        s.note_open(ino);
        let seen = s.losses();
        let tick = s.cache_tick();
        drop(s);
        self.client.remember(tick, &found, None);
        Some(self.new_fd(ino, flags, seen))
    }

    /// A new descriptor of open file `ino`.
    fn new_fd(&self, ino: u64, flags: OpenFlags, seen: u64) -> Fd {
        self.files.insert(Shadow {
            ino,
            offset: 0,
            append: flags.append,
            write: flags.write,
            seen,
        })
    }

    /// Reads at the file offset, advancing it.
    pub fn read(&self, fd: Fd, buf: &mut [u8]) -> Result<usize> {
        let (ino, off) = self.files.with(fd, |s| (s.ino, s.offset))?;
        let n = self.pread_ino(ino, off, buf)?;
        self.files.with(fd, |s| s.offset = off + n as u64)?;
        Ok(n)
    }

    /// Reads at `off` without moving the offset.
    pub fn pread(&self, fd: Fd, off: u64, buf: &mut [u8]) -> Result<usize> {
        let ino = self.files.with(fd, |s| s.ino)?;
        self.pread_ino(ino, off, buf)
    }

    /// Writes at the file offset (at the end, for append), advancing it.
    pub fn write(&self, fd: Fd, data: &[u8]) -> Result<usize> {
        let (ino, off, append, w) = self
            .files
            .with(fd, |s| (s.ino, s.offset, s.append, s.write))?;
        if !w {
            return Err(FsError::BadHandle(format!(
                "fd {} is not open for writing",
                fd.0
            )));
        }
        let end = self.pwrite_ino(ino, if append { None } else { Some(off) }, data)?;
        self.files.with(fd, |s| s.offset = end)?;
        Ok(data.len())
    }

    /// Writes at `off` without moving the offset.
    pub fn pwrite(&self, fd: Fd, off: u64, data: &[u8]) -> Result<usize> {
        let (ino, w) = self.files.with(fd, |s| (s.ino, s.write))?;
        if !w {
            return Err(FsError::BadHandle(format!(
                "fd {} is not open for writing",
                fd.0
            )));
        }
        self.pwrite_ino(ino, Some(off), data)?;
        Ok(data.len())
    }

    /// Sets a file's size.
    pub fn truncate(&self, path: &str, size: u64) -> Result<()> {
        let ino = self.client.resolve(path)?;
        let mut s = self.client.leased(ino, true)?;
        let i = s.inode(ino)?;
        if size > i.size {
            zero_gap(&mut s, ino, &i, i.size, size)?;
        }
        s.record(Op::SetSize { ino, size })
    }

    /// Makes the file's metadata durable (its data is persisted as it is written).
    /// Reports, once per open file, a loss of acknowledged operations since it was
    /// opened or last reported (EIO, [`FsError::Lost`]), as the kernel reports writeback
    /// errors.
    pub fn fsync(&self, fd: Fd) -> Result<()> {
        let seen = self.files.with(fd, |s| s.seen)?;
        let r = self.client.sync();
        let (lost, now) = {
            let s = self.client.state();
            (s.lost_since(seen), s.losses())
        };
        self.files.with(fd, |s| s.seen = now)?;
        match lost {
            Some(e) => Err(e),
            None => r,
        }
    }

    /// Closes an open file; reports a loss of acknowledged operations since it was
    /// opened that no fsync of it reported (EIO, [`FsError::Lost`]).
    pub fn close(&self, fd: Fd) -> Result<()> {
        let sh = self.files.remove(fd)?;
        // Most closes only count the file's opens down: the state shared will do.
        let s = self.client.state_shared();
        if s.note_close_locally(sh.ino) {
            return s.lost_since(sh.seen).map_or(Ok(()), Err);
        }
        drop(s);
        let mut s = self.client.state();
        let r = s.note_close(sh.ino);
        match s.lost_since(sh.seen) {
            Some(e) => Err(e),
            None => r,
        }
    }

    /// The state with exclusive leases covering the entries `entries` (directory, name)
    /// and objects `objects` (an object is usually covered by the lease on its name's
    /// bucket or directory; a file with several names may lie below another one). The
    /// state `s` (locked by the walk to the entries) is kept if they are all covered,
    /// so that the walk and the change are one hold of it.
    fn leased_for<'s>(
        &'s self,
        mut s: StateGuard<'s>,
        entries: &[(u64, &str)],
        objects: &[u64],
    ) -> Result<StateGuard<'s>> {
        let mut keys: Vec<(u64, bool)> = entries
            .iter()
            .map(|&(d, name)| (self.client.entry_key(d, name), true))
            .collect();
        if s.covers_all(&keys) && objects.iter().all(|&o| s.covered(o, true)) {
            return Ok(s);
        }
        drop(s);
        keys.sort_unstable();
        keys.dedup();
        for _ in 0..2 {
            let mut s = self.client.leased_widening(&keys)?;
            let more: Vec<u64> = objects
                .iter()
                .copied()
                .filter(|&o| !s.covered(o, true))
                .collect();
            if more.is_empty() {
                return Ok(s);
            }
            drop(s);
            keys.extend(more.into_iter().map(|o| (o, true)));
        }
        self.client.leased_widening(&keys)
    }

    /// Removes a file's name.
    pub fn unlink(&self, path: &str) -> Result<()> {
        let (s, parent, name, ino) = self.client.resolve_parent_locked(path)?;
        let ino = ino.ok_or_else(|| FsError::NotFound(path.into()))?;
        let mut s = self.leased_for(s, &[(parent, name)], &[ino])?;
        if s.inode(ino)?.kind == Kind::Dir {
            return Err(FsError::WrongKind(format!("{path} is a directory")));
        }
        s.record(Op::Unlink {
            parent,
            name: name.into(),
            ino,
        })
    }

    /// Removes an empty directory.
    pub fn rmdir(&self, path: &str) -> Result<()> {
        let (s, parent, name, ino) = self.client.resolve_parent_locked(path)?;
        let ino = ino.ok_or_else(|| FsError::NotFound(path.into()))?;
        let mut s = self.leased_for(s, &[(parent, name)], &[ino])?;
        let i = s.inode(ino)?;
        if i.kind != Kind::Dir {
            return Err(FsError::WrongKind(format!("{path} is not a directory")));
        }
        if i.size != 0 {
            return Err(FsError::NotEmpty(path.into()));
        }
        s.record(Op::Rmdir {
            parent,
            name: name.into(),
            ino,
        })
    }

    /// Moves `from` to `to`, replacing a file at `to` in the same step (POSIX rename:
    /// `to` names the old file or the new one at every moment, never neither).
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (fp, fname, ino) = self.client.resolve_parent(from)?;
        let ino = ino.ok_or_else(|| FsError::NotFound(from.into()))?;
        let (tp, tname, existing) = self.client.resolve_parent(to)?;
        dir::check_name(tname)?;
        let replace = existing.filter(|&o| o != ino);
        if existing == Some(ino) {
            // Two names of one object: POSIX says rename does nothing.
            return Ok(());
        }
        let objects: Vec<u64> = std::iter::once(ino).chain(replace).collect();
        let mut s = self.leased_for(self.client.state(), &[(fp, fname), (tp, tname)], &objects)?;
        // Looked up again under the leases: the target may have changed meanwhile.
        let replace = s.lookup(tp, tname)?.filter(|&o| o != ino);
        if let Some(old) = replace
            && s.inode(old)?.kind == Kind::Dir
        {
            return Err(FsError::Exists(to.into()));
        }
        #[cfg(feature = "broken-rename-over")]
        if let Some(old) = replace {
            // Deliberately broken (for the crash test to catch): the target's removal
            // and the move as two records, which two batches may carry.
            s.record(Op::Unlink {
                parent: tp,
                name: tname.into(),
                ino: old,
            })?;
            return s.record(Op::Rename {
                from_parent: fp,
                from_name: fname.into(),
                to_parent: tp,
                to_name: tname.into(),
                ino,
                replace: 0,
            });
        }
        s.record(Op::Rename {
            from_parent: fp,
            from_name: fname.into(),
            to_parent: tp,
            to_name: tname.into(),
            ino,
            replace: replace.unwrap_or(0),
        })
    }

    /// Adds the name `new` for the file `existing` (a hard link). Only the file's
    /// owner, or a user who may read and write it, may name it elsewhere.
    pub fn link(&self, existing: &str, new: &str) -> Result<()> {
        let ino = self.client.resolve(existing)?;
        let (s, parent, name, found) = self.client.resolve_parent_locked(new)?;
        dir::check_name(name)?;
        if found.is_some() {
            return Err(FsError::Exists(new.into()));
        }
        let mut s = self.leased_for(s, &[(parent, name)], &[ino])?;
        if s.inode(ino)?.kind != Kind::File {
            return Err(FsError::WrongKind(format!("{existing} is not a file")));
        }
        s.record(Op::Link {
            parent,
            name: name.into(),
            ino,
        })
    }

    /// Changes the permission bits of `path` (its owner or root only). A file's data
    /// moves to the domain of its new mode.
    pub fn chmod(&self, path: &str, mode: u32) -> Result<()> {
        self.set_attr(
            path,
            AttrChange {
                mode: Some(mode & 0o777),
                ..Default::default()
            },
        )
    }

    /// Changes the owner and group of `path` (`None` leaves one as it is): only root
    /// gives a file to another user; its owner may give it to its own group. A file's
    /// data moves to the domain of its new owner and group.
    pub fn chown(&self, path: &str, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.set_attr(
            path,
            AttrChange {
                uid,
                gid,
                ..Default::default()
            },
        )
    }

    /// Sets the modification time of `path`, in nanoseconds since the Unix epoch (its
    /// owner or root only).
    pub fn set_mtime(&self, path: &str, mtime: u64) -> Result<()> {
        self.set_attr(
            path,
            AttrChange {
                mtime: Some(mtime),
                ..Default::default()
            },
        )
    }

    fn set_attr(&self, path: &str, change: AttrChange) -> Result<()> {
        let ino = self.client.resolve(path)?;
        let mut s = self.client.leased(ino, true)?;
        s.set_attr(ino, change)
    }

    /// The names in a directory, sorted (read permission on it needed).
    pub fn readdir(&self, path: &str) -> Result<Vec<String>> {
        let ino = self.client.resolve(path)?;
        let mut s = self.client.leased(ino, false)?;
        let d = s.inode(ino)?;
        if d.kind != Kind::Dir {
            return Err(FsError::WrongKind(format!("{path} is not a directory")));
        }
        let (uid, gid) = s.cred();
        if !access(uid, gid, d.uid, d.gid, d.mode).read {
            return Err(FsError::Denied(format!("{path}: may not list it")));
        }
        let (mut names, _) = s.with_view(|v| dir::entries(v, d.root))?;
        names.sort();
        Ok(names.into_iter().map(|(n, _)| n).collect())
    }

    /// Attributes of a path.
    pub fn stat(&self, path: &str) -> Result<Stat> {
        if let Some(st) = self.stat_cached(path) {
            return Ok(st);
        }
        let ino = self.client.resolve(path)?;
        self.stat_ino(ino)
    }

    /// [`Pxfs::stat`] from the caches under the shared state (see `client::shared`),
    /// beside the process's other cached reads: `None` if a lease, name or inode on the
    /// way is not known, and the state is then taken alone as before.
    fn stat_cached(&self, path: &str) -> Option<Stat> {
        let (reach, _reader) = self.client.shared_reach();
        let s = self.client.state_shared();
        let mut found = Vec::new();
        let (ino, i) = self
            .client
            .object_within(&s, path, false, reach, &mut found)?;
        let tick = s.cache_tick();
        drop(s);
        self.client.remember(tick, &found, None);
        Some(stat_of(ino, &i))
    }

    /// Attributes of an open file.
    pub fn fstat(&self, fd: Fd) -> Result<Stat> {
        let ino = self.files.with(fd, |s| s.ino)?;
        self.stat_ino(ino)
    }

    fn stat_ino(&self, ino: u64) -> Result<Stat> {
        let mut s = self.client.leased(ino, false)?;
        Ok(stat_of(ino, &s.inode(ino)?))
    }

    /// Ships every pending metadata operation; reports, once, a loss of acknowledged
    /// operations since the last sync (EIO, [`FsError::Lost`]).
    pub fn sync(&self) -> Result<()> {
        let r = self.client.sync();
        let s = self.client.state();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let lost = s.lost_since(*seen);
        *seen = s.losses();
        match lost {
            Some(e) => Err(e),
            None => r,
        }
    }
}

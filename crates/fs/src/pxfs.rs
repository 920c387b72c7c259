//! PXFS: the POSIX-style interface on libFS.
//!
//! Hierarchical names, open files with offsets, and POSIX sharing: an open file is a
//! volatile *shadow object* (the inode number plus offset). libFS registers it with the
//! service lazily, when a lease covering it is given back (see [`crate::client`]), so it
//! stays readable and writable after another client unlinks or renames it, while
//! opening and closing it normally need no call into the service; the service frees an
//! unlinked file when the last opener closes it or dies.

use rustc_hash::FxHashMap;
use std::path::Path;
use std::sync::Mutex;

use crate::client::{Client, State};
use crate::dir;
use crate::error::{FsError, Result};
use crate::inode::{Inode, Kind, access};
use crate::journal::Op;
use crate::map::Map;
use crate::media::PAGE;

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
}

struct Shadow {
    ino: u64,
    offset: u64,
    append: bool,
    write: bool,
}

/// A PXFS mount.
pub struct Pxfs {
    client: Client,
    files: Mutex<FxHashMap<u32, Shadow>>,
    next_fd: Mutex<u32>,
}

impl Pxfs {
    /// Mounts the volume served on `socket`.
    pub fn mount(socket: &Path) -> Result<Pxfs> {
        Ok(Pxfs {
            client: Client::connect(socket)?,
            files: Mutex::new(FxHashMap::default()),
            next_fd: Mutex::new(3),
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
        let (parent, name, existing) = self.client.resolve_parent(path)?;
        if existing.is_some() {
            return Err(FsError::Exists(path.into()));
        }
        self.new_object_in(parent, name, path, mode, kind)
    }

    /// Creates `name` in directory `parent` (`path` names it in errors).
    fn new_object_in(
        &self,
        parent: u64,
        name: &str,
        path: &str,
        mode: u32,
        kind: Kind,
    ) -> Result<u64> {
        dir::check_name(name)?;
        let mut s = self.client.leased(parent, true)?;
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
        Ok(ino)
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
        let (parent, name, found) = self.client.resolve_parent(path)?;
        let ino = match found {
            Some(ino) if flags.create && flags.exclusive => {
                return Err(FsError::Exists(format!("{path} (inode {ino})")));
            }
            Some(ino) => ino,
            None if flags.create => self.new_object_in(parent, name, path, mode, Kind::File)?,
            None => return Err(FsError::NotFound(path.into())),
        };
        let mut s = self.client.leased(ino, flags.write || flags.truncate)?;
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
        drop(s);
        let mut n = self.next_fd.lock().unwrap();
        let fd = *n;
        *n += 1;
        self.files.lock().unwrap().insert(
            fd,
            Shadow {
                ino,
                offset: 0,
                append: flags.append,
                write: flags.write,
            },
        );
        Ok(Fd(fd))
    }

    fn shadow<T>(&self, fd: Fd, f: impl FnOnce(&mut Shadow) -> T) -> Result<T> {
        let mut files = self.files.lock().unwrap();
        let sh = files
            .get_mut(&fd.0)
            .ok_or_else(|| FsError::BadHandle(format!("fd {} is not open", fd.0)))?;
        Ok(f(sh))
    }

    /// Reads at the file offset, advancing it.
    pub fn read(&self, fd: Fd, buf: &mut [u8]) -> Result<usize> {
        let (ino, off) = self.shadow(fd, |s| (s.ino, s.offset))?;
        let n = self.pread_ino(ino, off, buf)?;
        self.shadow(fd, |s| s.offset = off + n as u64)?;
        Ok(n)
    }

    /// Reads at `off` without moving the offset.
    pub fn pread(&self, fd: Fd, off: u64, buf: &mut [u8]) -> Result<usize> {
        let ino = self.shadow(fd, |s| s.ino)?;
        self.pread_ino(ino, off, buf)
    }

    fn pread_ino(&self, ino: u64, off: u64, buf: &mut [u8]) -> Result<usize> {
        let mut s = self.client.leased(ino, false)?;
        let i = s.inode(ino)?;
        if off >= i.size {
            return Ok(0);
        }
        let n = buf.len().min((i.size - off) as usize);
        let mut done = 0;
        while done < n {
            let pos = off + done as u64;
            let idx = pos / PAGE;
            let inpg = (pos % PAGE) as usize;
            let k = (PAGE as usize - inpg).min(n - done);
            let p = s.page_of(ino, &i, idx)?;
            if p == 0 {
                buf[done..done + k].fill(0);
            } else {
                s.data(i.domain)?
                    .read_at(p * PAGE + inpg as u64, &mut buf[done..done + k])?;
            }
            done += k;
        }
        Ok(n)
    }

    /// Writes at the file offset (at the end, for append), advancing it.
    pub fn write(&self, fd: Fd, data: &[u8]) -> Result<usize> {
        let (ino, off, append, w) = self.shadow(fd, |s| (s.ino, s.offset, s.append, s.write))?;
        if !w {
            return Err(FsError::BadHandle(format!(
                "fd {} is not open for writing",
                fd.0
            )));
        }
        let end = self.pwrite_ino(ino, if append { None } else { Some(off) }, data)?;
        self.shadow(fd, |s| s.offset = end)?;
        Ok(data.len())
    }

    /// Writes at `off` without moving the offset.
    pub fn pwrite(&self, fd: Fd, off: u64, data: &[u8]) -> Result<usize> {
        let (ino, w) = self.shadow(fd, |s| (s.ino, s.write))?;
        if !w {
            return Err(FsError::BadHandle(format!(
                "fd {} is not open for writing",
                fd.0
            )));
        }
        self.pwrite_ino(ino, Some(off), data)?;
        Ok(data.len())
    }

    /// Writes data pages directly into the mapped domain; only new pages and a new size
    /// go through the journal. Returns the offset after the write.
    fn pwrite_ino(&self, ino: u64, off: Option<u64>, data: &[u8]) -> Result<u64> {
        let mut s = self.client.leased(ino, true)?;
        let mut i = s.inode(ino)?;
        let off = off.unwrap_or(i.size);
        let old_size = i.size;
        if off > old_size {
            zero_gap(&mut s, ino, &i, old_size, off)?;
        }
        let mut done = 0;
        while done < data.len() {
            let pos = off + done as u64;
            let idx = pos / PAGE;
            let inpg = (pos % PAGE) as usize;
            let k = (PAGE as usize - inpg).min(data.len() - done);
            let mut p = s.page_of(ino, &i, idx)?;
            if p == 0 {
                p = s.take_page(i.domain)?;
                let map = Op::MapPages {
                    ino,
                    index: idx,
                    page: p,
                    count: 1,
                };
                // The new size goes with the page that holds it: one local check.
                let end = pos + k as u64;
                if end > i.size && done + k == data.len() {
                    s.record_all(vec![map, Op::SetSize { ino, size: end }])?;
                    // The last page of the write: no tree lookup follows, so the
                    // changed inode need not be read back (and checked) for its size.
                    i.size = end;
                } else {
                    s.record(map)?;
                    i = s.inode(ino)?;
                }
                // A fresh page comes as the service found it (see `zero_gap`): what
                // this write leaves of it below the end of file is a hole.
                let m = writable_data(&mut s, ino, i.domain)?;
                let zeros = [0u8; PAGE as usize];
                if inpg > 0 {
                    m.write_at(p * PAGE, &zeros[..inpg])?;
                    m.persist_range(p * PAGE, inpg as u64);
                }
                let written_end = idx * PAGE + (inpg + k) as u64;
                if written_end < old_size && inpg + k < PAGE as usize {
                    let tail = p * PAGE + (inpg + k) as u64;
                    m.write_at(tail, &zeros[inpg + k..])?;
                    m.persist_range(tail, PAGE - (inpg + k) as u64);
                }
            }
            let m = writable_data(&mut s, ino, i.domain)?;
            m.write_at(p * PAGE + inpg as u64, &data[done..done + k])?;
            m.persist_range(p * PAGE + inpg as u64, k as u64);
            done += k;
        }
        let end = off + data.len() as u64;
        if end > i.size {
            s.record(Op::SetSize { ino, size: end })?;
        }
        Ok(end)
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
    pub fn fsync(&self, fd: Fd) -> Result<()> {
        self.shadow(fd, |_| ())?;
        self.client.sync()
    }

    /// Closes an open file.
    pub fn close(&self, fd: Fd) -> Result<()> {
        let sh = self
            .files
            .lock()
            .unwrap()
            .remove(&fd.0)
            .ok_or_else(|| FsError::BadHandle(format!("fd {} is not open", fd.0)))?;
        self.client.state().note_close(sh.ino)
    }

    /// Removes a file's name.
    pub fn unlink(&self, path: &str) -> Result<()> {
        let (parent, name, ino) = self.client.resolve_parent(path)?;
        let ino = ino.ok_or_else(|| FsError::NotFound(path.into()))?;
        let mut s = self.client.leased(parent, true)?;
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
        let (parent, name, ino) = self.client.resolve_parent(path)?;
        let ino = ino.ok_or_else(|| FsError::NotFound(path.into()))?;
        let mut s = self.client.leased(parent, true)?;
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

    /// Moves `from` to `to`, replacing a file at `to`.
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (fp, fname, ino) = self.client.resolve_parent(from)?;
        let ino = ino.ok_or_else(|| FsError::NotFound(from.into()))?;
        let (tp, tname, existing) = self.client.resolve_parent(to)?;
        dir::check_name(tname)?;
        // One lease must cover both directories at once: take it on their nearest common
        // ancestor (taking two leases one after the other can livelock against clients
        // working in either directory).
        let common = {
            let mut s = self.client.state();
            let up_f = s.with_view(|v| Ok(crate::lease::ancestry(v, fp)))?;
            let up_t = s.with_view(|v| Ok(crate::lease::ancestry(v, tp)))?;
            up_f.iter()
                .copied()
                .find(|x| up_t.contains(x))
                .unwrap_or(crate::layout::ROOT_INO)
        };
        let mut s = self.client.leased(common, true)?;
        if let Some(old) = existing.filter(|&o| o != ino) {
            match s.inode(old)?.kind {
                Kind::Dir => return Err(FsError::Exists(to.into())),
                _ => s.record(Op::Unlink {
                    parent: tp,
                    name: tname.into(),
                    ino: old,
                })?,
            }
        }
        s.record(Op::Rename {
            from_parent: fp,
            from_name: fname.into(),
            to_parent: tp,
            to_name: tname.into(),
            ino,
        })
    }

    /// The names in a directory, sorted.
    pub fn readdir(&self, path: &str) -> Result<Vec<String>> {
        let ino = self.client.resolve(path)?;
        let mut s = self.client.leased(ino, false)?;
        let d = s.inode(ino)?;
        if d.kind != Kind::Dir {
            return Err(FsError::WrongKind(format!("{path} is not a directory")));
        }
        let (mut names, _) = s.with_view(|v| dir::entries(v, d.root))?;
        names.sort();
        Ok(names.into_iter().map(|(n, _)| n).collect())
    }

    /// Attributes of a path.
    pub fn stat(&self, path: &str) -> Result<Stat> {
        let ino = self.client.resolve(path)?;
        self.stat_ino(ino)
    }

    /// Attributes of an open file.
    pub fn fstat(&self, fd: Fd) -> Result<Stat> {
        let ino = self.shadow(fd, |s| s.ino)?;
        self.stat_ino(ino)
    }

    fn stat_ino(&self, ino: u64) -> Result<Stat> {
        let mut s = self.client.leased(ino, false)?;
        let i = s.inode(ino)?;
        Ok(Stat {
            ino,
            kind: i.kind,
            size: i.size,
            mode: i.mode,
            uid: i.uid,
            gid: i.gid,
            nlink: i.nlink,
        })
    }

    /// Ships every pending metadata operation.
    pub fn sync(&self) -> Result<()> {
        self.client.sync()
    }
}

/// Domain `d`'s data space, which must be mapped writable for `ino` to be written.
fn writable_data(s: &mut State, ino: u64, d: u16) -> Result<&mut Map> {
    let m = s.data(d)?;
    if !m.writable() {
        return Err(FsError::Denied(format!(
            "inode {ino}: its domain is mapped read-only"
        )));
    }
    Ok(m)
}

/// Zeroes the bytes `[from, to)` of file `ino` (inode `i`, whose size is `from`) that
/// lie in pages it already maps, before the file grows over them.
///
/// The service hands out data pages without zeroing them (only clients that can read
/// the whole domain may reserve its pages; see the service's reservation), so a byte
/// past the end of file may hold old data of the domain. POSIX wants the bytes a file
/// gains by growing without being written to read as zeros; libFS gives them that here,
/// lazily, instead of zeroing every page up front. Only the page holding the end of a
/// PXFS file can be mapped past it (shrinking frees the pages wholly past the new end);
/// a KVFS object maps its whole extent.
fn zero_gap(s: &mut State, ino: u64, i: &Inode, from: u64, to: u64) -> Result<()> {
    let first = from / PAGE;
    let last = match i.kind {
        Kind::Kv => ((to - 1) / PAGE).min(s.sb().kv_object_pages.saturating_sub(1)),
        _ if from.is_multiple_of(PAGE) => return Ok(()),
        _ => first,
    };
    let zeros = [0u8; PAGE as usize];
    for idx in first..=last {
        let p = s.page_of(ino, i, idx)?;
        if p == 0 {
            continue;
        }
        let lo = from.max(idx * PAGE);
        let hi = to.min((idx + 1) * PAGE);
        if lo >= hi {
            continue;
        }
        let at = p * PAGE + lo % PAGE;
        let m = writable_data(s, ino, i.domain)?;
        m.write_at(at, &zeros[..(hi - lo) as usize])?;
        m.persist_range(at, hi - lo);
    }
    Ok(())
}

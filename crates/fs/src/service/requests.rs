//! The service's answer to each request.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;

use super::State;
use super::auth::{Auth, Trusted};
use crate::apply::{AttrChange, apply_batch_from, domain_for, free_domain};
use crate::domain::Domain;
use crate::error::{FsError, Result};
use crate::inode::{Kind, access};
use crate::journal::decode_batch;
use crate::lease::ancestry;
use crate::map::SPACE_HEADER_BYTES;
use crate::media::PAGE;
use crate::mkfs::now_ns;
use crate::proto::{DataAccess, ErrKind, Reply, Request, decode_request};
use crate::volume;

/// A reply and the descriptors that go with it.
type Answer = (Reply, Vec<OwnedFd>);

fn err_reply(e: FsError) -> Reply {
    let kind = match e {
        FsError::Denied(_) => ErrKind::Denied,
        FsError::NoSpace(_) => ErrKind::NoSpace,
        FsError::NotFound(_) => ErrKind::NotFound,
        _ => ErrKind::Refused,
    };
    let msg = match e {
        FsError::Refused(m) => m,
        other => other.to_string(),
    };
    Reply::Err(kind, msg)
}

impl State {
    /// Handles one request frame of client `id`; `Err` if the frame breaks the
    /// protocol (the client is then dropped).
    pub(super) fn handle(&mut self, id: u64, body: &[u8]) -> std::result::Result<(), ()> {
        let (rid, req, attach) = decode_request(body).map_err(|_| ())?;
        let result = match req {
            Request::Acquire { key, exclusive } => match self.lease_allowed(id, key, exclusive) {
                Ok(()) => {
                    self.enqueue(id, rid, key, exclusive);
                    self.serve_waiters();
                    return Ok(());
                }
                Err(e) => Err(e),
            },
            Request::TryAcquire { key, exclusive } => self
                .lease_allowed(id, key, exclusive)
                .map(|()| (self.try_grant(id, key, exclusive), Vec::new())),
            Request::Ship => self.ship(id, attach).map(|r| (r, Vec::new())),
            Request::Release { key, grant } => {
                let r = self.ship(id, attach);
                self.leases.release(id, key, grant);
                r.map(|_| (Reply::Ok, Vec::new()))
            }
            Request::Reserve {
                inodes,
                domain,
                pages,
                extent,
            } => self
                .reserve(id, inodes, domain, pages, extent)
                .map(|r| (r, Vec::new())),
            Request::Domain { uid, gid, mode } => {
                self.domain_request(id, Domain { uid, gid, mode })
            }
            Request::MapDomain { domain } => self.map_domain(id, domain),
            Request::Opened { inos } => self.opened(id, &inos).map(|_| (Reply::Ok, Vec::new())),
            Request::Close { ino } => {
                let c = self.clients.get_mut(&id).expect("connected");
                if c.opens.remove(&ino) {
                    self.unpin(ino);
                    self.maybe_reclaim(ino);
                }
                Ok((Reply::Ok, Vec::new()))
            }
            Request::SetAttr { ino, change } => self
                .set_attr(id, ino, &change)
                .map(|_| (Reply::Ok, Vec::new())),
            Request::WriteData { domain, offset } => self
                .write_data(id, domain, offset, attach)
                .map(|_| (Reply::Ok, Vec::new())),
        };
        if let Some(c) = self.clients.get_mut(&id) {
            match result {
                Ok((r, fds)) => c.send(rid, &r, fds),
                Err(e) => c.send(rid, &err_reply(e), Vec::new()),
            }
        }
        self.flush_client(id);
        self.serve_waiters();
        Ok(())
    }

    /// Validates and commits a shipped batch of client `id`.
    fn ship(&mut self, id: u64, bin: &[u8]) -> Result<Reply> {
        if bin.is_empty() {
            return Ok(Reply::Shipped {
                written: Vec::new(),
            });
        }
        let commits_before = self.commits;
        let ops =
            decode_batch(bin).map_err(|e| FsError::Refused(format!("malformed journal: {e}")))?;
        let c = self.clients.get(&id).expect("connected");
        let auth = Auth {
            client: id,
            c,
            leases: &self.leases,
            open_count: &self.open_count,
            now: now_ns(),
        };
        let mut meta = Trusted::new(&mut self.meta);
        let out = apply_batch_from(&mut meta, self.sb, &auth, &ops, self.meta_cursor)
            .map_err(|r| FsError::Refused(format!("batch rejected: {r}")))?;
        self.commit(&out.changes)?;
        self.meta_cursor = out.meta_cursor;
        if ops
            .iter()
            .any(|op| matches!(op, crate::journal::Op::Rename { .. }))
        {
            self.rechain();
        }
        let c = self.clients.get_mut(&id).expect("connected");
        for i in &out.used_inodes {
            c.inodes.remove(i);
            self.reserved_inodes.remove(i);
        }
        for &(d, first, count) in &out.used_pages {
            if let Some(pool) = c.pages.get_mut(&d) {
                pool.remove_range(first, first + count);
            }
            for p in first..first + count {
                self.reserved_pages.remove(d, p);
            }
        }
        self.after_commit(&out);
        if self.commits != commits_before + 1 {
            // Bookkeeping committed more (an emptied domain freed): not listed.
            return Ok(Reply::Ok);
        }
        Ok(Reply::Shipped {
            written: written_pages(&out.changes),
        })
    }

    /// The domain `dom` for client `id`, created if new; its data space attached as the
    /// client's rights allow.
    fn domain_request(&mut self, id: u64, dom: Domain) -> Result<Answer> {
        let uid = self.clients[&id].uid;
        if uid != 0 && dom.uid != uid {
            return Err(FsError::Denied(format!(
                "uid {uid} may not ask for a domain of uid {}",
                dom.uid
            )));
        }
        let dom = Domain {
            mode: dom.mode & 0o777,
            ..dom
        };
        let table = self.domain_table()?;
        let d = match table.iter().position(|e| *e == Some(dom)) {
            Some(d) => d as u16,
            None => self.add_domain(dom)?,
        };
        self.domain_fd(id, d, dom)
    }

    /// Adds domain `dom` to the table (with a fresh data space), within the bound on
    /// empty domains of one user; unused domains are freed first if that makes room.
    pub(super) fn add_domain(&mut self, dom: Domain) -> Result<u16> {
        let empty_of = |st: &mut State| -> Result<(usize, bool)> {
            let t = st.domain_table()?;
            let empty = t
                .iter()
                .enumerate()
                .filter(|(d, e)| {
                    e.is_some_and(|e| e.uid == dom.uid) && st.objects_in(*d as u16) == 0
                })
                .count();
            Ok((empty, t.iter().all(|x| x.is_some())))
        };
        let (mut empty, mut full) = empty_of(self)?;
        if empty >= self.limits.empty_domains || full {
            self.free_unused_domains();
            (empty, full) = empty_of(self)?;
        }
        if empty >= self.limits.empty_domains {
            return Err(FsError::NoSpace(format!(
                "client limit: uid {} already has {empty} permission domains without files \
                 (at most {}); create files in them first",
                dom.uid, self.limits.empty_domains
            )));
        }
        if full {
            return Err(FsError::NoSpace(format!(
                "all {} permission domains hold files",
                self.sb.max_domains
            )));
        }
        let (d, added, ch) = domain_for(&mut Trusted::new(&mut self.meta), self.sb, dom)?;
        if added {
            // A fresh file, never the old one: a process that held the old domain's
            // data space mapped must not reach the new domain's data through it.
            self.data.remove(&d);
            volume::create_data(&self.dir, &self.sb, d)?;
        }
        self.commit(&ch)?;
        Ok(d)
    }

    /// Frees every domain that holds no object and that no connected client holds.
    pub(super) fn free_unused_domains(&mut self) {
        let Ok(table) = self.domain_table() else {
            return;
        };
        for (d, e) in table.iter().enumerate() {
            if e.is_some() && self.objects_in(d as u16) == 0 {
                self.maybe_free_domain(d as u16);
            }
        }
    }

    /// Frees domain `d` if it holds no object and no connected client holds it.
    pub(super) fn maybe_free_domain(&mut self, d: u16) {
        if self.clients.values().any(|c| c.domains.contains(&d)) {
            return;
        }
        let in_use = self
            .domain_table()
            .ok()
            .and_then(|t| t.get(d as usize).copied().flatten())
            .is_some();
        if !in_use || self.objects_in(d) != 0 {
            return;
        }
        let Ok(ch) = free_domain(&mut Trusted::new(&mut self.meta), self.sb, d) else {
            return;
        };
        if self.commit(&ch).is_ok() {
            self.data.remove(&d);
            self.domain_objects.remove(&d);
            let _ = std::fs::remove_file(volume::data_path(&self.dir, d));
        }
    }

    /// An existing domain's data space for client `id`.
    fn map_domain(&mut self, id: u64, d: u16) -> Result<Answer> {
        let table = self.domain_table()?;
        let dom = table
            .get(d as usize)
            .copied()
            .flatten()
            .ok_or(FsError::NotFound(format!("domain {d}")))?;
        self.domain_fd(id, d, dom)
    }

    /// Domain `d`'s data space as client `id` may reach it: a read-only or read-write
    /// descriptor, or none for a client that may only write it (a writable mapping
    /// is a readable one too: memory has no write-only protection, the mismatch the
    /// paper names as an open problem, so such a client writes through the service).
    fn domain_fd(&mut self, id: u64, d: u16, dom: Domain) -> Result<Answer> {
        let c = &self.clients[&id];
        let acc = access(c.uid, c.gid, dom.uid, dom.gid, dom.mode);
        if !acc.read && !acc.write {
            return Err(FsError::Denied(format!(
                "uid {} may not access domain {d}",
                c.uid
            )));
        }
        // Opened by the service too, so that it notices a client cutting the file short.
        self.data_file(d)?;
        self.clients
            .get_mut(&id)
            .expect("connected")
            .domains
            .insert(d);
        if !acc.read {
            let r = Reply::Domain {
                domain: d,
                access: DataAccess::WriteOnly,
            };
            return Ok((r, Vec::new()));
        }
        let f = volume::open_data_for(&self.dir, d, acc.write)?;
        let access = if acc.write {
            DataAccess::ReadWrite
        } else {
            DataAccess::Read
        };
        Ok((Reply::Domain { domain: d, access }, vec![OwnedFd::from(f)]))
    }

    /// The service's own descriptor of domain `d`'s data space.
    fn data_file(&mut self, d: u16) -> Result<&File> {
        if !self.data.contains_key(&d) {
            let f = volume::open_data(&self.dir, &self.sb, d, false)?;
            self.data.insert(d, f);
        }
        Ok(&self.data[&d])
    }

    /// Restores the size of any data space a client cut or grew through its read-write
    /// descriptor (no mapping's reader is then left facing a SIGBUS for long; what was
    /// cut off reads as zeros, which only a client that may write every file of the
    /// domain could do to them anyway).
    pub(super) fn check_data_sizes(&mut self) {
        let want = volume::space_file_len(self.sb.domain_pages);
        for (d, f) in &self.data {
            let len = f.metadata().map(|m| m.len()).unwrap_or(want);
            if len != want {
                eprintln!(
                    "pmlab fs: data space of domain {d} is {len} bytes, not {want}: a client changed its size; restoring it"
                );
                let _ = f.set_len(want);
            }
        }
    }

    /// Registers objects client `id` holds open, so an unlinked one is kept until it
    /// closes them. Only an object the client could have opened is accepted: one it
    /// is creating in a batch not yet applied (its inode is reserved to it), or one a
    /// lease of the client covers and that it may read or write. Otherwise any client
    /// could pin any file, keeping it (and its pages) alive after its owner deletes it.
    fn opened(&mut self, id: u64, inos: &[u64]) -> Result<()> {
        let (uid, gid, held) = {
            let c = &self.clients[&id];
            (c.uid, c.gid, c.opens.len())
        };
        let fresh: Vec<u64> = {
            let c = &self.clients[&id];
            inos.iter()
                .copied()
                .filter(|i| !c.opens.contains(i))
                .collect()
        };
        if held + fresh.len() > self.limits.opens {
            return Err(FsError::NoSpace(format!(
                "client limit: {} open files registered (at most {})",
                held + fresh.len(),
                self.limits.opens
            )));
        }
        for &ino in &fresh {
            if self.clients[&id].inodes.contains(&ino) {
                continue;
            }
            if ino == 0 || ino >= self.sb.inode_count {
                return Err(FsError::NotFound(format!("inode {ino}")));
            }
            let i = self.inode(ino)?;
            let a = access(uid, gid, i.uid, i.gid, i.mode);
            let sb = self.sb;
            let _ = sb;
            let up = self.with_view(|v| ancestry(v, ino));
            let covered = up.iter().any(|&k| self.leases.holds(id, k, false));
            if i.kind == Kind::Free || !covered || !(a.read || a.write) {
                return Err(FsError::Denied(format!(
                    "uid {uid} may not register inode {ino} as open: it holds no lease covering it or may not open it"
                )));
            }
        }
        let c = self.clients.get_mut(&id).expect("connected");
        for ino in fresh {
            if c.opens.insert(ino) {
                *self.open_count.entry(ino).or_insert(0) += 1;
            }
        }
        Ok(())
    }

    /// Changes an object's attributes for client `id`, moving its data to the domain of
    /// its new owner, group and mode (see [`crate::apply::set_attr`]).
    fn set_attr(&mut self, id: u64, ino: u64, change: &AttrChange) -> Result<()> {
        let now = now_ns();
        let (n, mv) = {
            let c = &self.clients[&id];
            let auth = Auth {
                client: id,
                c,
                leases: &self.leases,
                open_count: &self.open_count,
                now,
            };
            crate::apply::plan_attr(
                &mut Trusted::new(&mut self.meta),
                self.sb,
                &auth,
                ino,
                change,
            )
            .map_err(|r| FsError::Denied(r.why))?
        };
        let (to, pages) = match mv {
            None => (0, Vec::new()),
            Some(mv) => self.place_moved_data(n, mv)?,
        };
        let c = &self.clients[&id];
        let auth = Auth {
            client: id,
            c,
            leases: &self.leases,
            open_count: &self.open_count,
            now,
        };
        let sa = crate::apply::set_attr(
            &mut Trusted::new(&mut self.meta),
            self.sb,
            &auth,
            ino,
            change,
            to,
            &pages,
        )
        .map_err(|r| FsError::Refused(format!("set-attr rejected: {r}")))?;
        self.copy_data(sa.from, sa.to, &sa.copies)?;
        self.commit(&sa.outcome.changes)?;
        self.after_commit(&sa.outcome);
        Ok(())
    }

    /// The domain of the object's new attributes (created if needed) and free pages in
    /// it for the object's data.
    fn place_moved_data(
        &mut self,
        n: crate::inode::Inode,
        mv: crate::apply::DataMove,
    ) -> Result<(u16, Vec<u64>)> {
        let dom = Domain {
            uid: n.uid,
            gid: n.gid,
            mode: n.mode,
        };
        let table = self.domain_table()?;
        let to = match table.iter().position(|e| *e == Some(dom)) {
            Some(d) => d as u16,
            None => self.add_domain(dom)?,
        };
        self.data_file(to)?;
        let (n_pages, run) = if mv.contiguous {
            (mv.pages, mv.pages)
        } else {
            (mv.pages, 1)
        };
        let pages = if n_pages == 0 {
            Vec::new()
        } else {
            self.free_pages(to, n_pages as u32, run as u32)?
        };
        if pages.len() as u64 != n_pages {
            return Err(FsError::NoSpace(format!(
                "domain {to} has no room for the {n_pages} pages of the object"
            )));
        }
        Ok((to, pages))
    }

    /// Copies data pages from domain `from` to domain `to` and makes them durable.
    fn copy_data(&mut self, from: u16, to: u16, copies: &[(u64, u64)]) -> Result<()> {
        if copies.is_empty() {
            return Ok(());
        }
        self.data_file(from)?;
        self.data_file(to)?;
        let mut buf = vec![0u8; PAGE as usize];
        for &(old, new) in copies {
            let src = &self.data[&from];
            src.read_exact_at(&mut buf, SPACE_HEADER_BYTES + old * PAGE)
                .map_err(|e| FsError::io(format!("read domain {from} page {old}"), e))?;
            let dst = &self.data[&to];
            dst.write_all_at(&buf, SPACE_HEADER_BYTES + new * PAGE)
                .map_err(|e| FsError::io(format!("write domain {to} page {new}"), e))?;
        }
        self.data[&to]
            .sync_data()
            .map_err(|e| FsError::io(format!("sync domain {to}"), e))
    }

    /// Writes `data` at byte `offset` of domain `d`'s data space for client `id`, which
    /// may write the domain: into pages allocated in the domain or reserved to it.
    fn write_data(&mut self, id: u64, d: u16, offset: u64, data: &[u8]) -> Result<()> {
        let c = &self.clients[&id];
        let (uid, gid) = (c.uid, c.gid);
        let table = self.domain_table()?;
        let dom = table
            .get(d as usize)
            .copied()
            .flatten()
            .ok_or(FsError::NotFound(format!("domain {d}")))?;
        if !access(uid, gid, dom.uid, dom.gid, dom.mode).write {
            return Err(FsError::Denied(format!(
                "uid {uid} may not write domain {d}"
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        let end = offset.saturating_add(data.len() as u64);
        if offset < PAGE || end > self.sb.domain_pages * PAGE {
            return Err(FsError::Refused(format!(
                "bytes {offset}..{end} lie outside domain {d}'s data pages"
            )));
        }
        let bitmap = self.sb.dbitmap_of(d as u64);
        for p in offset / PAGE..end.div_ceil(PAGE) {
            let reserved = self.clients[&id]
                .pages
                .get(&d)
                .is_some_and(|v| v.contains(p));
            let page = self.page(
                bitmap + p / crate::layout::BITS_PER_PAGE,
                crate::media::Tag::Bitmap,
            )?;
            let bit = p % crate::layout::BITS_PER_PAGE;
            let allocated = page[(bit / 8) as usize] & (1 << (bit % 8)) != 0;
            if !(allocated || reserved) {
                return Err(FsError::Denied(format!(
                    "data page {p} of domain {d} is neither allocated nor reserved to the client"
                )));
            }
        }
        self.check_data_sizes();
        let f = self.data_file(d)?;
        f.write_all_at(data, SPACE_HEADER_BYTES + offset)
            .map_err(|e| FsError::io(format!("write domain {d}"), e))?;
        f.sync_data()
            .map_err(|e| FsError::io(format!("sync domain {d}"), e))
    }
}

/// Each changed page's number and trailer (checksum and kind), for [`Reply::Shipped`].
fn written_pages(changes: &crate::txn::Changes) -> Vec<u64> {
    use crate::media::{BODY, le};
    changes
        .iter()
        .flat_map(|(&pno, img)| [pno, le::u64_at(&img[..], BODY)])
        .collect()
}

//! The trusted file-system service (TFS).
//!
//! One thread owns all state and handles one event at a time: new connections, request
//! frames, closed connections, and a periodic tick for lease timeouts. Reader threads
//! (one per connection) only turn bytes into events. Clients are identified by their
//! kernel credentials (SO_PEERCRED), never by anything they say about themselves.

use rustc_hash::{FxHashMap, FxHashSet};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use crate::apply::{Authority, apply_batch, domain_for, reclaim_orphan};
use crate::domain::{self, Domain};
use crate::error::{FsError, Result};
use crate::inode::{Kind, access};
use crate::journal::decode_batch;
use crate::layout::Superblock;
use crate::lease::Leases;
use crate::map::{Map, Writable};
use crate::proto::{self, Frame, RepHeader, Reply, ReqHeader, Request};
use crate::redo::MetaLog;
use crate::txn::Changes;
use crate::view::{MediaView, PageSource};
use crate::volume;

/// Service settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// How long a lease holder may take to release a revoked lease before the service
    /// disconnects it and reclaims everything it held.
    pub lease_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            lease_timeout: Duration::from_secs(2),
        }
    }
}

enum Event {
    Conn(UnixStream),
    Frame(u64, Frame),
    Closed(u64),
    Stop,
}

struct Client {
    stream: UnixStream,
    uid: u32,
    gid: u32,
    inodes: FxHashSet<u64>,
    pages: FxHashSet<(u16, u64)>,
    opens: FxHashMap<u64, u32>,
}

struct Waiter {
    client: u64,
    id: u64,
    ino: u64,
    exclusive: bool,
}

struct State {
    dir: PathBuf,
    meta: Writable,
    sb: Superblock,
    data: FxHashMap<u16, Map>,
    clients: FxHashMap<u64, Client>,
    leases: Leases,
    waiters: Vec<Waiter>,
    reserved_inodes: FxHashSet<u64>,
    reserved_pages: crate::reserved::Reserved,
    next_client: u64,
    /// The redo log every metadata write goes through (see `crate::redo`: the log is
    /// replayed at start, so nothing may write a metadata page except through it).
    log: MetaLog,
    inode_hint: u64,
    /// Per domain, the data page the next page search starts from (next-fit).
    page_cursor: FxHashMap<u16, u64>,
    cfg: Config,
    events: Sender<Event>,
}

struct Auth<'a> {
    client: u64,
    c: &'a Client,
    leases: &'a Leases,
    clients: &'a FxHashMap<u64, Client>,
}

impl Authority for Auth<'_> {
    fn cred(&self) -> (u32, u32) {
        (self.c.uid, self.c.gid)
    }
    fn holds_lease(&self, ino: u64) -> bool {
        self.leases.holds(self.client, ino, true)
    }
    fn inode_reserved(&self, ino: u64) -> bool {
        self.c.inodes.contains(&ino)
    }
    fn page_reserved(&self, d: u16, p: u64) -> bool {
        self.c.pages.contains(&(d, p))
    }
    fn is_open(&self, ino: u64) -> bool {
        self.clients.values().any(|c| c.opens.contains_key(&ino))
    }
}

fn reply(c: &Client, id: u64, r: Reply, fd: Option<&File>) {
    // A client that cannot be written to is gone; its reader thread reports the close.
    let _ = proto::send(
        &c.stream,
        &RepHeader { id, reply: r },
        &[],
        fd.map(|f| f.as_raw_fd()),
    );
}

impl State {
    fn commit(&mut self, changes: &Changes) -> Result<()> {
        self.rewind_page_cursors(changes);
        self.log.commit(&mut self.meta, changes)
    }

    fn view(&mut self) -> MediaView<'_, Writable> {
        MediaView::with_sb(&mut self.meta, self.sb)
    }

    fn data_map(&mut self, d: u16) -> Result<&mut Map> {
        if !self.data.contains_key(&d) {
            let f = volume::open_data(&self.dir, &self.sb, d, true)?;
            self.data.insert(d, Map::of_file(&f, true)?);
        }
        Ok(self.data.get_mut(&d).unwrap())
    }

    /// Reclaims orphans left by a crash: unlinked objects nobody can hold open any more.
    fn reclaim_all_orphans(&mut self) -> Result<usize> {
        let mut n = 0;
        for ino in 2..self.sb.inode_count {
            let i = self.view().inode(ino)?;
            if matches!(i.kind, Kind::File | Kind::Kv) && i.nlink == 0 {
                let ch = reclaim_orphan(&mut self.meta, self.sb, ino)?;
                self.commit(&ch)?;
                n += 1;
            }
        }
        Ok(n)
    }

    fn accept(&mut self, s: UnixStream) {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        let Ok(cred) = getsockopt(&s, PeerCredentials) else {
            return;
        };
        let id = self.next_client;
        self.next_client += 1;
        let Ok(rd) = s.try_clone() else { return };
        let ev = self.events.clone();
        std::thread::spawn(move || {
            while let Ok(Some(f)) = proto::recv(&rd) {
                if ev.send(Event::Frame(id, f)).is_err() {
                    return;
                }
            }
            let _ = ev.send(Event::Closed(id));
        });
        let c = Client {
            stream: s,
            uid: cred.uid(),
            gid: cred.gid(),
            inodes: FxHashSet::default(),
            pages: FxHashSet::default(),
            opens: FxHashMap::default(),
        };
        // A fresh read-only descriptor: the client can map the metadata, never write it.
        match File::open(volume::meta_path(&self.dir)) {
            Ok(f) => reply(
                &c,
                0,
                Reply::Welcome {
                    client: id,
                    uid: c.uid,
                    gid: c.gid,
                },
                Some(&f),
            ),
            Err(_) => return,
        }
        self.clients.insert(id, c);
    }

    fn drop_client(&mut self, id: u64) {
        let Some(c) = self.clients.remove(&id) else {
            return;
        };
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
        self.leases.release_all(id);
        self.waiters.retain(|w| w.client != id);
        for i in &c.inodes {
            self.reserved_inodes.remove(i);
        }
        for &(d, p) in &c.pages {
            self.reserved_pages.remove(d, p);
            let cur = self.page_cursor.entry(d).or_insert(p);
            *cur = (*cur).min(p);
        }
        for ino in c.opens.keys() {
            self.maybe_reclaim(*ino);
        }
    }

    fn maybe_reclaim(&mut self, ino: u64) {
        if self.clients.values().any(|c| c.opens.contains_key(&ino)) {
            return;
        }
        if let Ok(ch) = reclaim_orphan(&mut self.meta, self.sb, ino) {
            let _ = self.commit(&ch);
        }
    }

    fn ship(&mut self, id: u64, bin: &[u8]) -> std::result::Result<(), String> {
        if bin.is_empty() {
            return Ok(());
        }
        let ops = decode_batch(bin).map_err(|e| format!("malformed journal: {e}"))?;
        let c = self.clients.get(&id).ok_or("unknown client")?;
        let auth = Auth {
            client: id,
            c,
            leases: &self.leases,
            clients: &self.clients,
        };
        let out = apply_batch(&mut self.meta, self.sb, &auth, &ops)
            .map_err(|r| format!("batch rejected: {r}"))?;
        self.rewind_page_cursors(&out.changes);
        self.log
            .commit(&mut self.meta, &out.changes)
            .map_err(|e| e.to_string())?;
        let c = self.clients.get_mut(&id).unwrap();
        for i in out.used_inodes {
            c.inodes.remove(&i);
            self.reserved_inodes.remove(&i);
        }
        for p in out.used_pages {
            c.pages.remove(&p);
            self.reserved_pages.remove(p.0, p.1);
        }
        Ok(())
    }

    fn reserve(
        &mut self,
        id: u64,
        n_inodes: u32,
        d: u16,
        n_pages: u32,
        extent: u32,
    ) -> Result<Reply> {
        let (uid, gid) = {
            let c = &self.clients[&id];
            (c.uid, c.gid)
        };
        let inodes = self.free_inodes(n_inodes)?;
        let mut pages = Vec::new();
        if n_pages > 0 {
            let table = domain::read_table(&mut self.view())?;
            let Some(dom) = table.get(d as usize).copied().flatten() else {
                return Err(FsError::NotFound(format!("domain {d}")));
            };
            if !access(uid, gid, dom.uid, dom.gid, dom.mode).write {
                return Err(FsError::Denied(format!(
                    "uid {uid} may not write domain {d}"
                )));
            }
            pages = self.free_pages(d, n_pages, extent)?;
            // A grant may come out smaller than asked, in whole extents.
            if pages.is_empty() {
                return Err(FsError::NoSpace(format!(
                    "domain {d} has no free {} of {} pages",
                    if extent > 1 { "extent" } else { "run" },
                    extent.max(1)
                )));
            }
            // Reserved pages are handed out as they are, not zeroed. Only a client that
            // may write domain `d` gets here, and such a client is handed a read-write
            // mapping of the domain's whole data space on request (memory has no
            // write-only protection): it can already read every old byte these pages
            // hold, and no byte of another domain is ever in them (each domain has its
            // own data space, created empty, and domains are never reassigned). So no
            // client can reserve from a domain it could not already read, and zeroing
            // would protect nothing from anyone, at the cost of writing and persisting
            // every reserved page (a KVFS object is mostly unwritten; a libFS pool holds
            // up to a thousand pages). Unwritten bytes still read as zeros: libFS zeroes
            // what a write leaves of a fresh page below the end of file, and the mapped
            // bytes a file gains when it grows (`pxfs::zero_gap`); a KVFS get reads only
            // the value's bytes. The paper's TFS likewise only hands out space and
            // checks its use when the client's log arrives.
        }
        let c = self.clients.get_mut(&id).unwrap();
        for &i in &inodes {
            c.inodes.insert(i);
            self.reserved_inodes.insert(i);
        }
        for &p in &pages {
            c.pages.insert((d, p));
            self.reserved_pages.insert(d, p);
        }
        Ok(Reply::Reserved { inodes, pages })
    }

    /// Up to `n` free inodes not reserved to anyone, found next-fit from where the
    /// last search stopped, so a reservation costs what it asks for, not a scan of the
    /// inodes in use before it. Each inode-table page is read (and checked) once.
    fn free_inodes(&mut self, n: u32) -> Result<Vec<u64>> {
        let mut inodes = Vec::new();
        if n == 0 {
            return Ok(inodes);
        }
        let span = self.sb.inode_count - 2;
        let mut held: Option<(u64, crate::media::PageBuf)> = None;
        for k in 0..span {
            if inodes.len() as u32 >= n {
                break;
            }
            let ino = 2 + (self.inode_hint + k) % span;
            if self.reserved_inodes.contains(&ino) {
                continue;
            }
            let (pno, off) = self.sb.inode_pos(ino);
            if held.as_ref().is_none_or(|h| h.0 != pno) {
                held = Some((pno, self.view().page(pno, crate::media::Tag::Inodes)?));
            }
            let page = &held.as_ref().unwrap().1;
            if Kind::from_u8(page[off]) == Some(Kind::Free) {
                inodes.push(ino);
            }
        }
        if inodes.is_empty() {
            return Err(FsError::NoSpace("no free inodes".into()));
        }
        if let Some(&last) = inodes.last() {
            // `last - 1` is the offset of `last + 1` from inode 2.
            self.inode_hint = last - 1;
        }
        Ok(inodes)
    }

    /// Up to `n` free, unreserved pages of domain `d`, in whole runs of `run`
    /// consecutive pages (KVFS objects' extents; 1 or 0: single pages anywhere). The
    /// runs need not adjoin, so the extent of an erased object serves the next put
    /// however fragmented the domain is. The search is next-fit: it starts where the
    /// last one in this domain stopped and wraps around once, so reserving costs what
    /// it asks for (amortized) instead of a scan from page 1 over every page in use. A
    /// run never wraps: page 0 is not a data page.
    fn free_pages(&mut self, d: u16, n: u32, run: u32) -> Result<Vec<u64>> {
        let total = self.sb.domain_pages;
        let run = u64::from(run.max(1));
        let want = u64::from(n) / run * run;
        let mut pages = Vec::new();
        if want == 0 || total <= 1 || run >= total {
            return Ok(pages);
        }
        let first = self.sb.dbitmap_of(d as u64);
        let bits_pp = crate::layout::BITS_PER_PAGE;
        let start = self
            .page_cursor
            .get(&d)
            .copied()
            .filter(|&c| c >= 1 && c < total)
            .unwrap_or(1);
        let mut held: Option<(u64, crate::media::PageBuf)> = None;
        let mut p = start;
        // Free pages just before `p` not yet handed out (always fewer than `run`).
        let mut free_run = 0u64;
        // Once round the space, and `run - 1` pages more, so that a run straddling the
        // page the search started from is still found.
        let mut left = total - 1 + (run - 1);
        while left > 0 && (pages.len() as u64) < want {
            if p == 1 {
                // Wrapped around: a run cannot continue across the end of the space.
                free_run = 0;
            }
            let pg = first + p / bits_pp;
            if held.as_ref().is_none_or(|h| h.0 != pg) {
                held = Some((pg, self.view().page(pg, crate::media::Tag::Bitmap)?));
            }
            let b = &held.as_ref().unwrap().1;
            let bit = p % bits_pp;
            // A whole word of 64 pages at once where it is all in use or all free: after
            // a rewind the search crosses long runs of pages in use, and a fresh domain
            // is long runs of free ones. A bitmap page's body is a whole number of
            // words, so a word never straddles two bitmap pages.
            if bit.is_multiple_of(64) && p + 64 < total && left >= 64 {
                let at = (bit / 8) as usize;
                let media = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
                let used = media | self.reserved_pages.word(d, p / 64);
                if used == u64::MAX {
                    free_run = 0;
                    left -= 64;
                    p += 64;
                    continue;
                }
                if used == 0 {
                    // Every run the 64 free pages complete is handed out.
                    let end = p + 64;
                    let mut q = p;
                    while q < end && (pages.len() as u64) < want {
                        let take = (run - free_run).min(end - q);
                        free_run += take;
                        q += take;
                        if free_run == run {
                            pages.extend(q - run..q);
                            free_run = 0;
                        }
                    }
                    left -= 64;
                    p += 64;
                    continue;
                }
            }
            left -= 1;
            let free = b[(bit / 8) as usize] & (1 << (bit % 8)) == 0
                && !self.reserved_pages.contains(d, p);
            if free {
                free_run += 1;
                if free_run == run {
                    pages.extend(p + 1 - run..=p);
                    free_run = 0;
                }
            } else {
                free_run = 0;
            }
            p = if p + 1 >= total { 1 } else { p + 1 };
        }
        if let Some(&last) = pages.last() {
            self.page_cursor
                .insert(d, if last + 1 >= total { 1 } else { last + 1 });
        }
        Ok(pages)
    }

    /// Moves a domain's page cursor back to the lowest data page a batch frees (seen
    /// as a bit going from set to clear in the domain's bitmap, against the media
    /// before the batch commits). Freed pages are then used again before untouched
    /// ones, which keeps a volume's working set small (an erased KVFS object's extent
    /// serves the next put), while the search stays next-fit between frees.
    fn rewind_page_cursors(&mut self, changes: &Changes) {
        let sb = self.sb;
        let lo = sb.dbitmap_first;
        let hi = lo + sb.dbitmap_pages * sb.max_domains;
        if sb.dbitmap_pages == 0 {
            return;
        }
        for (&pno, img) in changes.range(lo..hi) {
            let d = (pno - lo) / sb.dbitmap_pages;
            let Ok(old) = crate::media::read_raw(&mut self.meta, pno) else {
                continue;
            };
            let freed = (0..crate::media::BODY).find(|&i| old[i] & !img[i] != 0);
            if let Some(i) = freed {
                let bit = i as u64 * 8 + u64::from((old[i] & !img[i]).trailing_zeros());
                let page = ((pno - sb.dbitmap_of(d)) * crate::layout::BITS_PER_PAGE + bit).max(1);
                let cur = self.page_cursor.entry(d as u16).or_insert(page);
                *cur = (*cur).min(page);
            }
        }
    }

    fn domain_fd(&mut self, id: u64, d: u16, dom: Domain) -> Result<(Reply, File)> {
        let c = &self.clients[&id];
        let acc = access(c.uid, c.gid, dom.uid, dom.gid, dom.mode);
        if !acc.read && !acc.write {
            return Err(FsError::Denied(format!(
                "uid {} may not access domain {d}",
                c.uid
            )));
        }
        self.data_map(d)?;
        let p = volume::data_path(&self.dir, d);
        // Write-only files are mapped read-write: memory has no write-only protection
        // (the paper names this mismatch as an open problem).
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(acc.write)
            .open(&p)
            .map_err(|e| FsError::io(format!("open {}", p.display()), e))?;
        Ok((
            Reply::Domain {
                domain: d,
                writable: acc.write,
            },
            f,
        ))
    }

    fn handle(&mut self, id: u64, f: Frame) {
        let h: ReqHeader = match proto::parse(&f.header) {
            Ok(h) => h,
            Err(_) => return self.drop_client(id),
        };
        let rid = h.id;
        let result: std::result::Result<(Reply, Option<File>), String> = match h.req {
            Request::Ship => self.ship(id, &f.bin).map(|_| (Reply::Ok, None)),
            Request::Release { ino, grant } => {
                let r = self.ship(id, &f.bin);
                self.leases.release(id, ino, grant);
                r.map(|_| (Reply::Ok, None))
            }
            Request::Acquire { ino, exclusive } => {
                if !crate::lease::valid_key(ino, self.sb.inode_count) {
                    Err(format!(
                        "lease key {ino:#x} names no inode or directory bucket"
                    ))
                } else {
                    self.waiters.push(Waiter {
                        client: id,
                        id: rid,
                        ino,
                        exclusive,
                    });
                    self.serve_waiters();
                    return;
                }
            }
            Request::Reserve {
                inodes,
                domain,
                pages,
                extent,
            } => self
                .reserve(id, inodes, domain, pages, extent)
                .map(|r| (r, None))
                .map_err(|e| e.to_string()),
            Request::Domain { mode } => {
                let c = &self.clients[&id];
                let dom = Domain {
                    uid: c.uid,
                    gid: c.gid,
                    mode: mode & 0o777,
                };
                (|| -> Result<(Reply, Option<File>)> {
                    let (d, added, ch) = domain_for(&mut self.meta, self.sb, dom)?;
                    if added {
                        volume::open_data(&self.dir, &self.sb, d, true)?;
                    }
                    self.commit(&ch)?;
                    let (r, f) = self.domain_fd(id, d, dom)?;
                    Ok((r, Some(f)))
                })()
                .map_err(|e| e.to_string())
            }
            Request::MapDomain { domain: d } => (|| -> Result<(Reply, Option<File>)> {
                let table = domain::read_table(&mut self.view())?;
                let dom = table
                    .get(d as usize)
                    .copied()
                    .flatten()
                    .ok_or(FsError::NotFound(format!("domain {d}")))?;
                let (r, f) = self.domain_fd(id, d, dom)?;
                Ok((r, Some(f)))
            })()
            .map_err(|e| e.to_string()),
            // Registered once however often the client opened it: the client sends
            // one close when its last local open goes. A free inode not reserved to the
            // client is no open file of its and is skipped (an inode reserved to the client
            // may be one its unshipped journal creates).
            Request::Opened { inos } => {
                for ino in inos {
                    let ok = matches!(self.view().inode(ino),
                        Ok(i) if i.kind != Kind::Free || self.clients[&id].inodes.contains(&ino));
                    if ok {
                        self.clients
                            .get_mut(&id)
                            .unwrap()
                            .opens
                            .entry(ino)
                            .or_insert(1);
                    }
                }
                Ok((Reply::Ok, None))
            }
            Request::Close { ino } => {
                let c = self.clients.get_mut(&id).unwrap();
                match c.opens.get_mut(&ino) {
                    Some(n) if *n > 1 => *n -= 1,
                    Some(_) => {
                        c.opens.remove(&ino);
                        self.maybe_reclaim(ino);
                    }
                    None => {}
                }
                Ok((Reply::Ok, None))
            }
        };
        if let Some(c) = self.clients.get(&id) {
            match result {
                Ok((r, f)) => reply(c, rid, r, f.as_ref()),
                Err(e) => reply(c, rid, Reply::Err(e), None),
            }
        }
        self.serve_waiters();
    }

    /// Grants what can be granted, in the order asked; asks holders to give up what
    /// blocks a waiter (once per grant); disconnects holders that did not answer a
    /// revocation within the lease timeout.
    ///
    /// A request waits behind an earlier conflicting request of another client even if
    /// no lease blocks it right now. Without that, two clients that keep taking leases
    /// the other's waiting request conflicts with (a shared lease on the root to walk a
    /// path, an exclusive one on a directory below) overtake each other's requests for
    /// ever, each new grant blocking the older request again, and the service ends up
    /// disconnecting a client that answered every revocation at once.
    fn serve_waiters(&mut self) {
        let mut k = 0;
        let now = Instant::now();
        while k < self.waiters.len() {
            let w = &self.waiters[k];
            let (client, rid, ino, excl) = (w.client, w.id, w.ino, w.exclusive);
            let sb = self.sb;
            let mut view = MediaView::with_sb(&mut self.meta, sb);
            let up = crate::lease::ancestry(&mut view, ino);
            let behind = self.waiters[..k].iter().any(|e| {
                e.client != client
                    && (excl || e.exclusive)
                    && (up.contains(&e.ino)
                        || crate::lease::ancestry(&mut view, e.ino).contains(&ino))
            });
            if behind {
                k += 1;
                continue;
            }
            let conflicts = self.leases.conflicts(&mut view, client, ino, excl);
            if conflicts.is_empty() {
                let grant = self.leases.grant(client, ino, excl);
                self.waiters.remove(k);
                if let Some(c) = self.clients.get(&client) {
                    reply(c, rid, Reply::Granted { grant }, None);
                }
                continue;
            }
            let timeout = self.cfg.lease_timeout;
            let late: Vec<u64> = conflicts
                .iter()
                .filter(|(_, x, g)| {
                    self.leases
                        .revoked_at(*x, *g)
                        .is_some_and(|t| now >= t + timeout)
                })
                .map(|(holder, _, _)| *holder)
                .collect();
            if !late.is_empty() {
                // They did not answer in time: they lose everything they hold.
                for holder in late {
                    self.drop_client(holder);
                }
                k = 0;
                continue;
            }
            for (holder, x, grant) in &conflicts {
                if self.leases.mark_revoking(*x, *grant, now)
                    && let Some(c) = self.clients.get(holder)
                {
                    reply(
                        c,
                        0,
                        Reply::Revoke {
                            ino: *x,
                            grant: *grant,
                        },
                        None,
                    );
                }
            }
            k += 1;
        }
    }
}

/// A running service (for tests and embedding); stops when dropped.
pub struct Handle {
    stop: Arc<AtomicBool>,
    events: Sender<Event>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
    socket: PathBuf,
}

impl Handle {
    /// The socket path clients connect to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Stops the service and returns how its main loop ended.
    pub fn stop(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.events.send(Event::Stop);
        // Wake the accept loop.
        let _ = UnixStream::connect(&self.socket);
        let r = match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(FsError::Protocol("service thread panicked".into()))),
            None => Ok(()),
        };
        let _ = std::fs::remove_file(&self.socket);
        r
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Opens the volume at `dir` (replaying its redo log and reclaiming orphans) and serves
/// it on `socket` from background threads.
pub fn spawn(dir: &Path, socket: &Path, cfg: Config) -> Result<Handle> {
    let (_f, mut meta) = volume::open_meta_rw(dir)?;
    let sb = Superblock::read(&mut meta)?;
    // Replays the log's last transaction (again, if it was applied: replay is
    // idempotent because every metadata write goes through the log).
    let (log, _) = MetaLog::open(&mut meta, &sb)?;
    if socket.exists() {
        if UnixStream::connect(socket).is_ok() {
            return Err(FsError::Exists(format!(
                "a service already listens on {}",
                socket.display()
            )));
        }
        let _ = std::fs::remove_file(socket);
    }
    let listener = UnixListener::bind(socket)
        .map_err(|e| FsError::io(format!("bind {}", socket.display()), e))?;
    let (tx, rx) = channel();
    let mut st = State {
        dir: dir.to_path_buf(),
        meta,
        sb,
        data: FxHashMap::default(),
        clients: FxHashMap::default(),
        leases: Leases::default(),
        waiters: Vec::new(),
        reserved_inodes: FxHashSet::default(),
        reserved_pages: crate::reserved::Reserved::default(),
        next_client: 1,
        log,
        inode_hint: 0,
        page_cursor: FxHashMap::default(),
        cfg,
        events: tx.clone(),
    };
    st.reclaim_all_orphans()?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            if stop2.load(Ordering::SeqCst) {
                return;
            }
            if let Ok(s) = s
                && tx2.send(Event::Conn(s)).is_err()
            {
                return;
            }
        }
    });
    let thread = std::thread::spawn(move || main_loop(st, rx));
    Ok(Handle {
        stop,
        events: tx,
        thread: Some(thread),
        socket: socket.to_path_buf(),
    })
}

fn main_loop(mut st: State, rx: Receiver<Event>) -> Result<()> {
    let tick = Duration::from_millis(50)
        .min(st.cfg.lease_timeout / 4)
        .max(Duration::from_millis(1));
    loop {
        match rx.recv_timeout(tick) {
            Ok(Event::Conn(s)) => st.accept(s),
            Ok(Event::Frame(id, f)) => {
                if st.clients.contains_key(&id) {
                    st.handle(id, f)
                }
            }
            Ok(Event::Closed(id)) => {
                st.drop_client(id);
                st.serve_waiters();
            }
            Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => {
                let ids: Vec<u64> = st.clients.keys().copied().collect();
                for id in ids {
                    st.drop_client(id);
                }
                return Ok(());
            }
            Err(RecvTimeoutError::Timeout) => st.serve_waiters(),
        }
    }
}

/// Serves the volume at `dir` on `socket` until SIGINT or SIGTERM.
pub fn serve(dir: &Path, socket: &Path, cfg: Config) -> Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    // Block the stop signals in every thread, then wait for one in this thread.
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.thread_block()
        .map_err(|e| FsError::io("sigprocmask", e.into()))?;
    let h = spawn(dir, socket, cfg)?;
    eprintln!(
        "pmlab fs: serving {} on {}",
        dir.display(),
        socket.display()
    );
    let _ = set.wait();
    h.stop()
}

//! libFS: the untrusted client library.
//!
//! It maps the volume's metadata read-only and reads it directly — path resolution,
//! directory listings, inode attributes, radix trees — without calling the service. It
//! writes file data directly into the data spaces of domains it may write. Metadata
//! changes go into a journal (and into a local overlay so the client sees its own
//! changes at once) that is shipped to the service in batches: when it grows, on fsync,
//! before taking a new lease, and when the service revokes a lease.
//!
//! Open files are the client's own business until another client could care: as in
//! Aerie (§5.1), the client keeps its open files (shadow objects) to itself and tells
//! the service about them only when it gives back a lease (a revocation: another client
//! may be about to unlink or rename them) or ships a batch that unlinks one of them.
//! Every open file is covered by a lease the client held when it opened it, and the
//! client gives back leases only through a release that registers its open files first,
//! so the service never frees a file some client still holds open. Opening and closing
//! a file therefore cost no call into the service in the common case.

use std::collections::BTreeSet;

use rustc_hash::{FxHashMap, FxHashSet};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::apply::{Authority, apply_batch};
use crate::cache::{CachedRadix, MetaCache};
use crate::dir;
use crate::error::{FsError, Result};
use crate::inode::{Inode, Kind};
use crate::journal::{Op, encode_batch};
use crate::layout::{ROOT_INO, Superblock};
use crate::lease::ancestry;
use crate::map::{Map, ReadOnly};
use crate::overlay::Overlay;
use crate::pool::PagePool;
use crate::proto::{self, RepHeader, Reply, ReqHeader, Request};
use crate::radix;
use crate::txn::Changes;
use crate::view::{MediaView, PageSource};

/// Ship the journal once it holds this many operations.
pub const SHIP_OPS: usize = 256;
/// Wait for shipped batches and drop the overlay once it holds this many pages. A
/// journal shipped because it grew is not waited for (the service applies it while the
/// client goes on, seeing its own changes through the overlay it keeps); this bounds
/// the memory that costs.
const OVERLAY_MAX_PAGES: usize = 8192;
/// Inodes and pages asked for by the first reservation. Each further reservation asks
/// for twice as many, up to [`RESERVE_MAX`]: a client that creates many files pays for
/// few round trips, one that creates a few does not hoard (reserved resources are lost
/// to others until disconnect).
const RESERVE_FIRST: u32 = 32;
/// The largest reservation asked for at once.
const RESERVE_MAX: u32 = 1024;

type Pending = FxHashMap<u64, (Sender<(Reply, Option<OwnedFd>)>, Option<(u64, bool)>)>;
type ReplyRx = Receiver<(Reply, Option<OwnedFd>)>;

struct Shared {
    writer: Mutex<UnixStream>,
    pending: Mutex<Pending>,
    /// Leases held: object -> (exclusive, grant number). Granted by the reader thread as grants arrive
    /// (so a revocation can never overtake its grant), removed on revocation.
    leases: Mutex<FxHashMap<u64, (bool, u64)>>,
    next_id: AtomicU64,
}

/// A reservation of an extent asked for and not yet answered ([`State::ask_extents`]).
pub struct ExtentAsk {
    rx: ReplyRx,
    domain: u16,
    pages: u64,
}

/// What libFS keeps per mounted volume.
pub struct State {
    meta: ReadOnly,
    sb: Superblock,
    uid: u32,
    gid: u32,
    overlay: Changes,
    /// Pages the journal not yet shipped changes (what one service transaction holds).
    batch_pages: FxHashSet<u64>,
    /// Replies to shipped batches not yet waited for.
    inflight: Vec<ReplyRx>,
    journal: Vec<Op>,
    /// Inodes reserved to this client (looked up and removed by every create).
    inodes: BTreeSet<u64>,
    /// Data pages reserved to this client, by domain, as runs: every page a batch uses
    /// is looked up and removed, a KVFS object's extent in one step.
    pages: FxHashMap<u16, PagePool>,
    domains: FxHashMap<u16, Map>,
    my_domains: FxHashMap<u32, u16>,
    /// Names looked up or created, per directory: looked up by `&str`, with no
    /// allocation per lookup.
    names: FxHashMap<u64, FxHashMap<String, u64>>,
    /// Open files: inode -> (local opens, whether the service knows of them).
    opens: FxHashMap<u64, (u32, bool)>,
    cache: MetaCache,
    inode_batch: u32,
    page_batch: u32,
    /// The next inode batch, asked for and not yet collected.
    inode_refill: Option<ReplyRx>,
    /// The next page batch of each domain, asked for and not yet collected.
    page_refill: FxHashMap<u16, ReplyRx>,
    /// A batch the service rejected during a revocation, reported by the next call.
    deferred: Option<String>,
    shared: Arc<Shared>,
}

/// A connection to the service: the mount of one volume.
pub struct Client {
    shared: Arc<Shared>,
    state: Arc<Mutex<State>>,
    client_id: u64,
    reader: Option<std::thread::JoinHandle<()>>,
}

fn rpc_send(
    shared: &Shared,
    req: Request,
    bin: &[u8],
) -> Result<Receiver<(Reply, Option<OwnedFd>)>> {
    let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
    let (tx, rx) = channel();
    let tag = match &req {
        Request::Acquire { ino, exclusive } => Some((*ino, *exclusive)),
        _ => None,
    };
    shared.pending.lock().unwrap().insert(id, (tx, tag));
    let w = shared.writer.lock().unwrap();
    proto::send(&w, &ReqHeader { id, req }, bin, None)?;
    Ok(rx)
}

fn rpc_wait(rx: Receiver<(Reply, Option<OwnedFd>)>) -> Result<(Reply, Option<OwnedFd>)> {
    let (r, fd) = rx
        .recv()
        .map_err(|_| FsError::Protocol("the service closed the connection".into()))?;
    if let Reply::Err(e) = r {
        return Err(FsError::Refused(e));
    }
    Ok((r, fd))
}

fn rpc(shared: &Shared, req: Request, bin: &[u8]) -> Result<(Reply, Option<OwnedFd>)> {
    rpc_wait(rpc_send(shared, req, bin)?)
}

struct LocalAuth<'a> {
    cred: (u32, u32),
    leases: &'a FxHashMap<u64, (bool, u64)>,
    inodes: &'a BTreeSet<u64>,
    pages: &'a FxHashMap<u16, PagePool>,
    opens: &'a FxHashMap<u64, (u32, bool)>,
}

impl Authority for LocalAuth<'_> {
    fn cred(&self) -> (u32, u32) {
        self.cred
    }
    fn holds_lease(&self, ino: u64) -> bool {
        self.leases.get(&ino).is_some_and(|h| h.0)
    }
    fn inode_reserved(&self, ino: u64) -> bool {
        self.inodes.contains(&ino)
    }
    fn page_reserved(&self, d: u16, p: u64) -> bool {
        self.pages.get(&d).is_some_and(|v| v.contains(p))
    }
    fn first_unreserved(&self, d: u16, first: u64, count: u64) -> Option<u64> {
        match self.pages.get(&d) {
            Some(v) => v.first_missing(first, count),
            None => (count > 0).then_some(first),
        }
    }
    fn is_open(&self, ino: u64) -> bool {
        self.opens.contains_key(&ino)
    }
    fn seals_changes(&self) -> bool {
        false
    }
}

impl State {
    /// A checked view of the metadata as this client sees it (its own changes included).
    pub fn with_view<T>(
        &mut self,
        f: impl FnOnce(&mut MediaView<'_, Overlay<'_, ReadOnly>>) -> Result<T>,
    ) -> Result<T> {
        // Torn pages (the service rewriting one in place) are re-read by the overlay.
        let mut o = Overlay::new(&mut self.meta, &self.overlay);
        let mut v = MediaView::with_sb(&mut o, self.sb);
        f(&mut v)
    }

    /// The read-only mapping of the metadata space.
    pub fn meta_map(&self) -> &Map {
        &self.meta.0
    }

    /// The superblock.
    pub fn sb(&self) -> &Superblock {
        &self.sb
    }

    /// Inode `ino` as this client sees it.
    pub fn inode(&mut self, ino: u64) -> Result<Inode> {
        if let Some(i) = self.cache.inode(ino) {
            return Ok(i);
        }
        let i = self.with_view(|v| v.inode(ino))?;
        self.cache.put_inode(ino, i);
        Ok(i)
    }

    /// Forgets cached metadata: what was read may no longer be protected by a lease.
    pub fn forget_cached(&mut self) {
        self.cache.clear();
        self.names.clear();
    }

    /// Looks `name` up in directory `dino` (through the name cache).
    pub fn lookup(&mut self, dino: u64, name: &str) -> Result<Option<u64>> {
        if let Some(&i) = self.names.get(&dino).and_then(|d| d.get(name)) {
            return Ok(Some(i));
        }
        let d = self.inode(dino)?;
        if d.kind != Kind::Dir {
            return Err(FsError::WrongKind(format!(
                "inode {dino} is not a directory"
            )));
        }
        let r = self.with_view(|v| dir::lookup(v, d.root, name))?;
        if let Some(i) = r {
            self.names
                .entry(dino)
                .or_default()
                .insert(name.to_string(), i);
        }
        Ok(r)
    }

    /// Whether the client holds a lease covering `ino` (on it or above it).
    pub fn covered(&mut self, ino: u64, exclusive: bool) -> bool {
        if self.cache.ancestry(ino).is_none() {
            let up = self.with_view(|v| Ok(ancestry(v, ino))).unwrap_or_default();
            self.cache.put_ancestry(ino, up);
        }
        let up = self.cache.ancestry(ino).unwrap_or_default();
        let l = self.shared.leases.lock().unwrap();
        up.iter()
            .any(|x| l.get(x).is_some_and(|&(e, _)| e || !exclusive))
    }

    /// Records `op` after checking it locally exactly as the service will.
    pub fn record(&mut self, op: Op) -> Result<()> {
        self.record_all(vec![op])
    }

    /// Records `ops` (all or none) after checking them locally exactly as the service
    /// will; one check of several operations reads the pages they share once.
    pub fn record_all(&mut self, ops: Vec<Op>) -> Result<()> {
        if let Some(e) = self.deferred.take() {
            return Err(FsError::Refused(e));
        }
        let shared = self.shared.clone();
        // Held across the check so a revocation cannot slip between check and record
        // (the revoker needs the state lock, which the caller holds, to act anyway).
        let leases = shared.leases.lock().unwrap();
        let sb = self.sb;
        let out = {
            let auth = LocalAuth {
                cred: (self.uid, self.gid),
                leases: &leases,
                inodes: &self.inodes,
                pages: &self.pages,
                opens: &self.opens,
            };
            let mut o = Overlay::for_txn(&mut self.meta, &self.overlay);
            apply_batch(&mut o, sb, &auth, &ops).map_err(|r| FsError::Refused(r.why))?
        };
        drop(leases);
        self.cache.forget_pages(&sb, out.changes.keys().copied());
        for (p, img) in out.changes {
            self.batch_pages.insert(p);
            self.overlay.insert(p, img);
        }
        for i in &out.used_inodes {
            self.inodes.remove(i);
        }
        // Consecutive pages of one domain (an extent) leave the pool as one run.
        for same in out.used_pages.chunk_by(|a, b| a.0 == b.0) {
            if let Some(v) = self.pages.get_mut(&same[0].0) {
                v.remove(same.iter().map(|&(_, p)| p));
            }
        }
        for op in &ops {
            match op {
                Op::Unlink { parent, name, .. } | Op::Rmdir { parent, name, .. } => {
                    if let Some(d) = self.names.get_mut(parent) {
                        d.remove(name);
                    }
                    self.cache.forget_ancestries();
                }
                Op::Rename {
                    from_parent,
                    from_name,
                    to_parent,
                    to_name,
                    ino,
                } => {
                    if let Some(d) = self.names.get_mut(from_parent) {
                        d.remove(from_name);
                    }
                    self.names
                        .entry(*to_parent)
                        .or_default()
                        .insert(to_name.clone(), *ino);
                    self.cache.forget_ancestries();
                }
                // The creator holds the lease on the directory: the name is its to know.
                Op::Create {
                    parent, name, ino, ..
                } => {
                    self.names
                        .entry(*parent)
                        .or_default()
                        .insert(name.clone(), *ino);
                }
                _ => {}
            }
        }
        self.journal.extend(ops);
        if self.overlay.len() > OVERLAY_MAX_PAGES {
            self.ship()?;
        } else if self.journal.len() >= SHIP_OPS
            || self.batch_pages.len() as u64 > crate::redo::capacity(&self.sb) / 2
        {
            self.send_journal()?;
        }
        Ok(())
    }

    /// Ships the journal and waits for the service to apply it and every batch
    /// shipped before (fsync); then drops the overlay, which the mapping now shows.
    pub fn ship(&mut self) -> Result<()> {
        if let Some(e) = self.deferred.take() {
            return Err(FsError::Refused(e));
        }
        let r = self.send_journal().and_then(|_| self.wait_inflight());
        if !self.overlay.is_empty() {
            self.overlay.clear();
            // The service may have placed directory and radix pages elsewhere than this
            // client did, so what was read from those goes; names stay, since they map
            // to inode numbers the client chose itself, unless the batch was refused.
            self.cache.clear();
            if r.is_err() {
                self.names.clear();
            }
        }
        r
    }

    /// Ships the journal without waiting for the service to apply it.
    fn send_journal(&mut self) -> Result<()> {
        if self.journal.is_empty() {
            return Ok(());
        }
        // The service decides whether an unlinked file is freed or kept as an orphan by
        // whether it is open, so it must learn of the open files this batch unlinks.
        let unlinked: Vec<u64> = self
            .journal
            .iter()
            .filter_map(|op| match op {
                Op::Unlink { ino, .. } => Some(*ino),
                _ => None,
            })
            .collect();
        if let Some(inos) = self.register_opens(|ino| unlinked.contains(&ino)) {
            let rx = rpc_send(&self.shared, Request::Opened { inos }, &[])?;
            self.inflight.push(rx);
        }
        let batch = encode_batch(&self.journal);
        self.journal.clear();
        self.batch_pages.clear();
        let rx = rpc_send(&self.shared, Request::Ship, &batch)?;
        self.inflight.push(rx);
        Ok(())
    }

    /// Waits for the replies to everything shipped; the first refusal is the answer.
    fn wait_inflight(&mut self) -> Result<()> {
        let mut first = Ok(());
        for rx in std::mem::take(&mut self.inflight) {
            if let Err(e) = rpc_wait(rx)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }

    /// Marks the open files `pick` selects among those the service does not know of as
    /// known, and returns them (None: there are none) for an `Opened` request.
    fn register_opens(&mut self, pick: impl Fn(u64) -> bool) -> Option<Vec<u64>> {
        let mut inos = Vec::new();
        for (&ino, (_, known)) in self.opens.iter_mut() {
            if !*known && pick(ino) {
                *known = true;
                inos.push(ino);
            }
        }
        (!inos.is_empty()).then(|| {
            inos.sort_unstable();
            inos
        })
    }

    /// Sends a reservation request without waiting for the answer.
    fn ask_reserve(&self, inodes: u32, domain: u16, pages: u32, extent: u32) -> Result<ReplyRx> {
        let req = Request::Reserve {
            inodes,
            domain,
            pages,
            extent,
        };
        rpc_send(&self.shared, req, &[])
    }

    /// Waits for the answer to a reservation and adds what it granted to the pools.
    fn collect_reserve(&mut self, rx: ReplyRx, d: u16) -> Result<(Vec<u64>, Vec<u64>)> {
        match rpc_wait(rx)? {
            (Reply::Reserved { inodes, pages }, _) => {
                self.inodes.extend(inodes.iter().copied());
                if !pages.is_empty() {
                    self.pages
                        .entry(d)
                        .or_default()
                        .extend(pages.iter().copied());
                }
                Ok((inodes, pages))
            }
            _ => Err(FsError::Protocol("expected a reservation".into())),
        }
    }

    /// A free inode reserved to this client.
    ///
    /// The next batch is asked for while a quarter of the current one is left, and
    /// collected when the pool runs dry: a run of creates then seldom waits for the
    /// service, which may be busy applying a batch this client shipped a moment ago
    /// (its requests are served in order). A client that stops creating holds at most
    /// one batch more than it used.
    pub fn take_inode(&mut self) -> Result<u64> {
        if self.inodes.is_empty()
            && let Some(rx) = self.inode_refill.take()
        {
            // A refusal (no inode left) is asked again below, and reported from there.
            let _ = self.collect_reserve(rx, 0);
        }
        if self.inodes.is_empty() {
            let want = self.next_inode_batch();
            let rx = self.ask_reserve(want, 0, 0, 1)?;
            self.collect_reserve(rx, 0)?;
        }
        if self.inode_refill.is_none() && (self.inodes.len() as u32) * 8 <= self.inode_batch {
            let want = self.next_inode_batch();
            self.inode_refill = Some(self.ask_reserve(want, 0, 0, 1)?);
        }
        self.inodes
            .first()
            .copied()
            .ok_or_else(|| FsError::NoSpace("no inode reserved".into()))
    }

    fn next_inode_batch(&mut self) -> u32 {
        let want = self.inode_batch;
        self.inode_batch = (want * 2).min(RESERVE_MAX);
        want
    }

    fn next_page_batch(&mut self) -> u32 {
        let want = self.page_batch;
        self.page_batch = (want * 2).min(RESERVE_MAX);
        want
    }

    /// A free data page of domain `d`, reserved to this client; it holds whatever the
    /// domain last held there (libFS zeroes what a file must read as zeros). Refilled
    /// ahead of need like the inode pool ([`State::take_inode`]).
    pub fn take_page(&mut self, d: u16) -> Result<u64> {
        let left = |s: &Self| s.pages.get(&d).map_or(0, |v| v.len() as usize);
        if left(self) == 0
            && let Some(rx) = self.page_refill.remove(&d)
        {
            let _ = self.collect_reserve(rx, d);
        }
        if left(self) == 0 {
            let want = self.next_page_batch();
            let rx = self.ask_reserve(0, d, want, 1)?;
            self.collect_reserve(rx, d)?;
        }
        if !self.page_refill.contains_key(&d) && (left(self) as u32) * 8 <= self.page_batch {
            let want = self.next_page_batch();
            let rx = self.ask_reserve(0, d, want, 1)?;
            self.page_refill.insert(d, rx);
        }
        self.pages
            .get(&d)
            .and_then(|v| v.first())
            .ok_or_else(|| FsError::NoSpace(format!("no page of domain {d}")))
    }

    /// Up to `count` extents of `n` consecutive free data pages of domain `d`,
    /// reserved to this client: their first pages, at least one.
    pub fn take_extents(&mut self, d: u16, n: u64, count: u64) -> Result<Vec<u64>> {
        let ask = self.ask_extents(d, n, count)?;
        self.extent_answer(ask)
    }

    /// Asks for up to `count` extents of `n` consecutive free data pages of domain `d`
    /// without waiting; the answer is collected by [`State::extent_answer`] (KVFS asks
    /// for its next objects while it still has some, see `crate::kvfs`). The extents
    /// need not adjoin one another, so an erased object's extent serves again.
    pub fn ask_extents(&mut self, d: u16, n: u64, count: u64) -> Result<ExtentAsk> {
        let pages = u32::try_from(n.saturating_mul(count))
            .map_err(|_| FsError::NoSpace(format!("{count} extents of {n} pages")))?;
        Ok(ExtentAsk {
            rx: self.ask_reserve(0, d, pages, n as u32)?,
            domain: d,
            pages: n,
        })
    }

    /// The first pages of the extents `ask` asked for, now reserved to this client.
    pub fn extent_answer(&mut self, ask: ExtentAsk) -> Result<Vec<u64>> {
        let (d, n) = (ask.domain, ask.pages);
        let (_, pages) = self.collect_reserve(ask.rx, d)?;
        let whole = pages
            .chunks(n as usize)
            .all(|c| c.len() as u64 == n && c.windows(2).all(|w| w[1] == w[0] + 1));
        if pages.is_empty() || !whole {
            return Err(FsError::Protocol(format!(
                "reservation of {n}-page extents in domain {d} answered with {} pages not in whole extents",
                pages.len()
            )));
        }
        Ok(pages.chunks(n as usize).map(|c| c[0]).collect())
    }

    /// The domain for this client's new files with permission bits `mode`.
    pub fn domain_for(&mut self, mode: u32) -> Result<u16> {
        let mode = mode & 0o777;
        if let Some(&d) = self.my_domains.get(&mode) {
            return Ok(d);
        }
        let (r, fd) = rpc(&self.shared, Request::Domain { mode }, &[])?;
        let Reply::Domain { domain, writable } = r else {
            return Err(FsError::Protocol("expected a domain".into()));
        };
        if let Some(fd) = fd {
            let f = std::fs::File::from(fd);
            self.domains.insert(domain, Map::of_file(&f, writable)?);
        }
        self.my_domains.insert(mode, domain);
        Ok(domain)
    }

    /// The mapping of domain `d`'s data space (writable only if the service allowed it).
    pub fn data(&mut self, d: u16) -> Result<&mut Map> {
        if !self.domains.contains_key(&d) {
            let (r, fd) = rpc(&self.shared, Request::MapDomain { domain: d }, &[])?;
            let (Reply::Domain { writable, .. }, Some(fd)) = (r, fd) else {
                return Err(FsError::Protocol("expected a domain descriptor".into()));
            };
            let f = std::fs::File::from(fd);
            self.domains.insert(d, Map::of_file(&f, writable)?);
        }
        Ok(self.domains.get_mut(&d).unwrap())
    }

    /// The data page holding page `index` of file `ino`, whose inode is `inode` (0: a hole).
    pub fn page_of(&mut self, ino: u64, inode: &Inode, index: u64) -> Result<u64> {
        match inode.kind {
            Kind::Kv => Ok(if inode.root != 0 && index < self.sb.kv_object_pages {
                inode.root + index
            } else {
                0
            }),
            // Only lookups of the file as it is on the media are remembered: the inode
            // passed in may be one the caller changed, and its tree one not yet written.
            _ if self.cache.inode(ino) == Some(*inode) => {
                if let Some(p) = self.cache.leaf(ino, index) {
                    return Ok(p);
                }
                let mut cache = std::mem::take(&mut self.cache);
                let r = self.with_view(|v| {
                    let mut c = CachedRadix {
                        inner: v,
                        cache: &mut cache,
                    };
                    radix::lookup(&mut c, inode, index)
                });
                if let Ok(p) = r {
                    cache.put_leaf(ino, index, p);
                }
                self.cache = cache;
                r
            }
            _ => self.with_view(|v| radix::lookup(v, inode, index)),
        }
    }

    /// Notes that the client holds `ino` open. The service hears of it only if it
    /// must (see the module documentation).
    pub fn note_open(&mut self, ino: u64) {
        self.opens.entry(ino).or_insert((0, false)).0 += 1;
    }

    /// Notes that the client closed `ino` once; tells the service when the last local
    /// open of a file it knows of is gone, so it can free the file if it was unlinked.
    pub fn note_close(&mut self, ino: u64) -> Result<()> {
        let Some(o) = self.opens.get_mut(&ino) else {
            return Ok(());
        };
        o.0 -= 1;
        if o.0 > 0 {
            return Ok(());
        }
        let known = o.1;
        self.opens.remove(&ino);
        if !known {
            return Ok(());
        }
        // A pending unlink of the object must reach the service before the close that
        // lets it free the object.
        if self
            .journal
            .iter()
            .any(|op| matches!(op, Op::Unlink { ino: i, .. } if *i == ino))
        {
            self.ship()?;
        }
        rpc(&self.shared, Request::Close { ino }, &[]).map(|_| ())
    }

    /// Open files the service knows of (registered when a lease was given back or an
    /// unlink shipped), sorted.
    pub fn registered_opens(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .opens
            .iter()
            .filter(|(_, o)| o.1)
            .map(|(i, _)| *i)
            .collect();
        v.sort_unstable();
        v
    }

    /// The client's credentials as the kernel reported them to the service.
    pub fn cred(&self) -> (u32, u32) {
        (self.uid, self.gid)
    }
}

impl Client {
    /// Connects to the service listening on `socket` and maps the volume read-only.
    pub fn connect(socket: &Path) -> Result<Client> {
        let s = UnixStream::connect(socket)
            .map_err(|e| FsError::io(format!("connect {}", socket.display()), e))?;
        let Some(f) = proto::recv(&s)? else {
            return Err(FsError::Protocol(
                "the service closed the connection".into(),
            ));
        };
        let h: RepHeader = proto::parse(&f.header)?;
        let (Reply::Welcome { client, uid, gid }, Some(fd)) = (h.reply, f.fd) else {
            return Err(FsError::Protocol(
                "expected a welcome with the metadata descriptor".into(),
            ));
        };
        let file = std::fs::File::from(fd);
        let mut meta = ReadOnly(Map::of_file(&file, false)?);
        let sb = Superblock::read(&mut meta)?;
        let shared = Arc::new(Shared {
            writer: Mutex::new(s.try_clone().map_err(|e| FsError::io("dup socket", e))?),
            pending: Mutex::new(FxHashMap::default()),
            leases: Mutex::new(FxHashMap::default()),
            next_id: AtomicU64::new(1),
        });
        let state = Arc::new(Mutex::new(State {
            meta,
            sb,
            uid,
            gid,
            overlay: Changes::new(),
            batch_pages: Default::default(),
            inflight: Vec::new(),
            journal: Vec::new(),
            inodes: BTreeSet::new(),
            pages: FxHashMap::default(),
            domains: FxHashMap::default(),
            my_domains: FxHashMap::default(),
            names: FxHashMap::default(),
            opens: FxHashMap::default(),
            cache: MetaCache::default(),
            inode_batch: RESERVE_FIRST,
            page_batch: RESERVE_FIRST,
            inode_refill: None,
            page_refill: FxHashMap::default(),
            deferred: None,
            shared: shared.clone(),
        }));
        let (rtx, rrx) = channel::<(u64, u64)>();
        let sh = shared.clone();
        let reader = std::thread::spawn(move || {
            while let Ok(Some(f)) = proto::recv(&s) {
                let Ok(h) = proto::parse::<RepHeader>(&f.header) else {
                    break;
                };
                if let Reply::Revoke { ino, grant } = h.reply {
                    let _ = rtx.send((ino, grant));
                    continue;
                }
                if let Some((tx, tag)) = sh.pending.lock().unwrap().remove(&h.id) {
                    if let (Some((ino, excl)), Reply::Granted { grant }) = (tag, &h.reply) {
                        sh.leases.lock().unwrap().insert(ino, (excl, *grant));
                    }
                    let _ = tx.send((h.reply, f.fd));
                }
            }
            // Wake every waiter: the connection is gone.
            sh.pending.lock().unwrap().clear();
        });
        let st = state.clone();
        let sh = shared.clone();
        std::thread::spawn(move || {
            // The revoker: ships the journal and gives the lease back.
            for (ino, grant) in rrx {
                // Like `Client::state`: a caller that panicked holding the state must not
                // silence the revoker, or the service would drop this client.
                let mut s = st.lock().unwrap_or_else(|e| e.into_inner());
                {
                    let mut l = sh.leases.lock().unwrap();
                    // A revocation of a grant since replaced (or released) is stale.
                    if l.get(&ino).map(|h| h.1) != Some(grant) {
                        continue;
                    }
                    l.remove(&ino);
                }
                let batch = if s.journal.is_empty() {
                    Vec::new()
                } else {
                    encode_batch(&s.journal)
                };
                s.journal.clear();
                s.batch_pages.clear();
                // Another client may be about to unlink or rename files this client
                // holds open: the service learns of them before the lease goes.
                if let Some(inos) = s.register_opens(|_| true)
                    && let Ok(rx) = rpc_send(&sh, Request::Opened { inos }, &[])
                {
                    s.inflight.push(rx);
                }
                if let Ok(rx) = rpc_send(&sh, Request::Release { ino, grant }, &batch) {
                    s.inflight.push(rx);
                }
                // The overlay (and what was cached through it) goes only once the
                // service has applied everything it shows, and the state stays locked
                // until then. Dropping it before the reply, or letting the client's own
                // thread read in between, opens a window in which the mapping shows the
                // batch as not made: a file created a moment ago has no name yet, and
                // the next operation fails with "no such file or directory" or records
                // ops against the pre-batch state that the service then refuses (the
                // lost-create race of tests/stress_rename_race.rs, which fails within a
                // few dozen iterations with the overlay dropped before the wait).
                if let Err(e) = s.wait_inflight() {
                    s.deferred = Some(e.to_string());
                }
                s.overlay.clear();
                s.forget_cached();
            }
        });
        Ok(Client {
            shared,
            state,
            client_id: client,
            reader: Some(reader),
        })
    }

    /// Requests sent to the service so far (each takes a round trip).
    pub fn requests_sent(&self) -> u64 {
        self.shared.next_id.load(Ordering::SeqCst) - 1
    }

    /// The number the service gave this client.
    pub fn id(&self) -> u64 {
        self.client_id
    }

    /// Locks the client state for one operation.
    pub fn state(&self) -> MutexGuard<'_, State> {
        // A caller that panicked holding the state leaves it as consistent as any
        // operation's early return would; the unmount that follows still needs it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes sure the client holds a lease covering `ino`, shipping its journal first
    /// (a new lease may make other clients' changes visible, which the overlay would
    /// hide), and returns the locked state with the lease held.
    pub fn leased(&self, ino: u64, exclusive: bool) -> Result<MutexGuard<'_, State>> {
        for _ in 0..64 {
            let mut s = self.state();
            // A batch the revoker shipped may have been refused; the mapping then lacks
            // operations this client saw as done, so the refusal is the answer now,
            // before a lookup reports its consequence as a missing name.
            if let Some(e) = s.deferred.take() {
                return Err(FsError::Refused(e));
            }
            if s.covered(ino, exclusive) {
                return Ok(s);
            }
            s.ship()?;
            drop(s);
            rpc(&self.shared, Request::Acquire { ino, exclusive }, &[])?;
            // What was read before the grant may predate another client's changes.
            self.state().forget_cached();
        }
        Err(FsError::Refused(format!(
            "lease on inode {ino} revoked again and again"
        )))
    }

    /// Ships the journal (the durability point of metadata operations).
    pub fn sync(&self) -> Result<()> {
        self.state().ship()
    }

    /// Leases currently held: (object, exclusive).
    pub fn leases(&self) -> Vec<(u64, bool)> {
        let mut v: Vec<_> = self
            .shared
            .leases
            .lock()
            .unwrap()
            .iter()
            .map(|(a, b)| (*a, b.0))
            .collect();
        v.sort_unstable();
        v
    }

    /// Resolves an absolute path to (parent directory, last name, object if it exists),
    /// taking shared leases on the directories it walks.
    pub fn resolve_parent<'p>(&self, path: &'p str) -> Result<(u64, &'p str, Option<u64>)> {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        if !path.starts_with('/') {
            return Err(FsError::BadName {
                name: path.into(),
                why: "paths are absolute",
            });
        }
        let Some((last, dirs)) = comps.split_last() else {
            return Ok((ROOT_INO, "", Some(ROOT_INO)));
        };
        let mut d = ROOT_INO;
        for c in dirs {
            let mut s = self.leased(d, false)?;
            d = s
                .lookup(d, c)?
                .ok_or_else(|| FsError::NotFound(path.into()))?;
            if s.inode(d)?.kind != Kind::Dir {
                return Err(FsError::WrongKind(format!(
                    "{c} in {path} is not a directory"
                )));
            }
        }
        let mut s = self.leased(d, false)?;
        let last_ino = s.lookup(d, last)?;
        Ok((d, last, last_ino))
    }

    /// Resolves an absolute path to its object.
    pub fn resolve(&self, path: &str) -> Result<u64> {
        let (_, _, i) = self.resolve_parent(path)?;
        i.ok_or_else(|| FsError::NotFound(path.into()))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.sync();
        let _ = self
            .shared
            .writer
            .lock()
            .unwrap()
            .shutdown(std::net::Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

//! What libFS keeps per mounted volume, and recording and shipping its journal.

use std::collections::BTreeSet;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::conn::{Conn, LeaseTable};
use super::copies::Copies;
use crate::apply::{Authority, apply_batch_over};
use crate::cache::{CachedRadix, MetaCache};
use crate::dir;
use crate::error::{FsError, Result};
use crate::inode::{Inode, Kind};
use crate::journal::{Op, encode_batch};
use crate::layout::Superblock;
use crate::lease::{ancestry, bucket_key, bucket_of_key, names_of_key};
use crate::map::{Map, ReadOnly};
use crate::mkfs::now_ns;
use crate::overlay::Overlay;
use crate::pool::PagePool;
use crate::proto::{Reply, Request};
use crate::radix;
use crate::txn::{Changes, Clean};
use crate::view::{MediaView, PageSource};

/// Ship the journal once it holds this many operations.
pub const SHIP_OPS: usize = 256;
/// Wait for shipped batches and drop the overlay once it holds this many pages. A
/// journal shipped because it grew is not waited for (the service applies it while the
/// client goes on, seeing its own changes through the overlay it keeps); this bounds
/// the memory that costs.
const OVERLAY_MAX_PAGES: usize = 8192;

/// Yields the processor this many times, trying again after each, before sleeping on
/// a held state (see [`lock`]).
const LOCK_YIELDS: u32 = 8;

/// The lock over a client's state: shared by the threads that only read what libFS
/// has cached (see `client::shared`), exclusive for everything else.
pub(super) type StateLock = std::sync::RwLock<State>;

/// The state, locked for one operation that may change it.
pub type StateGuard<'a> = std::sync::RwLockWriteGuard<'a, State>;

/// The state, locked for an operation that only reads what libFS has cached.
pub type SharedState<'a> = std::sync::RwLockReadGuard<'a, State>;

/// Locks the state, yielding the processor a few times before sleeping on it.
///
/// std's locks put a thread to sleep at once when others already sleep on the lock,
/// and each sleep costs two context switches and a wake-up that often finds the lock
/// taken again. With many threads of one process (FileBench's 16 varmail threads on 2
/// processors) that doubled varmail's iteration (1,880-2,370 µs against 1,110-1,330
/// with the yields, in alternated runs); a thread that yields instead lets the holder
/// run and usually finds the state free when it is back (fileserver x50 and webproxy
/// x100 moved within their run-to-run spread). 2 yields did worse than 8 and 32 no
/// better; yielding only while fewer threads yield than there are processors lost the
/// gain.
pub(super) fn lock(m: &StateLock) -> StateGuard<'_> {
    let mut g = yielding(|| m.try_write(), || m.write());
    g.holds = g.holds.wrapping_add(1);
    g
}

/// Locks the state shared with other readers, as [`lock`] does.
pub(super) fn lock_shared(m: &StateLock) -> SharedState<'_> {
    yielding(|| m.try_read(), || m.read())
}

/// A guard from `try_take`, tried again after each of [`LOCK_YIELDS`] yields, then
/// from `take`, which sleeps. A caller that panicked holding the state leaves it as
/// consistent as any operation's early return would, so poisoning is ignored.
fn yielding<G>(
    try_take: impl Fn() -> std::sync::TryLockResult<G>,
    take: impl FnOnce() -> std::sync::LockResult<G>,
) -> G {
    for _ in 0..LOCK_YIELDS {
        match try_take() {
            Ok(g) => return g,
            Err(std::sync::TryLockError::Poisoned(e)) => return e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => std::thread::yield_now(),
        }
    }
    take().unwrap_or_else(|e| e.into_inner())
}

/// The open-file table, locked (a panic elsewhere leaves it consistent: every change
/// is one map operation).
fn open_files(
    m: &std::sync::Mutex<FxHashMap<u64, (u32, bool)>>,
) -> std::sync::MutexGuard<'_, FxHashMap<u64, (u32, bool)>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How this client reaches a domain's data.
pub(crate) enum DataSpace {
    /// Through a mapping (read-only, or read-write if it may write the domain), shared
    /// with the copies in flight ([`super::copies`]).
    Mapped(Arc<Map>),
    /// Through the service: the client may write the domain but not read it.
    WriteOnly,
}

/// What libFS keeps per mounted volume.
pub struct State {
    pub(super) meta: ReadOnly,
    pub(super) sb: Superblock,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) overlay: Changes,
    /// Pages the local check ([`State::record_all`]) read from the mapping and found
    /// sound, and pages of the overlay the service wrote exactly as the overlay showed
    /// them ([`State::ship`]): libFS reads the same domain table, bitmap, inode and
    /// directory pages operation after operation, and each read from the mapping is a
    /// 4 KiB copy (from another core's cache, where the service just wrote it) and a
    /// checksum. They are stale only where others changed what no lease of this client
    /// covers (the service checks every batch again anyway); they go with every lease
    /// acquired or given back ([`State::forget_cached`]), where the service wrote a page
    /// otherwise than the overlay showed or without listing what it wrote, and where it
    /// changed them for this client (a new domain, reserved pages and inodes, a change
    /// of attributes, a close that may free an unlinked file). Reads outside the check
    /// ([`State::with_view`]) use only those of objects under leases (see
    /// [`Overlay::with_clean`]).
    pub(super) clean: Clean,
    /// Pages the journal not yet shipped changes (what one service transaction holds).
    pub(super) batch_pages: FxHashSet<u64>,
    /// Requests (ships, registrations, releases) whose replies were not waited for yet,
    /// and whether each carried a batch.
    pub(super) inflight: Vec<(u64, bool)>,
    /// The metadata pages the service wrote for the batches applied since the overlay
    /// was last dropped, with their trailers, as its replies listed them (`None`: a
    /// batch was applied without a list). See [`State::ship`].
    pub(super) written: Option<FxHashMap<u64, u64>>,
    pub(super) journal: super::recorded::Recorded,
    /// Inodes reserved to this client (looked up and removed by every create).
    pub(super) inodes: BTreeSet<u64>,
    /// Data pages reserved to this client, by domain, as runs: every page a batch uses
    /// is looked up and removed, a KVFS object's extent in one step.
    pub(super) pages: FxHashMap<u16, PagePool>,
    /// Data pages reserved to this client that a write holds while it copies data into
    /// them outside the state, before it records them (see [`State::claim_pages`]): no
    /// other write takes them, and the local check takes them as reserved.
    pub(super) claimed: FxHashMap<u16, PagePool>,
    pub(super) domains: FxHashMap<u16, DataSpace>,
    pub(super) my_domains: FxHashMap<u32, u16>,
    /// Names looked up or created, per directory: looked up by `&str`, with no
    /// allocation per lookup.
    pub(super) names: FxHashMap<u64, FxHashMap<String, u64>>,
    /// Open files: inode -> (local opens, whether the service knows of them). Behind
    /// a lock of its own: opens and most closes take the state shared.
    pub(super) opens: std::sync::Mutex<FxHashMap<u64, (u32, bool)>>,
    pub(super) cache: MetaCache,
    pub(super) inode_batch: u32,
    pub(super) page_batch: u32,
    /// The next inode batch, asked for and not yet collected.
    pub(super) inode_refill: Option<u64>,
    /// The next page batch of each domain, asked for and not yet collected.
    pub(super) page_refill: FxHashMap<u16, u64>,
    /// Where the local check's metadata page search starts (next-fit, as the service's).
    pub(super) meta_cursor: u64,
    /// Fsyncs waiting outside the state for batches they sent (see `client::group`),
    /// and the last request any of them waits for.
    pub(super) flights: Vec<Arc<super::group::Flight>>,
    pub(super) outside_last: u64,
    /// Bumped whenever the overlay goes: replies read for an older overlay say nothing
    /// about the pages of the current one.
    pub(super) overlay_gen: u64,
    /// Losses of acknowledged operations so far (a sequence, like the kernel's errseq:
    /// each open file reports each loss once) and what the last one was.
    pub(super) lost: u64,
    pub(super) lost_why: String,
    pub(super) conn: Arc<Conn>,
    /// File data copies in flight outside this state (see [`super::copies`]).
    pub(super) copies: Arc<Copies>,
    /// Exclusive holds of the state so far ([`lock`]): what a reader under the shared
    /// state read stays what the exclusive path would read until the next one.
    pub(super) holds: u64,
}

pub(super) struct LocalAuth<'a> {
    pub cred: (u32, u32),
    pub leases: &'a LeaseTable,
    pub inodes: &'a BTreeSet<u64>,
    pub pages: &'a FxHashMap<u16, PagePool>,
    pub claimed: &'a FxHashMap<u16, PagePool>,
    pub opens: &'a FxHashMap<u64, (u32, bool)>,
    pub now: u64,
}

impl Authority for LocalAuth<'_> {
    fn cred(&self) -> (u32, u32) {
        self.cred
    }
    fn holds_lease(&self, ino: u64) -> bool {
        self.leases.covers(ino, true)
    }
    fn inode_reserved(&self, ino: u64) -> bool {
        self.inodes.contains(&ino)
    }
    fn page_reserved(&self, d: u16, p: u64) -> bool {
        let held = |m: &FxHashMap<u16, PagePool>| m.get(&d).is_some_and(|v| v.contains(p));
        held(self.pages) || held(self.claimed)
    }
    fn first_unreserved(&self, d: u16, first: u64, count: u64) -> Option<u64> {
        // Reserved is in the pool or claimed: skip what either holds, page by page
        // where they alternate.
        let end = first.saturating_add(count);
        let missing = |m: &FxHashMap<u16, PagePool>, at: u64| match m.get(&d) {
            Some(v) => v.first_missing(at, end - at),
            None => Some(at),
        };
        let mut at = first;
        while at < end {
            at = missing(self.pages, at)?;
            if !self.claimed.get(&d).is_some_and(|v| v.contains(at)) {
                return Some(at);
            }
            at = missing(self.claimed, at).unwrap_or(end);
        }
        None
    }
    fn is_open(&self, ino: u64) -> bool {
        self.opens.contains_key(&ino)
    }
    fn seals_changes(&self) -> bool {
        false
    }
    fn now(&self) -> u64 {
        self.now
    }
}

impl State {
    /// A checked view of the metadata as this client sees it (its own changes included).
    pub fn with_view<T>(
        &mut self,
        f: impl FnOnce(&mut MediaView<'_, Overlay<'_, ReadOnly>>) -> Result<T>,
    ) -> Result<T> {
        // Torn pages (the service rewriting one in place) are re-read by the overlay.
        let mut o = Overlay::with_clean(&mut self.meta, &self.overlay, &self.clean);
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
        self.clean.clear();
    }

    /// Forgets the cached copy of inode `ino` and its page map only: the next read of
    /// them goes to the mapping.
    pub fn forget_cached_inode(&mut self, ino: u64) {
        self.cache.forget_inode(ino);
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

    /// Whether the client holds a lease covering `key` (on it or above it).
    ///
    /// A bucket's key, a bucket's names key and a file's key are covered by their own
    /// leases (the key's, its bucket's) or by whatever covers their directory; only a
    /// directory's ancestry is walked up the tree, and what is found covered is
    /// remembered ([`MetaCache::is_covered`]), so the walk is done about once per
    /// directory and a create or an unlink reads at most the file's own inode.
    pub fn covered(&mut self, key: u64, exclusive: bool) -> bool {
        if self.known_covered(key, exclusive) {
            return true;
        }
        let hit = match self.in_front_of_directory(key) {
            Some((front, dir)) => {
                self.holds_one_of(&front, exclusive) || self.directory_covered(dir, exclusive)
            }
            None => self.directory_covered(key, exclusive),
        };
        if hit {
            self.cache.put_covered(key, exclusive);
        }
        hit
    }

    /// Whether the client holds leases covering every `(key, exclusive)` of `keys`.
    pub fn covers_all(&mut self, keys: &[(u64, bool)]) -> bool {
        keys.iter().all(|&(k, e)| self.covered(k, e))
    }

    /// Whether `key` was found covered since the client last lost a lease.
    fn known_covered(&mut self, key: u64, exclusive: bool) -> bool {
        let l = self.conn.leases.lock().unwrap_or_else(|e| e.into_inner());
        self.cache.covered_since(l.losses());
        self.cache.is_covered(key, exclusive)
    }

    /// Whether the client holds a lease on one of `keys` strong enough.
    fn holds_one_of(&self, keys: &[u64], exclusive: bool) -> bool {
        let l = self.conn.leases.lock().unwrap_or_else(|e| e.into_inner());
        keys.iter().any(|&k| l.covers(k, exclusive))
    }

    /// The keys in front of `key`'s directory in its lease ancestry, and that
    /// directory: for a bucket's key, a bucket's names key and a file's key (whose
    /// inode is read through the inode cache). `None` for a directory, or an object
    /// whose inode cannot be read: its ancestry is walked.
    fn in_front_of_directory(&mut self, key: u64) -> Option<([u64; 2], u64)> {
        match (bucket_of_key(key), names_of_key(key)) {
            (Some((d, _)), _) => Some(([key, key], d)),
            (None, Some((d, b))) => Some(([key, bucket_key(d, b)], d)),
            (None, None) => match self.inode(key) {
                Ok(i) if i.kind != Kind::Dir && i.parent != 0 && i.parent != key => {
                    Some(([key, bucket_key(i.parent, i.bucket as u64)], i.parent))
                }
                _ => None,
            },
        }
    }

    /// Whether a lease covers directory `dir` (or what stands in for one: see
    /// [`State::in_front_of_directory`]): up its ancestry, walked once and cached,
    /// stopping at the first key found covered before.
    fn directory_covered(&mut self, dir: u64, exclusive: bool) -> bool {
        self.walk_ancestry(dir);
        let l = self.conn.leases.lock().unwrap_or_else(|e| e.into_inner());
        self.cache.covered_since(l.losses());
        let up = self.cache.ancestry(dir).unwrap_or_default();
        let hit = up
            .iter()
            .any(|&x| self.cache.is_covered(x, exclusive) || l.covers(x, exclusive));
        drop(l);
        if hit {
            self.cache.put_covered(dir, exclusive);
        }
        hit
    }

    /// Caches the ancestry of `key` walked up the tree (bounded however the parent
    /// fields loop), unless it is cached already.
    fn walk_ancestry(&mut self, key: u64) {
        if self.cache.ancestry(key).is_none() {
            let up = self.with_view(|v| Ok(ancestry(v, key))).unwrap_or_default();
            self.cache.put_ancestry(key, up);
        }
    }

    /// Records `op` after checking it locally exactly as the service will.
    pub fn record(&mut self, op: Op) -> Result<()> {
        self.record_all(vec![op])
    }

    /// Records `ops` (all or none) after checking them locally exactly as the service
    /// will; one check of several operations reads the pages they share once.
    ///
    /// The check runs over the overlay itself, handed to it and handed back changed in
    /// place (see [`crate::txn::Txn::over_own_pages`]): no page is copied per
    /// operation. A refused check leaves no overlay behind, so the client then waits
    /// for the service to apply what it showed (`State::rebuild_overlay`): a
    /// round trip on an error path only.
    pub fn record_all(&mut self, ops: Vec<Op>) -> Result<()> {
        let conn = self.conn.clone();
        // Held across the check so a revocation cannot slip between check and record
        // (the revoker needs the state lock, which the caller holds, to act anyway).
        let leases = conn.leases.lock().unwrap_or_else(|e| e.into_inner());
        let sb = self.sb;
        let own = std::mem::take(&mut self.overlay);
        let clean = std::mem::take(&mut self.clean);
        let cover = self.cache.take_checked(leases.losses());
        let now = now_ns();
        let checked = {
            let auth = LocalAuth {
                cred: (self.uid, self.gid),
                leases: &leases,
                inodes: &self.inodes,
                pages: &self.pages,
                claimed: &self.claimed,
                opens: self.opens.get_mut().unwrap_or_else(|e| e.into_inner()),
                now,
            };
            let none = Changes::default();
            let mut o = Overlay::for_txn(&mut self.meta, &none);
            let carried = (self.meta_cursor, own, clean, cover);
            apply_batch_over(&mut o, sb, &auth, &ops, carried)
        };
        drop(leases);
        let out = match checked {
            Ok(out) => out,
            Err(r) => {
                self.rebuild_overlay();
                return Err(FsError::Invalid(r.why));
            }
        };
        self.meta_cursor = out.meta_cursor;
        // Pages the batch freed go too: freeing leaves a page's contents as they were,
        // and the service may put another file's index page there, at a page this
        // client's own check of that later batch did not choose (the service places
        // pages from its own cursor). A cached copy would then show the old file's
        // page map under the new file (tests/freed_radix_pages.rs).
        let changed = out.changed.iter().copied();
        self.cache
            .refresh_written(&sb, changed, &out.written_inodes, &out.changes);
        self.cache
            .forget_pages(&sb, out.freed_meta_pages.iter().copied());
        self.batch_pages.extend(out.changed.iter().copied());
        self.overlay = out.changes;
        self.clean = out.clean;
        self.cache.put_checked(out.covered);
        if self.clean.len() > OVERLAY_MAX_PAGES {
            self.clean.clear();
        }
        for i in &out.used_inodes {
            self.inodes.remove(i);
        }
        for &(d, first, count) in &out.used_pages {
            for pool in [&mut self.pages, &mut self.claimed] {
                if let Some(v) = pool.get_mut(&d) {
                    v.remove_range(first, first + count);
                }
            }
        }
        if !out.freed_inodes.is_empty() {
            // A lease on a freed inode names nothing (the service forgets it too).
            let mut l = conn.leases.lock().unwrap_or_else(|e| e.into_inner());
            for ino in &out.freed_inodes {
                l.remove(ino);
            }
        }
        self.note_names(&ops);
        // The service stamps what these change with the time this check stamped, so
        // the pages it writes are the ones the overlay holds and the cache keeps them
        // when the overlay goes (`keep_what_the_service_wrote`).
        self.journal.push(now, ops);
        if self.overlay.len() > OVERLAY_MAX_PAGES {
            self.ship()?;
        } else if self.journal.ops() >= SHIP_OPS
            || self.batch_pages.len() as u64 > crate::redo::capacity(&self.sb) / 2
            || self.nothing_in_flight()
        {
            self.send_journal()?;
        }
        Ok(())
    }

    /// Whether no batch of this client is in flight or waited for by an fsync outside
    /// the state, and no copy of file data is in flight (which a batch would wait for,
    /// since it may free the pages copied): the service then has nothing of this
    /// client to do, so what is recorded now is sent at once, not held for the next
    /// fsync. The service applies it while the caller goes on, and that fsync waits
    /// only for what was recorded after it. Varmail's first fsync followed a delete, a
    /// create and an append: the delete is now applied while the file is created and
    /// written. What is recorded while a batch is in flight waits, as before, for a
    /// later batch (with many threads, group commit's fsyncs keep one in flight most
    /// of the time, so their batches stay as large as they were). Between two waits
    /// this is one batch more: a commit of the service's, off the caller's path.
    fn nothing_in_flight(&self) -> bool {
        self.inflight.is_empty() && self.flights.is_empty() && self.copies.idle()
    }

    /// Keeps the name cache in step with recorded operations.
    fn note_names(&mut self, ops: &[Op]) {
        for op in ops {
            match op {
                // A file's ancestry is its own: the inode may name another file soon.
                Op::Unlink { parent, name, ino } => {
                    if let Some(d) = self.names.get_mut(parent) {
                        d.remove(name);
                    }
                    self.cache.forget_ancestry(*ino);
                }
                Op::Rmdir { parent, name, .. } => {
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
                    ..
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
                }
                | Op::Link { parent, name, ino } => {
                    self.names
                        .entry(*parent)
                        .or_default()
                        .insert(name.clone(), *ino);
                }
                _ => {}
            }
        }
    }

    /// After a refused local check, which consumed the overlay: waits for the service
    /// to apply everything recorded before (what the overlay showed), so that the
    /// mapping shows it, and forgets what was read through the lost overlay. A batch
    /// the service refuses on the way is a loss like any other ([`State::ship`]).
    fn rebuild_overlay(&mut self) {
        let _ = self.ship();
        self.forget_cached();
    }

    /// Notes that operations the application was told had succeeded were lost; the
    /// next fsync or close of every file open now, and the next sync, report it.
    pub(crate) fn record_loss(&mut self, why: &str) {
        self.lost += 1;
        self.lost_why = why.to_string();
    }

    /// Losses of acknowledged operations so far (see [`State::lost_since`]).
    pub fn losses(&self) -> u64 {
        self.lost
    }

    /// The error to report to a holder that has seen `seen` losses, if there was one
    /// since.
    pub fn lost_since(&self, seen: u64) -> Option<FsError> {
        (self.lost > seen).then(|| FsError::Lost(self.lost_why.clone()))
    }

    /// Ships the journal and waits for the service to apply it and every batch
    /// shipped before (fsync); then drops the overlay, which the mapping now shows.
    /// A batch the service refused is a loss of what it held (see
    /// `State::record_loss`) and the error returned.
    pub fn ship(&mut self) -> Result<()> {
        let sent = self.send_journal();
        self.finish_ship(sent)
    }

    /// [`State::ship`] once the journal was sent (`sent`: how that went).
    pub(super) fn finish_ship(&mut self, sent: Result<()>) -> Result<()> {
        let r = sent
            .and_then(|_| self.wait_inflight())
            .and_then(|_| self.wait_outside());
        if let Err(e) = &r {
            self.record_loss(&e.to_string());
        }
        self.drop_overlay(r.is_ok());
        r.map_err(|e| FsError::Lost(e.to_string()))
    }

    /// Drops the overlay once the service has applied every batch it shows (`ok`: and
    /// refused none): the mapping now shows what the service made of them.
    pub(super) fn drop_overlay(&mut self, ok: bool) {
        self.overlay_gen += 1;
        self.cache.forget_checked();
        let written = self.written.replace(FxHashMap::default());
        match written {
            Some(w) if ok => self.keep_what_the_service_wrote(&w),
            _ => {
                self.clean.clear();
                let pages: Vec<u64> = std::mem::take(&mut self.overlay).into_keys().collect();
                if ok {
                    // The service may have placed directory and radix pages elsewhere
                    // than this client did: what was read from the pages the batches
                    // changed goes. Everything else was read under leases still held
                    // and stands, names included (they map to inode numbers the client
                    // chose itself).
                    let sb = self.sb;
                    self.cache.forget_pages(&sb, pages.into_iter());
                } else if !pages.is_empty() {
                    self.forget_cached();
                }
            }
        }
    }

    /// Drops the overlay once the service applied it and listed the pages it wrote
    /// (`written`: page number -> trailer). A page the service wrote exactly as this
    /// client's overlay shows it (the same checksum and kind once sealed) is kept as a
    /// clean page, and what was read through it stands: no copy of it is read back
    /// from the mapping. Every other page the overlay or the service changed goes, with
    /// what was read through it (the service places directory and radix pages from its
    /// own cursor, and another client may have changed a page both wrote). Clean pages
    /// the service did not write stay, stale only where a page no lease of this client
    /// covers changed, as between ships.
    fn keep_what_the_service_wrote(&mut self, written: &FxHashMap<u64, u64>) {
        let mut gone = Vec::new();
        let mut kept = FxHashSet::default();
        for (pno, mut img) in std::mem::take(&mut self.overlay) {
            match written.get(&pno) {
                Some(&trailer) if seals_to(&mut img, trailer) => {
                    self.clean.insert(pno, img);
                    kept.insert(pno);
                }
                _ => gone.push(pno),
            }
        }
        gone.extend(written.keys().filter(|p| !kept.contains(p)));
        for pno in &gone {
            self.clean.remove(pno);
        }
        let sb = self.sb;
        self.cache.forget_pages(&sb, gone.into_iter());
        if self.clean.len() > OVERLAY_MAX_PAGES {
            self.clean.clear();
        }
    }

    /// Ships the journal without waiting for the service to apply it.
    pub(super) fn send_journal(&mut self) -> Result<()> {
        // The batch may free pages that copies in flight still read or write.
        self.copies.wait_idle();
        if self.journal.is_empty() {
            return Ok(());
        }
        // The service decides whether an unlinked file is freed or kept as an orphan by
        // whether it is open, so it must learn of the open files this batch unlinks (or
        // replaces by a rename).
        let unlinked: Vec<u64> = self
            .journal
            .iter()
            .filter_map(|op| match op {
                Op::Unlink { ino, .. } => Some(*ino),
                Op::Rename { replace, .. } if *replace != 0 => Some(*replace),
                _ => None,
            })
            .collect();
        if let Some(inos) = self.register_opens(|ino| unlinked.contains(&ino)) {
            let id = self.conn.send(&Request::Opened { inos }, &[])?;
            self.inflight.push((id, false));
        }
        let batch = encode_batch(&self.journal);
        self.journal.clear();
        self.batch_pages.clear();
        let id = self.conn.send(&Request::Ship, &batch)?;
        self.inflight.push((id, true));
        Ok(())
    }

    /// Waits for the replies to everything shipped; the first refusal is the answer.
    /// Notes the pages the service says it wrote for each batch ([`State::written`]).
    pub(super) fn wait_inflight(&mut self) -> Result<()> {
        let mut first = Ok(());
        for (id, batch) in std::mem::take(&mut self.inflight) {
            match self.conn.wait(id) {
                Ok((Reply::Shipped { written }, _)) => {
                    if let Some(w) = &mut self.written {
                        w.extend(written.chunks_exact(2).map(|p| (p[0], p[1])));
                    }
                }
                Ok(_) if batch => self.written = None,
                Ok(_) => {}
                Err(e) => {
                    self.written = None;
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
        }
        first
    }

    /// Marks the open files `pick` selects among those the service does not know of as
    /// known, and returns them (None: there are none) for an `Opened` request.
    pub(super) fn register_opens(&mut self, pick: impl Fn(u64) -> bool) -> Option<Vec<u64>> {
        let mut inos = Vec::new();
        let opens = self.opens.get_mut().unwrap_or_else(|e| e.into_inner());
        for (&ino, (_, known)) in opens.iter_mut() {
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
                let mut o = Overlay::with_clean(&mut self.meta, &self.overlay, &self.clean);
                let mut c = CachedRadix {
                    inner: &mut MediaView::with_sb(&mut o, self.sb),
                    cache: &mut self.cache,
                    own: &self.overlay,
                };
                let r = radix::lookup(&mut c, inode, index);
                if let Ok(p) = r {
                    self.cache.put_leaf(ino, index, p);
                }
                r
            }
            _ => self.with_view(|v| radix::lookup(v, inode, index)),
        }
    }

    /// [`State::page_of`] for pages `first..=last` of file `ino`: the file's inode is
    /// checked against the cache and its page map looked up once when all of them are
    /// cached (a whole-file read of a web server's file, under the state every other
    /// thread of the process waits for).
    pub fn pages_of(&mut self, ino: u64, inode: &Inode, first: u64, last: u64) -> Result<Vec<u64>> {
        if inode.kind != Kind::Kv
            && self.cache.inode(ino) == Some(*inode)
            && let Some(v) = self.cache.leaves(ino, first, last)
        {
            return Ok(v);
        }
        (first..=last)
            .map(|i| self.page_of(ino, inode, i))
            .collect()
    }

    /// Notes that the client holds `ino` open. The service hears of it only if it
    /// must (see the module documentation). Needs the state shared only.
    pub fn note_open(&self, ino: u64) {
        open_files(&self.opens).entry(ino).or_insert((0, false)).0 += 1;
    }

    /// Notes a close of `ino` if it needs nothing but the count of opens: another open
    /// of it remains, or the service does not know of it. Needs the state shared only;
    /// false (nothing noted) if the close is one for [`State::note_close`].
    pub fn note_close_locally(&self, ino: u64) -> bool {
        let mut opens = open_files(&self.opens);
        match opens.get_mut(&ino) {
            None => true,
            Some(o) if o.0 > 1 => {
                o.0 -= 1;
                true
            }
            Some(o) if !o.1 => {
                opens.remove(&ino);
                true
            }
            Some(_) => false,
        }
    }

    /// Notes that the client closed `ino` once; tells the service when the last local
    /// open of a file it knows of is gone, so it can free the file if it was unlinked.
    pub fn note_close(&mut self, ino: u64) -> Result<()> {
        if self.note_close_locally(ino) {
            return Ok(());
        }
        self.opens
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ino);
        // A pending unlink of the object must reach the service before the close that
        // lets it free the object.
        if self.journal.iter().any(|op| {
            matches!(op, Op::Unlink { ino: i, .. } if *i == ino)
                || matches!(op, Op::Rename { replace, .. } if *replace == ino)
        }) {
            self.ship()?;
        }
        // The service may free the object now (an unlinked file's last close), changing
        // pages kept clean since the last ship, and giving its data pages to another
        // file while a copy of this process still reads or writes them.
        self.clean.clear();
        self.copies.wait_idle();
        self.conn.call(&Request::Close { ino }, &[]).map(|_| ())
    }

    /// Open files the service knows of (registered when a lease was given back or an
    /// unlink shipped), sorted.
    pub fn registered_opens(&self) -> Vec<u64> {
        let mut v: Vec<u64> = open_files(&self.opens)
            .iter()
            .filter(|(_, o)| o.1)
            .map(|(i, _)| *i)
            .collect();
        v.sort_unstable();
        v
    }

    /// Journal records not yet shipped: the operations recorded, each group of them
    /// after the [`Op::Stamp`] of its time.
    pub fn pending_ops(&self) -> &[Op] {
        &self.journal
    }

    /// The client's credentials as the kernel reported them to the service.
    pub fn cred(&self) -> (u32, u32) {
        (self.uid, self.gid)
    }
}

/// Seals `img` as the page whose trailer (checksum and kind) is `trailer` and says
/// whether it then carries exactly that trailer: whether its body is the one the
/// service sealed, up to a CRC-32 collision.
fn seals_to(img: &mut crate::media::PageBuf, trailer: u64) -> bool {
    use crate::media::{BODY, Tag, le, seal};
    let Some(tag) = Tag::from_u32((trailer >> 32) as u32) else {
        return false;
    };
    seal(img, tag);
    le::u64_at(&img[..], BODY) == trailer
}

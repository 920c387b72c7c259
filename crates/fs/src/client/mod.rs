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
//!
//! A batch is checked locally with the service's own validator before anything is
//! recorded, so a batch of a client that keeps to its leases is never refused. The
//! check runs over the overlay itself, changing its page images in place (no page is
//! copied per operation), and over the pages it read from the mapping before, kept
//! while the overlay stands (see `State::record_all`). If the
//! service still refuses one (it took the client's leases after a lease timeout, a
//! limit was reached, the connection went), the operations in it, which the
//! application was told had succeeded, are lost: the loss is kept and reported as EIO
//! ([`FsError::Lost`]) by the next fsync and close of every file open at the time and
//! by the next sync of the mount, the way the kernel reports writeback errors.

mod conn;
mod copies;
mod data;
mod granularity;
mod group;
mod leases;
mod recorded;
mod reserve;
mod revoke;
mod shared;
mod state;

pub use copies::{COPY_OUTSIDE_MIN, Copy};
pub use granularity::CONTENDED_FOR;
pub use reserve::ExtentAsk;
pub use shared::{Reach, Reader};
pub use state::{SHIP_OPS, SharedState, State, StateGuard};

use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;

use crate::error::{FsError, Result};
use crate::inode::{Kind, access};
use crate::layout::{ROOT_INO, Superblock};
use crate::lease::{bucket_of_key, names_of_key};
use crate::map::{Map, ReadOnly};
use crate::proto::{self, Reply, Request};
use crate::txn::Changes;
use conn::Conn;
use reserve::RESERVE_FIRST;
use state::StateLock;

/// How long a write refused for the client's reservation limit waits for other
/// threads' writes to record the pages they claimed ([`Client::past_claims`]).
pub const CLAIMS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A connection to the service: the mount of one volume.
pub struct Client {
    conn: Arc<Conn>,
    state: Arc<StateLock>,
    client_id: u64,
    /// The client's end of the revocation socket (shut down to stop the revoker).
    rev: UnixStream,
    revoker: Option<std::thread::JoinHandle<()>>,
    /// Threads inside a read under the shared state now (see [`Client::shared_reach`]).
    readers: std::sync::atomic::AtomicUsize,
}

impl Client {
    /// Connects to the service listening on `socket` and maps the volume read-only.
    pub fn connect(socket: &Path) -> Result<Client> {
        let s = UnixStream::connect(socket)
            .map_err(|e| FsError::io(format!("connect {}", socket.display()), e))?;
        let Some((body, fds)) = proto::recv_frame(&s)? else {
            return Err(FsError::Protocol(
                "the service closed the connection".into(),
            ));
        };
        let (_, welcome) =
            proto::decode_reply(&body).map_err(|e| FsError::Protocol(format!("welcome: {e}")))?;
        let mut fds = fds.into_iter();
        let (Reply::Welcome { client, uid, gid }, Some(meta_fd), Some(rev_fd), Some(rings_fd)) =
            (welcome, fds.next(), fds.next(), fds.next())
        else {
            return Err(FsError::Protocol(
                "expected a welcome with the metadata, revocation and ring descriptors".into(),
            ));
        };
        let rings = crate::proto::ring::Rings::open(&rings_fd)?;
        let file = std::fs::File::from(meta_fd);
        let mut meta = ReadOnly(Map::of_file(&file, false)?);
        let sb = Superblock::read(&mut meta)?;
        let rev = UnixStream::from(rev_fd);
        let conn = Arc::new(Conn::new(s, rings));
        let state = Arc::new(StateLock::new(State {
            meta,
            sb,
            uid,
            gid,
            overlay: Changes::default(),
            clean: Default::default(),
            batch_pages: Default::default(),
            inflight: Vec::new(),
            written: Some(Default::default()),
            journal: Default::default(),
            inodes: BTreeSet::new(),
            pages: FxHashMap::default(),
            claimed: FxHashMap::default(),
            domains: FxHashMap::default(),
            my_domains: FxHashMap::default(),
            names: FxHashMap::default(),
            opens: Default::default(),
            cache: Default::default(),
            inode_batch: RESERVE_FIRST,
            page_batch: RESERVE_FIRST,
            inode_refill: None,
            page_refill: FxHashMap::default(),
            meta_cursor: sb.pool_first,
            flights: Vec::new(),
            outside_last: 0,
            overlay_gen: 0,
            holds: 0,
            lost: 0,
            lost_why: String::new(),
            conn: conn.clone(),
            copies: Default::default(),
        }));
        let rev2 = rev
            .try_clone()
            .map_err(|e| FsError::io("dup the revocation socket", e))?;
        let (c2, s2) = (conn.clone(), state.clone());
        let revoker = std::thread::spawn(move || revoke::revoker(rev2, c2, s2));
        Ok(Client {
            conn,
            state,
            client_id: client,
            rev,
            revoker: Some(revoker),
            readers: Default::default(),
        })
    }

    /// The lease to hold while looking `name` up in directory `dir`: the directory, or
    /// only the names of its bucket holding `name` while others work in it (see
    /// `client::granularity`).
    pub fn lookup_key(&self, dir: u64, name: &str) -> u64 {
        crate::lease::names_key(dir, crate::dir::bucket_of(name))
    }

    /// The lease to hold, exclusive, while adding, removing or replacing the entry
    /// `name` of directory `dir`: the directory, or only the bucket holding `name`
    /// while others work in it.
    pub fn entry_key(&self, dir: u64, name: &str) -> u64 {
        crate::lease::bucket_key(dir, crate::dir::bucket_of(name))
    }

    /// Requests sent to the service so far (each takes a round trip).
    pub fn requests_sent(&self) -> u64 {
        self.conn.requests_sent()
    }

    /// Lease revocations this client answered so far (each ships its journal and
    /// gives a lease back).
    pub fn revocations_answered(&self) -> u64 {
        self.conn
            .revocations
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The number the service gave this client.
    pub fn id(&self) -> u64 {
        self.client_id
    }

    /// Locks the client state for one operation.
    pub fn state(&self) -> StateGuard<'_> {
        // A caller that panicked holding the state leaves it as consistent as any
        // operation's early return would; the unmount that follows still needs it.
        state::lock(&self.state)
    }

    /// Runs `read` (copies out of domain `d`'s data space) on `copy` outside the state,
    /// then lets the copy go. If `read` failed (another client cut the space short
    /// under the mapping), the mapping is dropped so that the next access maps it
    /// afresh.
    pub fn read_outside<T>(
        &self,
        copy: Copy,
        d: u16,
        read: impl FnOnce(&Copy) -> Result<T>,
    ) -> Result<T> {
        let r = read(&copy);
        drop(copy);
        if r.is_err() {
            self.state().drop_mapping(d);
        }
        r
    }

    /// Makes sure the client holds a lease covering `key`, shipping its journal first
    /// (a new lease may make other clients' changes visible, which the overlay would
    /// hide), and returns the locked state with the lease held.
    pub fn leased(&self, key: u64, exclusive: bool) -> Result<StateGuard<'_>> {
        self.leased_all(&[(key, exclusive)])
    }

    /// Makes sure the client holds leases covering every `(key, exclusive)` at once and
    /// returns the locked state with them held. Leases are asked for in key order, so
    /// that two clients asking for the same pair do not take one each and trade them
    /// back and forth.
    pub fn leased_all(&self, keys: &[(u64, bool)]) -> Result<StateGuard<'_>> {
        self.leased_keys(keys, false)
    }

    /// Like [`Client::leased_all`], but a bucket's key or a bucket's names key is
    /// first asked for as its whole directory, when no one else works there (see
    /// `client::granularity`): granted only if that takes nothing from anyone.
    pub fn leased_widening(&self, keys: &[(u64, bool)]) -> Result<StateGuard<'_>> {
        self.leased_keys(keys, true)
    }

    /// `s` back if the leases on `keys` are held, else the state from
    /// [`Client::leased_widening`] (`widen`) or [`Client::leased_all`], which unlock it
    /// while they ask.
    fn still_leased<'s>(
        &'s self,
        mut s: StateGuard<'s>,
        keys: &[(u64, bool)],
        widen: bool,
    ) -> Result<StateGuard<'s>> {
        if s.covers_all(keys) {
            return Ok(s);
        }
        drop(s);
        self.leased_keys(keys, widen)
    }

    fn leased_keys(&self, keys: &[(u64, bool)], widen: bool) -> Result<StateGuard<'_>> {
        // Nearly always every lease is held already: the answer then costs the
        // coverage checks and nothing else (no copy of the keys, no lists).
        let mut s = self.state();
        if s.covers_all(keys) {
            return Ok(s);
        }
        drop(s);
        let mut keys = keys.to_vec();
        keys.sort_unstable();
        let mut gave_back = false;
        for _ in 0..64 {
            let mut s = self.state();
            let missing: Vec<(u64, bool)> = keys
                .iter()
                .copied()
                .filter(|&(k, e)| !s.covered(k, e))
                .collect();
            if missing.is_empty() {
                return Ok(s);
            }
            // A refused batch is a loss, recorded for fsync and close to report; the
            // lease is still worth asking for.
            let _ = s.ship();
            drop(s);
            let mut wider = Vec::new();
            for (key, exclusive) in missing {
                if widen && let Some(dir) = self.try_directory(key, exclusive)? {
                    wider.push(dir);
                    continue;
                }
                match self.conn.call(&Request::Acquire { key, exclusive }, &[]) {
                    Ok(_) => {}
                    // The service caps the leases a client holds: give them all back
                    // (a lease is cheap to take again) and ask once more.
                    Err(FsError::NoSpace(m)) if m.contains("client limit") && !gave_back => {
                        self.give_back_leases()?;
                        gave_back = true;
                    }
                    Err(e) => return Err(e),
                }
            }
            // The ancestries cached before the grants may have led elsewhere, and what
            // was read of the objects the new leases cover (and of the directories
            // above them) without a lease covering it may be stale; what was read
            // under leases held all along stands.
            self.settle_grants(&keys, &wider);
        }
        Err(FsError::Refused(format!(
            "leases on {keys:?} revoked again and again"
        )))
    }

    /// Makes the leases just granted on `keys` (and the directories in `wider`) usable
    /// (see `LeaseTable::insert`): ships what the process's other threads recorded
    /// since the grants through pages read before them (an inode another client made
    /// under the new lease would read as free there), forgets what was read before,
    /// and settles them.
    fn settle_grants(&self, keys: &[(u64, bool)], wider: &[u64]) {
        let mut s = self.state();
        // A refused batch is a loss, recorded for fsync and close to report.
        let _ = s.ship();
        s.forget_before_grants(keys, !wider.is_empty());
        let mut l = self.conn.leases.lock().unwrap_or_else(|e| e.into_inner());
        l.settle(keys.iter().map(|k| k.0).chain(wider.iter().copied()));
    }

    /// Asks for the whole directory of bucket (or bucket's names) key `key` if no one
    /// else worked there lately, and only if the service can grant it at once; the
    /// directory if granted. A refusal of any kind (the client may search the
    /// directory but not read it, say) leaves the bucket to be asked for.
    fn try_directory(&self, key: u64, exclusive: bool) -> Result<Option<u64>> {
        let Some((dir, _)) = bucket_of_key(key).or_else(|| names_of_key(key)) else {
            return Ok(None);
        };
        if self.conn.contention.contended(dir) {
            return Ok(None);
        }
        let ask = Request::TryAcquire {
            key: dir,
            exclusive,
        };
        match self.conn.call(&ask, &[]) {
            Ok((Reply::Granted { grant }, _)) if grant != 0 => Ok(Some(dir)),
            Ok(_) => {
                // Someone else holds or waits for something there.
                self.conn.contention.revoked(dir);
                Ok(None)
            }
            Err(e @ FsError::Protocol(_)) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// Gives every lease back (after shipping the journal and registering open files,
    /// as a revocation does).
    fn give_back_leases(&self) -> Result<()> {
        let mut s = self.state();
        let _ = s.ship();
        if let Some(inos) = s.register_opens(|_| true) {
            self.conn.call(&Request::Opened { inos }, &[])?;
        }
        let held: Vec<(u64, u64)> = {
            let mut l = self.conn.leases.lock().unwrap_or_else(|e| e.into_inner());
            let v = l.iter().map(|(&k, &(_, g))| (k, g)).collect();
            l.clear();
            v
        };
        for (key, grant) in held {
            self.conn.call(&Request::Release { key, grant }, &[])?;
        }
        s.forget_cached();
        Ok(())
    }

    /// Runs `op` (a write that reserves data pages), again while it is refused for the
    /// client's reservation limit and other threads' writes in flight hold claimed
    /// pages ([`State::claim_pages`]): the service counts those as reserved and not
    /// used until their writes record them, which they do once this thread lets the
    /// state go. A refusal with nothing claimed is the client's own, and returned; so
    /// is one whose claims stay for [`CLAIMS_WAIT`] (the writes holding them wait for
    /// leases other clients must give back, or died).
    pub fn past_claims<T>(&self, mut op: impl FnMut() -> Result<T>) -> Result<T> {
        loop {
            match op() {
                Err(FsError::NoSpace(m)) if m.contains("client limit") => {
                    let claimed = self.state().claimed_pages();
                    let since = std::time::Instant::now();
                    if claimed == 0 {
                        return Err(FsError::NoSpace(m));
                    }
                    // Claims are held for one copy each: wait until some are recorded.
                    while self.state().claimed_pages() >= claimed {
                        if since.elapsed() > CLAIMS_WAIT {
                            return Err(FsError::NoSpace(m));
                        }
                        std::thread::yield_now();
                    }
                }
                r => return r,
            }
        }
    }

    /// Ships the journal and waits until the service has applied it (the durability
    /// point of metadata operations): outside the state, so that the process's other
    /// threads record operations meanwhile and their fsyncs share the next round trip
    /// (see `client::group`).
    pub fn sync(&self) -> Result<()> {
        group::sync(&self.conn, &self.state)
    }

    /// Waits until every data space this client maps is populated (on tmpfs, where a
    /// thread builds the page tables of a mapped space in the background, as SCM would
    /// be present from the start). A benchmark calls it before its timed phase, so that
    /// the populating thread does not compete with what is timed. The state is not held
    /// while waiting, so revocations are answered meanwhile.
    pub fn wait_populated(&self) {
        let signals = self.state().populated_signals();
        for s in signals {
            s.wait();
        }
    }

    /// Leases currently held: (object, exclusive).
    pub fn leases(&self) -> Vec<(u64, bool)> {
        let mut v: Vec<_> = self
            .conn
            .leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(a, b)| (*a, b.0))
            .collect();
        v.sort_unstable();
        v
    }

    /// Resolves an absolute path to (parent directory, last name, object if it exists),
    /// taking shared leases on the directories it walks. Every directory walked must
    /// be searchable by the client (the service refuses the leases too).
    pub fn resolve_parent<'p>(&self, path: &'p str) -> Result<(u64, &'p str, Option<u64>)> {
        self.resolve_parent_locked(path)
            .map(|(_, d, last, found)| (d, last, found))
    }

    /// [`Client::resolve_parent`], and the state still locked with the leases the walk
    /// used held: an open that goes on to lease the object takes the state once, not
    /// twice (with a hundred threads, every exclusive hold drains the readers first).
    pub fn resolve_parent_locked<'p>(
        &self,
        path: &'p str,
    ) -> Result<(StateGuard<'_>, u64, &'p str, Option<u64>)> {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        if !path.starts_with('/') {
            return Err(FsError::BadName {
                name: path.into(),
                why: "paths are absolute",
            });
        }
        let Some((last, dirs)) = comps.split_last() else {
            return Ok((self.state(), ROOT_INO, "", Some(ROOT_INO)));
        };
        let mut d = ROOT_INO;
        // The walk keeps the state locked from one directory to the next while the
        // leases it needs are held, and lets go only to ask for one that is not.
        let mut s = self.state();
        for c in dirs {
            s = self.still_leased(s, &[(self.lookup_key(d, c), false)], true)?;
            searchable(&mut s, d, path)?;
            d = s
                .lookup(d, c)?
                .ok_or_else(|| FsError::NotFound(path.into()))?;
            if s.inode(d)?.kind != Kind::Dir {
                return Err(FsError::WrongKind(format!(
                    "{c} in {path} is not a directory"
                )));
            }
        }
        let mut s = self.still_leased(s, &[(self.lookup_key(d, last), false)], true)?;
        searchable(&mut s, d, path)?;
        let last_ino = s.lookup(d, last)?;
        Ok((s, d, last, last_ino))
    }

    /// `s` back if it holds a lease covering `key` (exclusively, if `exclusive`), else
    /// the state from [`Client::leased`] (which unlocks it while it asks).
    pub fn keep_leased<'s>(
        &'s self,
        s: StateGuard<'s>,
        key: u64,
        exclusive: bool,
    ) -> Result<StateGuard<'s>> {
        self.still_leased(s, &[(key, exclusive)], false)
    }

    /// [`Client::keep_leased`] of several keys at once, each bucket's key first asked
    /// for as its whole directory (see [`Client::leased_widening`]).
    pub fn keep_leased_widening<'s>(
        &'s self,
        s: StateGuard<'s>,
        keys: &[(u64, bool)],
    ) -> Result<StateGuard<'s>> {
        self.still_leased(s, keys, true)
    }

    /// Resolves an absolute path to its object.
    pub fn resolve(&self, path: &str) -> Result<u64> {
        let (_, _, i) = self.resolve_parent(path)?;
        i.ok_or_else(|| FsError::NotFound(path.into()))
    }
}

/// Refuses a walk through directory `d` the client may not search.
fn searchable(s: &mut State, d: u64, path: &str) -> Result<()> {
    let i = s.inode(d)?;
    let (uid, gid) = s.cred();
    if !access(uid, gid, i.uid, i.gid, i.mode).exec {
        return Err(FsError::Denied(format!(
            "{path}: directory inode {d} is not searchable by uid {uid}"
        )));
    }
    Ok(())
}

impl State {
    /// Forgets, once new leases on `keys` are granted, every cached ancestry and the
    /// cached inodes of the objects on the keys' ancestries: they may have been read
    /// under a lease that did not cover them (a bucket's names do not cover the
    /// directory), and another client may have changed them before the grant.
    /// A lease on a whole directory or bucket covers objects whose inodes may have been
    /// read without a lease covering them (a name's object, looked up under the
    /// bucket's names lease): every cached inode goes then (`whole`, or a bucket key).
    fn forget_before_grants(&mut self, keys: &[(u64, bool)], whole: bool) {
        // Pages kept clean were read or written under the leases held before: a new
        // grant may cover objects others changed meanwhile.
        self.clean.clear();
        if whole || keys.iter().any(|&(k, _)| bucket_of_key(k).is_some()) {
            self.cache.clear();
            return;
        }
        let mut objects = Vec::new();
        for &(k, _) in keys {
            let up = self.cache.ancestry(k).map(|u| u.to_vec());
            let up = up.unwrap_or_else(|| {
                self.with_view(|v| Ok(crate::lease::ancestry(v, k)))
                    .unwrap_or_default()
            });
            objects.extend(up.into_iter().map(crate::lease::object_of_key));
        }
        self.cache.forget_ancestries();
        for o in objects {
            self.cache.forget_inode(o);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.sync();
        self.conn.shutdown();
        let _ = self.rev.shutdown(std::net::Shutdown::Both);
        if let Some(r) = self.revoker.take() {
            let _ = r.join();
        }
    }
}

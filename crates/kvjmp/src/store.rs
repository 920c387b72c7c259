//! A client of a store: it attaches the store's address spaces (read-only for GETs,
//! read-write for SETs when the kernel lets it), switches in and runs each command
//! itself, then switches home. There is no server process.
//!
//! In the registry a store `NAME` is the lockable segment `kv.NAME` and two VASes that
//! hold it, `kv.NAME.r` (read-only: GETs take the lock shared) and `kv.NAME.w`
//! (read-write: SETs take it exclusively). Whoever may write the segment file may
//! attach `kv.NAME.w`; others get only read-only mappings (the kernel decides).

use std::path::{Path, PathBuf};

use pmlab_native::{CpuPersistFeatures, PersistMode};
use pmlab_spine::Memory;
use pmlab_tx::{Area, FaultPlan, Protocol, Recovery, RedoProtocol};
use pmlab_vas::native::{Mechanism, MechanismChoice, NativeSpaces, SegLock};
use pmlab_vas::{Access, AttachTo, Mode, SegCtl, SegId, SpaceJmp, VasError, VasHandle};

use crate::dict::{self, SetEffect};
use crate::error::KvError;
use crate::heap::AllocError;
use crate::layout::{HEADER_LEN, Header, LOG_LEN, MAX_KEY, MAX_VALUE, MIN_SEGMENT, root};
use crate::persist::Persist;
use crate::scratch::Scratch;
use crate::segmem::{InPlace, SegMem};
use crate::view::View;

/// Bytes of each client's scratch heap.
pub const SCRATCH_BYTES: u64 = 1 << 20;

/// How SETs reach the segment: correctly, or one of the deliberately broken variants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Broken: SETs store in place with no log at all.
    pub in_place: bool,
    /// The redo protocol's own fault plan (broken recoveries and fences).
    pub tx: FaultPlan,
    /// Broken: SETs never recover first, even after a writer died (`recover` still
    /// does).
    pub never_recover: bool,
}

/// The store's registry names.
pub fn names(store: &str) -> (String, String, String) {
    (
        format!("kv.{store}"),
        format!("kv.{store}.r"),
        format!("kv.{store}.w"),
    )
}

/// One client of a store.
pub struct KvStore {
    name: String,
    spaces: NativeSpaces,
    sid: SegId,
    base: *mut u8,
    size: u64,
    seg_path: PathBuf,
    /// The segment file as errors name it.
    seg_what: String,
    lock: SegLock,
    ro: VasHandle,
    rw: Option<VasHandle>,
    header: Option<Header>,
    /// The flush instruction of the power domain (this CPU's best).
    flush_mode: PersistMode,
    /// The persistence domain this client's SETs commit to.
    persist: Persist,
    faults: Faults,
    scratch: Scratch,
    last_recovery: Option<Recovery>,
    dead_holders: Vec<u32>,
    /// The redo protocol of the last SET, attached again by the next one (its
    /// buffers kept; `None` until the first SET and after a change of domain or
    /// faults).
    redo: Option<RedoProtocol<SegMem>>,
    /// A SET's key and value copied out of the scratch heap, kept likewise.
    set_args: (Vec<u8>, Vec<u8>),
    /// The tables as the last SET left them: where the next SET prefetches its
    /// bucket before switching in (a hint; see [`dict::prefetch_slots`]).
    tables_seen: dict::Tables,
}

impl KvStore {
    /// Creates store `name` of `size` bytes in registry `dir`, with permission bits
    /// `mode` on its segment and VASes, and a hash seed; returns a writing client.
    pub fn create(
        dir: &Path,
        name: &str,
        size: u64,
        mode: Mode,
        seed: u64,
    ) -> Result<KvStore, KvError> {
        if size < MIN_SEGMENT {
            return Err(KvError::Invalid {
                field: "size",
                problem: format!("{size} bytes: a store needs at least {MIN_SEGMENT}"),
            });
        }
        let (seg, r, w) = names(name);
        let mut s = NativeSpaces::open(dir)?;
        let sid = s.seg_alloc(&seg, None, size, mode)?;
        s.seg_ctl(sid, SegCtl::SetLockable(true))?;
        let rv = s.vas_create(&r, mode)?;
        s.seg_attach(AttachTo::Vas(rv), sid, Access::ReadOnly)?;
        let wv = s.vas_create(&w, mode)?;
        s.seg_attach(AttachTo::Vas(wv), sid, Access::ReadWrite)?;
        drop(s);
        let mut store = Self::attach(dir, name, true, MechanismChoice::Auto)?;
        store.format(seed)?;
        Ok(store)
    }

    /// Opens store `name` in `dir` by name, for reading only or also for writing.
    pub fn open(dir: &Path, name: &str, write: bool) -> Result<KvStore, KvError> {
        Self::open_with(dir, name, write, MechanismChoice::Auto)
    }

    /// [`KvStore::open`] with the switch mechanism `choice` (`Resident`: no system call
    /// per request, and a switched-out store stays reachable from this process; see
    /// `pmlab_vas::native::protect`).
    pub fn open_with(
        dir: &Path,
        name: &str,
        write: bool,
        choice: MechanismChoice,
    ) -> Result<KvStore, KvError> {
        let mut store = Self::attach(dir, name, write, choice)?;
        let r = store.spaces.vas_switch(store.ro)?;
        store.note_switch(r);
        let h = store.read_header();
        store.spaces.vas_switch_home()?;
        store.header = Some(h?);
        Ok(store)
    }

    fn attach(
        dir: &Path,
        name: &str,
        write: bool,
        choice: MechanismChoice,
    ) -> Result<KvStore, KvError> {
        let (seg, r, w) = names(name);
        let mut spaces = NativeSpaces::open_with(dir, choice, false)?;
        let sid = spaces.seg_find(&seg)?;
        let ro = spaces.vas_attach(spaces.vas_find(&r)?)?;
        let rw = if write {
            let vid = spaces.vas_find(&w)?;
            Some(spaces.vas_attach(vid).map_err(|e| match e {
                VasError::PermissionDenied { path, .. } => KvError::WriteDenied {
                    store: name.to_string(),
                    path: path.display().to_string(),
                },
                e => e.into(),
            })?)
        } else {
            None
        };
        let scratch = spaces.seg_alloc_private("kv-scratch", SCRATCH_BYTES)?;
        for h in [Some(ro), rw].into_iter().flatten() {
            spaces.seg_attach(AttachTo::Handle(h), scratch, Access::ReadWrite)?;
        }
        // A request touches a few pages of a segment that may span gigabytes: switching
        // away drops the entries it touched rather than re-protecting every page.
        spaces.set_zap_on_switch(sid, true)?;
        let base = spaces.segment_base(sid).expect("attached");
        let size = spaces.segment_size(sid).expect("attached");
        let scratch_base = spaces.segment_base(scratch).expect("attached");
        let seg_path = spaces.registry().seg_path(&seg);
        let lock = SegLock::open(&spaces.registry().lock_path(&seg))?;
        Ok(KvStore {
            name: name.to_string(),
            spaces,
            sid,
            base,
            size,
            seg_what: seg_path.display().to_string(),
            seg_path,
            lock,
            ro,
            rw,
            header: None,
            flush_mode: CpuPersistFeatures::detect().best_mode(),
            persist: Persist::Power,
            faults: Faults::default(),
            // SAFETY: the private segment stays mapped while `spaces` lives, and is
            // writable exactly while a handle is switched in, when the arena is used.
            scratch: unsafe { Scratch::new(scratch_base, SCRATCH_BYTES as usize) },
            last_recovery: None,
            dead_holders: Vec::new(),
            redo: None,
            set_args: Default::default(),
            tables_seen: Default::default(),
        })
    }

    /// Runs SETs with `faults` (a deliberately broken variant: tests only).
    pub fn with_faults(mut self, faults: Faults) -> KvStore {
        self.faults = faults;
        self.redo = None;
        self
    }

    /// Commits this client's SETs to the persistence domain `p` (see
    /// [`crate::persist`]; [`Persist::Power`] unless asked).
    pub fn with_persist(mut self, p: Persist) -> KvStore {
        self.persist = p;
        self.redo = None;
        self
    }

    /// The persistence domain this client's SETs commit to.
    pub fn persist(&self) -> Persist {
        self.persist
    }

    /// The mechanism this client's switches use.
    pub fn mechanism(&self) -> Mechanism {
        self.spaces.mechanism()
    }

    /// What this client's switches did so far (switches, `mprotect`s, locks).
    pub fn switch_counters(&self) -> pmlab_vas::native::SwitchCounters {
        self.spaces.counters()
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The segment file.
    pub fn segment_path(&self) -> &Path {
        &self.seg_path
    }

    /// The segment's bytes (accessible only while switched in).
    fn seg(&self) -> &[u8] {
        // SAFETY: the segment stays mapped while `spaces` lives; callers read it only
        // while a handle holding it is switched in.
        unsafe { std::slice::from_raw_parts(self.base, self.size as usize) }
    }

    fn what(&self) -> String {
        self.seg_what.clone()
    }

    fn read_header(&self) -> Result<Header, KvError> {
        let what = self.what();
        Ok(*View::new(self.seg(), &what)?.header())
    }

    fn areas(h: &Header) -> (Area, Area) {
        (
            Area::new(h.log, LOG_LEN),
            Area::new(h.root, h.size - h.root),
        )
    }

    fn mem(&self) -> SegMem {
        // SAFETY: called only while switched into the read-write VAS.
        unsafe { SegMem::new(self.base, self.size, self.flush_mode, self.persist) }
    }

    fn format(&mut self, seed: u64) -> Result<(), KvError> {
        let rw = self.rw.expect("created for writing");
        self.spaces.vas_switch(rw)?;
        let r = (|| {
            let h = Header::for_size(self.size, seed);
            let (log, data) = Self::areas(&h);
            let mut mem = self.mem();
            mem.write(h.root, &[0u8; 4096])
                .map_err(pmlab_tx::TxError::from)?;
            mem.write_u64(h.root + root::REHASH, crate::layout::NOT_REHASHING)
                .map_err(pmlab_tx::TxError::from)?;
            mem.write_u64(h.root + root::BUMP, h.heap)
                .map_err(pmlab_tx::TxError::from)?;
            mem.write_u64(h.root + root::RECOVERED, self.lock.recoveries())
                .map_err(pmlab_tx::TxError::from)?;
            mem.persist(h.root, 4096).map_err(pmlab_tx::TxError::from)?;
            let mut mem = RedoProtocol::format(mem, log, data)?.into_memory();
            // The header last: a store whose format did not finish has no magic.
            mem.write(0, &h.encode()).map_err(pmlab_tx::TxError::from)?;
            mem.persist(0, HEADER_LEN)
                .map_err(pmlab_tx::TxError::from)?;
            Ok::<_, KvError>(h)
        })();
        self.spaces.vas_switch_home()?;
        self.header = Some(r?);
        Ok(())
    }

    fn header(&self) -> Header {
        self.header.expect("opened or created")
    }

    /// What the last recovery did (a SET runs it first when the lock reports a writer
    /// died since the last one; `recover` always runs it).
    pub fn last_recovery(&self) -> Option<&Recovery> {
        self.last_recovery.as_ref()
    }

    /// Dead holders of the segment lock this client cleared so far.
    pub fn dead_holders(&self) -> &[u32] {
        &self.dead_holders
    }

    fn note_switch(&mut self, r: pmlab_vas::SwitchReport) {
        self.dead_holders.extend(r.dead_holders);
    }

    /// GET: the value under `key` copied into `out`; false when there is none.
    pub fn get_into(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, KvError> {
        let r = self.spaces.vas_switch(self.ro)?;
        self.note_switch(r);
        let found = self.get_inside(key, out);
        self.spaces.vas_switch_home()?;
        found
    }

    /// GET, returning the value.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    fn get_inside(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, KvError> {
        let h = self.header();
        self.check_recovered(&h)?;
        let n = self
            .scratch
            .encode(&[b"GET", key])
            .ok_or_else(|| too_big("key"))?;
        let (args, _) = self.scratch.parse::<2>(n).ok_or_else(|| too_big("key"))?;
        // SAFETY: switched in (the segment is readable); the view lives in this block.
        let seg = unsafe { std::slice::from_raw_parts(self.base, self.size as usize) };
        let view = View::with_header(seg, h, &self.seg_what);
        let value = view.get(self.scratch.arg(args[1]))?;
        let reply = self
            .scratch
            .reply(n, value)
            .ok_or_else(|| too_big("value"))?;
        Ok(self.scratch.take_reply(reply, out))
    }

    /// A reader's guard against a writer that died mid-commit: when the lock has
    /// cleared dead holders since the last writer's recovery, the store is read only if
    /// the redo log's last transaction is fully in place (replaying it would change
    /// nothing); otherwise a writer must open it first.
    fn check_recovered(&self, h: &Header) -> Result<(), KvError> {
        if self.lock.recoveries() == self.root_u64(h, root::RECOVERED) {
            return Ok(());
        }
        if crate::recover::last_log_applied(self.seg(), h).unwrap_or(false) {
            return Ok(());
        }
        Err(KvError::NeedsRecovery(self.name.clone()))
    }

    /// The root's field `f` (switched in).
    fn root_u64(&self, h: &Header, f: u64) -> u64 {
        u64::from_le_bytes(
            self.seg()[(h.root + f) as usize..][..8]
                .try_into()
                .expect("8"),
        )
    }

    /// SET `key` to `value` in one transaction, under the exclusive lock.
    pub fn set(&mut self, key: &[u8], value: &[u8]) -> Result<SetEffect, KvError> {
        if key.len() > MAX_KEY {
            return Err(KvError::Invalid {
                field: "key",
                problem: format!("{} bytes, at most {MAX_KEY}", key.len()),
            });
        }
        if value.len() > MAX_VALUE {
            return Err(KvError::Invalid {
                field: "value",
                problem: format!("{} bytes, at most {MAX_VALUE}", value.len()),
            });
        }
        let rw = self
            .rw
            .ok_or_else(|| KvError::ReadOnly(self.name.clone()))?;
        let h = self.header();
        let hash = crate::layout::hash_key(h.seed, key);
        // The bucket's miss overlaps the switch in (the lock's atomic operations).
        dict::prefetch_slots(self.base, self.size, &self.tables_seen, hash);
        let r = self.spaces.vas_switch(rw)?;
        self.note_switch(r);
        let mut copied = std::mem::take(&mut self.set_args);
        let out = self.set_inside(key, value, hash, &mut copied);
        self.set_args = copied;
        self.tables_seen = dict::Tables::read(self.seg(), &h);
        dict::prefetch_rehash(self.seg(), &h);
        self.spaces.vas_switch_home()?;
        out
    }

    /// The SET switched in; `copied` receives the key and value parsed back from the
    /// scratch heap.
    fn set_inside(
        &mut self,
        key: &[u8],
        value: &[u8],
        hash: u64,
        (ck, cv): &mut (Vec<u8>, Vec<u8>),
    ) -> Result<SetEffect, KvError> {
        let h = self.header();
        // The tables as committed now (another writer may have resized them).
        let tables = dict::Tables::read(self.seg(), &h);
        if tables != self.tables_seen {
            dict::prefetch_slots(self.base, self.size, &tables, hash);
        }
        let n = self
            .scratch
            .encode(&[b"SET", key, value])
            .ok_or_else(|| too_big("value"))?;
        let (args, _) = self.scratch.parse::<3>(n).ok_or_else(|| too_big("value"))?;
        // The bucket has had the switch and the parse to arrive; its chain's first
        // entry gets the copies, the attach and the transaction's start.
        dict::prefetch_entries(self.seg(), &tables, hash);
        // The transaction buffers its stores in the process's own memory, so the
        // arguments are copied out of the scratch heap once.
        self.scratch.arg_into(args[1], ck);
        self.scratch.arg_into(args[2], cv);
        let (key, value) = (&ck[..], &cv[..]);
        if self.faults.in_place {
            let mut t = InPlace(self.mem());
            return dict::set(&mut t, &h, key, value).map_err(|e| alloc_error(e, &self.name));
        }
        let recoveries = self.ready_protocol(&h)?;
        let p = self.redo.as_mut().expect("attached by ready_protocol");
        p.begin()?;
        let r = (|| {
            if p.read_u64(h.root + root::RECOVERED)? != recoveries {
                p.write_u64(h.root + root::RECOVERED, recoveries)?;
            }
            dict::set_hashed(p, &h, key, value, hash)
        })();
        match r {
            Ok(effect) => p.commit().map(|_| effect).map_err(KvError::from),
            Err(e) => p
                .abort()
                .map_err(KvError::from)
                .and(Err(alloc_error(e, &self.name))),
        }
    }

    /// Attaches the store's redo protocol (built once, attached again per SET) and
    /// recovers its log if a writer may have died mid-commit; returns the lock's count
    /// of dead holders cleared.
    fn ready_protocol(&mut self, h: &Header) -> Result<u64, KvError> {
        let (log, data) = Self::areas(h);
        let recoveries = self.lock.recoveries();
        // Recovery is needed only if a writer may have died mid-commit: the lock counts
        // every dead holder it clears, and the root records the count as of the last
        // recovery. While they agree, every SET since then returned, so the log's last
        // transaction is in place and replaying it (as recovery would, the log never
        // being cleared) would change nothing.
        let applied = self.root_u64(h, root::RECOVERED) == recoveries;
        // The protocol stays in place from one SET to the next (it is attached again,
        // not rebuilt, and never moved).
        let p = match &mut self.redo {
            Some(p) => {
                p.reattach()?;
                p
            }
            slot @ None => slot.insert(
                RedoProtocol::attach(
                    // SAFETY: as `mem`: switched into the read-write VAS.
                    unsafe { SegMem::new(self.base, self.size, self.flush_mode, self.persist) },
                    log,
                    data,
                )?
                .with_faults(self.faults.tx),
            ),
        };
        if applied || self.faults.never_recover {
            p.assume_applied();
        } else {
            self.last_recovery = Some(p.recover()?);
        }
        Ok(recoveries)
    }

    /// Checks the whole store under the shared lock (see [`crate::check`]).
    pub fn check(&mut self) -> Result<crate::check::Report, KvError> {
        let r = self.spaces.vas_switch(self.ro)?;
        self.note_switch(r);
        let h = self.header();
        let out = self.check_recovered(&h).and_then(|()| {
            let what = self.what();
            View::new(self.seg(), &what).and_then(|v| crate::check::check(&v))
        });
        self.spaces.vas_switch_home()?;
        out
    }

    /// Switches into the read-write VAS and back, recovering the store if a writer
    /// died in it (every SET does this first; `pmlab kv recover` does only this).
    pub fn recover(&mut self) -> Result<Recovery, KvError> {
        let rw = self
            .rw
            .ok_or_else(|| KvError::ReadOnly(self.name.clone()))?;
        let r = self.spaces.vas_switch(rw)?;
        self.note_switch(r);
        let h = self.header();
        let out = (|| {
            let (log, data) = Self::areas(&h);
            let mut p = RedoProtocol::attach(self.mem(), log, data)?.with_faults(self.faults.tx);
            let rec = p.recover()?;
            let recoveries = self.lock.recoveries();
            if p.read_u64(h.root + root::RECOVERED)? != recoveries {
                p.begin()?;
                p.write_u64(h.root + root::RECOVERED, recoveries)?;
                p.commit()?;
            }
            Ok::<_, KvError>(rec)
        })();
        self.spaces.vas_switch_home()?;
        out
    }

    /// The segment's id in the registry.
    pub fn segment(&self) -> SegId {
        self.sid
    }
}

fn too_big(field: &'static str) -> KvError {
    KvError::Invalid {
        field,
        problem: format!("does not fit the {SCRATCH_BYTES}-byte scratch heap"),
    }
}

/// An allocation failure inside store `store` as the store's error.
fn alloc_error(e: AllocError, store: &str) -> KvError {
    match e {
        AllocError::Full(bytes) => KvError::Full {
            store: store.to_string(),
            bytes,
        },
        AllocError::BadFreeBlock(at) => {
            KvError::corrupt(store, at, "free-list block without a valid header")
        }
        AllocError::Tx(e) => e.into(),
    }
}

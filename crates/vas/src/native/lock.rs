//! Lockable segments' reader-writer locks (§3.1), shared between processes through a
//! small lock file beside the segment, and robust: a holder killed with SIGKILL does not
//! keep the lock. The next process that wants it finds the holder dead, clears its hold
//! and is told so.
//!
//! The state is a writer word and a table of [`READER_SLOTS`] reader slots, each naming
//! its holder by pid and start time; they are the whole truth, and each is changed by
//! single atomic operations, so a kill at any instant leaves a table that is
//! consistent: a hold is either recorded or not. The writer word is the holder packed
//! into one 64-bit word ([`Holder::packed`]), so an uncontended writer takes the lock
//! with one compare-and-swap (0 to itself) and a load of the reader mask, and releases
//! it with one store: no mutex. Reader slots change under a process-shared *robust*
//! pthread mutex (the guard), which the kernel hands to the next locker with
//! `EOWNERDEAD` if its holder dies; every slow path (a writer that found the lock
//! taken, a reader) runs under it too. Writer and readers exclude each other Dekker
//! style with sequentially consistent operations: a reader sets its bit in the reader
//! mask *then* checks the writer word, a writer sets the writer word *then* checks the
//! mask, so at least one of two racing parties sees the other and gives way. A mask
//! bit may outlive its slot (a reader killed between the two): writers then take the
//! slow path, which recomputes the mask from the slots under the guard. Waiting is
//! polling with backoff; a waiter checks the conflicting holders' liveness as it polls.
//!
//! ```text
//! offset  field
//!    0    magic "PMLABLCK" (8 bytes), version u32 at 8 (2; version 1 had no writer
//!         word or mask and is refused)
//!   64    the guard: pthread_mutex_t, process-shared and robust
//!  128    writer word: 0 when free, else Holder::packed (pid | start << 32)
//!  144    reader mask u64: bit i set while reader slot i may be held
//!  160    recoveries u64: dead holders cleared so far
//!  168    acquisitions u64
//!  256    reader slots: owner u64 (pid | count << 32), start u64, x 64
//! ```

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::holder::Holder;
use crate::error::VasError;

const MAGIC: &[u8; 8] = b"PMLABLCK";
const VERSION: u32 = 2;
const LOCK_FILE_BYTES: usize = 4096;
const GUARD_AT: usize = 64;
const WRITER_AT: usize = 128;
const READER_MASK_AT: usize = 144;
const RECOVERIES_AT: usize = 160;
const ACQUISITIONS_AT: usize = 168;
const READERS_AT: usize = 256;
/// Processes that can hold one segment's lock shared at once (one bit each in the
/// reader mask).
pub const READER_SLOTS: usize = 64;

/// A segment's lock as it stands: who holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockState {
    /// The exclusive holder.
    pub writer: Option<Holder>,
    /// Shared holders and how many holds each has.
    pub readers: Vec<(Holder, u32)>,
    /// Dead holders cleared since the lock was created.
    pub recoveries: u64,
    /// Acquisitions since the lock was created.
    pub acquisitions: u64,
}

/// A mapped lock file.
#[derive(Debug)]
pub struct SegLock {
    map: NonNull<u8>,
    path: PathBuf,
    /// The reader slot this process used last (a hint: checked under the guard).
    slot_hint: std::sync::atomic::AtomicUsize,
    /// Shared holds this process has through this mapping: while it is zero, the
    /// process holds no reader slot, so a free hinted slot may be taken without
    /// scanning for one of its own.
    shared_holds: std::sync::atomic::AtomicU32,
}

// SAFETY: the mapping is shared memory accessed only through atomics and the
// process-shared mutex.
unsafe impl Send for SegLock {}
// SAFETY: as above.
unsafe impl Sync for SegLock {}

struct Guard<'a>(&'a SegLock);

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // SAFETY: the guard mutex is initialised and held by this thread.
        unsafe { libc::pthread_mutex_unlock(self.0.mutex()) };
    }
}

impl SegLock {
    /// Initialises the lock file at `path` (a fresh, not yet published file).
    pub fn init(path: &Path) -> Result<(), VasError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| VasError::io("open lock file", path, e))?;
        file.set_len(LOCK_FILE_BYTES as u64)
            .map_err(|e| VasError::io("size lock file", path, e))?;
        let lock = Self::map(&file, path)?;
        // SAFETY: the mapping is 4096 bytes and nobody else has the file yet.
        unsafe {
            let p = lock.map.as_ptr();
            std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), p, 8);
            std::ptr::copy_nonoverlapping(VERSION.to_le_bytes().as_ptr(), p.add(8), 4);
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
            libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST);
            let rc = libc::pthread_mutex_init(lock.mutex(), &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
            if rc != 0 {
                return Err(VasError::io(
                    "init lock",
                    path,
                    std::io::Error::from_raw_os_error(rc),
                ));
            }
        }
        Ok(())
    }

    /// Maps an existing lock file and checks its magic.
    pub fn open(path: &Path) -> Result<SegLock, VasError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| VasError::io("open lock file", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| VasError::io("stat", path, e))?
            .len();
        if len != LOCK_FILE_BYTES as u64 {
            return Err(VasError::format(
                path,
                "byte 0 (size)",
                format!("{len} bytes, a lock file has 4096"),
            ));
        }
        let lock = Self::map(&file, path)?;
        // SAFETY: the mapping is 4096 bytes.
        let magic = unsafe { std::slice::from_raw_parts(lock.map.as_ptr(), 8) };
        if magic != MAGIC {
            return Err(VasError::format(
                path,
                "byte 0 (magic)",
                "not a pmlab lock file",
            ));
        }
        // SAFETY: as above.
        let v = unsafe { std::slice::from_raw_parts(lock.map.as_ptr().add(8), 4) };
        let version = u32::from_le_bytes(v.try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(VasError::format(
                path,
                "byte 8 (version)",
                format!(
                    "lock file version {version}, this pmlab reads {VERSION} (a segment made by an older pmlab: recreate it)"
                ),
            ));
        }
        Ok(lock)
    }

    fn map(file: &std::fs::File, path: &Path) -> Result<SegLock, VasError> {
        use rustix::mm::{MapFlags, ProtFlags, mmap};
        // SAFETY: a fresh shared mapping at an address the kernel chooses.
        let p = unsafe {
            mmap(
                std::ptr::null_mut(),
                LOCK_FILE_BYTES,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                file.as_fd(),
                0,
            )
        }
        .map_err(|e| VasError::io("map lock file", path, e.into()))?;
        Ok(SegLock {
            map: NonNull::new(p.cast()).expect("mmap does not return null"),
            path: path.to_path_buf(),
            slot_hint: Default::default(),
            shared_holds: Default::default(),
        })
    }

    fn mutex(&self) -> *mut libc::pthread_mutex_t {
        // SAFETY: GUARD_AT + size_of(pthread_mutex_t) lies inside the 4096-byte mapping.
        unsafe { self.map.as_ptr().add(GUARD_AT).cast() }
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        // SAFETY: every offset used is 8-aligned and inside the mapping, which lives as
        // long as self; the words are only accessed atomically.
        unsafe { &*self.map.as_ptr().add(at).cast::<AtomicU64>() }
    }

    fn slot(&self, at: usize) -> (&AtomicU64, &AtomicU64) {
        (self.word(at), self.word(at + 8))
    }

    fn reader_at(i: usize) -> usize {
        READERS_AT + 16 * i
    }

    fn guard(&self) -> Result<Guard<'_>, VasError> {
        // SAFETY: the mutex was initialised by `init`.
        let rc = unsafe { libc::pthread_mutex_lock(self.mutex()) };
        match rc {
            0 => Ok(Guard(self)),
            libc::EOWNERDEAD => {
                // The guard's holder died between two single-word stores; the slots are
                // consistent as they stand, so the mutex is simply made usable again.
                // SAFETY: we hold the mutex in the owner-died state.
                unsafe { libc::pthread_mutex_consistent(self.mutex()) };
                Ok(Guard(self))
            }
            e => Err(VasError::io(
                "lock guard",
                &self.path,
                std::io::Error::from_raw_os_error(e),
            )),
        }
    }

    /// A reader slot's holder and hold count.
    fn holder_of(&self, at: usize) -> Option<(Holder, u32)> {
        let (owner, start) = self.slot(at);
        let o = owner.load(Ordering::Acquire);
        let pid = o as u32;
        (pid != 0).then(|| {
            (
                Holder {
                    pid,
                    start: start.load(Ordering::Acquire),
                },
                (o >> 32) as u32,
            )
        })
    }

    /// The exclusive holder.
    fn writer(&self) -> Option<Holder> {
        Holder::unpacked(self.word(WRITER_AT).load(Ordering::SeqCst))
    }

    fn reader(&self, i: usize) -> Option<(Holder, u32)> {
        self.holder_of(Self::reader_at(i))
    }

    /// Sets reader slot `i` to `count` holds of `h`, keeping its mask bit set while
    /// the slot is (the bit first on the way up, the slot first on the way down: a kill
    /// between the two leaves a bit without a slot, which only sends writers to the
    /// slow path, never a slot without its bit). Call with the guard held.
    fn set_reader(&self, i: usize, h: Holder, count: u32) {
        let (owner, start) = self.slot(Self::reader_at(i));
        let mask = self.word(READER_MASK_AT);
        if count == 0 {
            owner.store(0, Ordering::SeqCst);
            mask.fetch_and(!(1 << i), Ordering::SeqCst);
            return;
        }
        mask.fetch_or(1 << i, Ordering::SeqCst);
        start.store(h.start, Ordering::Release);
        owner.store(
            u64::from(h.pid) | (u64::from(count) << 32),
            Ordering::SeqCst,
        );
    }

    /// Recomputes the reader mask from the slots (guard held): clears the bits that a
    /// reader killed between its bit and its slot left behind.
    fn repair_mask(&self) {
        let held = (0..READER_SLOTS)
            .filter(|&i| self.reader(i).is_some())
            .fold(0u64, |m, i| m | 1 << i);
        let mask = self.word(READER_MASK_AT);
        let stale = mask.load(Ordering::SeqCst) & !held;
        if stale != 0 {
            mask.fetch_and(!stale, Ordering::SeqCst);
        }
    }

    /// Clears dead holders that stand in the way (all of them when `exclusive`, the
    /// writer otherwise); returns their pids. Call with the guard held.
    fn clear_dead(&self, exclusive: bool) -> Vec<u32> {
        let mut dead = Vec::new();
        let w = self.word(WRITER_AT).load(Ordering::SeqCst);
        if let Some(h) = Holder::unpacked(w) {
            // Only a holder's own release changes a held writer word, and a dead
            // holder makes none: the exchange fails only if the holder was alive.
            if !h.alive()
                && self
                    .word(WRITER_AT)
                    .compare_exchange(w, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                dead.push(h.pid);
            }
        }
        if exclusive {
            for i in 0..READER_SLOTS {
                if let Some((h, _)) = self.reader(i) {
                    if !h.alive() {
                        self.set_reader(i, h, 0);
                        dead.push(h.pid);
                    }
                }
            }
        }
        self.word(RECOVERIES_AT)
            .fetch_add(dead.len() as u64, Ordering::Relaxed);
        dead
    }

    /// Counts an acquisition.
    fn count_acquisition(&self) {
        self.word(ACQUISITIONS_AT).fetch_add(1, Ordering::Relaxed);
    }

    /// The writer's fast path, without the guard: the writer word from 0 to `me`, then
    /// the reader mask must be clear; if it is not, the word goes back to 0 (readers
    /// may hold it, or one is getting in: the slow path decides). `Err` when `me`
    /// holds it already.
    fn try_exclusive_fast(&self, me: Holder) -> Result<bool, VasError> {
        let w = self.word(WRITER_AT);
        if let Err(now) = w.compare_exchange(0, me.packed(), Ordering::SeqCst, Ordering::Relaxed) {
            if now == me.packed() {
                return Err(VasError::Refused(format!(
                    "{}: this process already holds the lock exclusively",
                    self.path.display()
                )));
            }
            return Ok(false);
        }
        if self.word(READER_MASK_AT).load(Ordering::SeqCst) != 0 {
            w.store(0, Ordering::SeqCst);
            return Ok(false);
        }
        // Nobody else counts while this writer holds the lock: readers count only
        // once they have seen the writer word clear after setting their mask bit, and
        // the mask was clear after the word was set. So a load and a store suffice.
        let n = self.word(ACQUISITIONS_AT);
        n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        Ok(true)
    }

    /// One attempt under the guard: `Some(dead holders cleared)` when acquired.
    fn try_once(
        &self,
        me: Holder,
        exclusive: bool,
        check_dead: bool,
    ) -> Result<Option<Vec<u32>>, VasError> {
        let _g = self.guard()?;
        let dead = if check_dead {
            self.clear_dead(exclusive)
        } else {
            Vec::new()
        };
        if exclusive {
            self.repair_mask();
            return Ok(self.try_exclusive_fast(me)?.then_some(dead));
        }
        if let Some(w) = self.writer() {
            if w == me {
                return Err(VasError::Refused(format!(
                    "{}: this process already holds the lock exclusively",
                    self.path.display()
                )));
            }
            return Ok(None);
        }
        let Some(i) = self.take_reader_slot(me) else {
            return Ok(None);
        };
        // The mask bit is set: a writer getting in now sees it and gives way; one that
        // got in before is seen here.
        if self.writer().is_some() {
            let (h, n) = self.reader(i).expect("just taken");
            self.set_reader(i, h, n - 1);
            return Ok(None);
        }
        self.slot_hint.store(i, Ordering::Relaxed);
        self.shared_holds.fetch_add(1, Ordering::Relaxed);
        self.count_acquisition();
        Ok(Some(dead))
    }

    /// Adds a shared hold of `me` to its reader slot, or to a free one; `None` when
    /// all are taken. Guard held.
    fn take_reader_slot(&self, me: Holder) -> Option<usize> {
        if let Some(i) = self.take_hinted_slot(me) {
            return Some(i);
        }
        let mine = (0..READER_SLOTS).find(|&i| self.reader(i).is_some_and(|(h, _)| h == me));
        let free = (0..READER_SLOTS).find(|&i| self.reader(i).is_none());
        match (mine, free) {
            (Some(i), _) => {
                let (h, n) = self.reader(i).expect("found");
                self.set_reader(i, h, n + 1);
                Some(i)
            }
            (None, Some(i)) => {
                self.set_reader(i, me, 1);
                Some(i)
            }
            (None, None) => None,
        }
    }

    /// The fast path of a shared acquisition (guard held): the slot this process used
    /// last, if it holds it (one more hold) or it is free and the process holds no
    /// other. The common case of a client that takes and releases its shared hold per
    /// request then touches one slot instead of scanning the table.
    fn take_hinted_slot(&self, me: Holder) -> Option<usize> {
        let i = self.slot_hint.load(Ordering::Relaxed);
        match self.reader(i) {
            Some((h, n)) if h == me => self.set_reader(i, me, n + 1),
            None if self.shared_holds.load(Ordering::Relaxed) == 0 => self.set_reader(i, me, 1),
            _ => return None,
        }
        Some(i)
    }

    /// Takes the lock, shared or exclusive, waiting as long as live holders conflict.
    /// Returns the pids of dead holders it cleared on the way.
    pub fn acquire(&self, me: Holder, exclusive: bool) -> Result<Vec<u32>, VasError> {
        if exclusive && self.try_exclusive_fast(me)? {
            return Ok(Vec::new());
        }
        if let Some(d) = self.try_once(me, exclusive, false)? {
            return Ok(d);
        }
        let mut dead_seen = Vec::new();
        let mut wait = Duration::from_micros(20);
        loop {
            if let Some(d) = self.try_once(me, exclusive, true)? {
                dead_seen.extend(d);
                return Ok(dead_seen);
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_millis(2));
        }
    }

    /// One attempt without waiting; `None` if a live holder conflicts.
    pub fn try_acquire(&self, me: Holder, exclusive: bool) -> Result<Option<Vec<u32>>, VasError> {
        self.try_once(me, exclusive, true)
    }

    /// The deliberately broken variant of [`SegLock::try_acquire`]: it never checks
    /// whether holders are alive, as a plain process-shared lock would not. The kill
    /// tests use it to show that a dead holder's lock is then never freed.
    pub fn try_acquire_ignoring_dead(
        &self,
        me: Holder,
        exclusive: bool,
    ) -> Result<Option<Vec<u32>>, VasError> {
        self.try_once(me, exclusive, false)
    }

    /// Releases one hold of `me`. The exclusive one needs no guard: only its holder
    /// changes a held writer word (a clearer changes only a dead holder's).
    pub fn release(&self, me: Holder, exclusive: bool) -> Result<(), VasError> {
        if exclusive {
            let w = self.word(WRITER_AT);
            if w.load(Ordering::Relaxed) == me.packed() {
                w.store(0, Ordering::Release);
                return Ok(());
            }
        } else {
            let _g = self.guard()?;
            let hint = self.slot_hint.load(Ordering::Relaxed);
            let mine = |i: usize| self.reader(i).is_some_and(|(h, _)| h == me);
            let found = if mine(hint) {
                Some(hint)
            } else {
                (0..READER_SLOTS).find(|&i| mine(i))
            };
            if let Some(i) = found {
                let (_, n) = self.reader(i).expect("found");
                self.set_reader(i, me, n - 1);
                let _ = self
                    .shared_holds
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| x.checked_sub(1));
                return Ok(());
            }
        }
        Err(VasError::Refused(format!(
            "{}: released a lock this process does not hold",
            self.path.display()
        )))
    }

    /// Who holds the lock now (dead holders included until someone clears them).
    pub fn state(&self) -> LockState {
        LockState {
            writer: self.writer(),
            readers: (0..READER_SLOTS).filter_map(|i| self.reader(i)).collect(),
            recoveries: self.word(RECOVERIES_AT).load(Ordering::Relaxed),
            acquisitions: self.word(ACQUISITIONS_AT).load(Ordering::Relaxed),
        }
    }

    /// Dead holders cleared since the lock was created: one atomic load, for clients
    /// that check on every switch whether a holder died since they last looked.
    pub fn recoveries(&self) -> u64 {
        self.word(RECOVERIES_AT).load(Ordering::Acquire)
    }

    /// Clears every dead holder (what `pmlab vas check --repair` does); returns their pids.
    pub fn recover(&self) -> Result<Vec<u32>, VasError> {
        let _g = self.guard()?;
        Ok(self.clear_dead(true))
    }
}

impl Drop for SegLock {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no references into it outlive self.
        let _ = unsafe { rustix::mm::munmap(self.map.as_ptr().cast(), LOCK_FILE_BYTES) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader-slot hint never gives one holder's hold to another, and holds are
    /// counted exactly: two holders (as two processes would be) interleaving shared
    /// acquisitions and releases through one mapping, then a writer that must see
    /// every reader gone.
    #[test]
    fn the_slot_hint_keeps_holders_and_counts_apart() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l");
        std::fs::File::create(&p).unwrap();
        SegLock::init(&p).unwrap();
        let l = SegLock::open(&p).unwrap();
        let me = Holder::me();
        let other = Holder {
            pid: me.pid,
            start: me.start + 1,
        };
        let holds = |h: Holder| {
            l.state()
                .readers
                .iter()
                .filter(|(r, _)| *r == h)
                .map(|(_, n)| *n)
                .sum::<u32>()
        };
        l.acquire(me, false).unwrap();
        l.acquire(other, false).unwrap();
        l.acquire(me, false).unwrap();
        assert_eq!((holds(me), holds(other)), (2, 1));
        // The hint now names `other`'s slot; once it is free, `me` (still holding
        // its own) must not take it.
        l.acquire(other, false).unwrap();
        l.release(other, false).unwrap();
        l.release(other, false).unwrap();
        l.acquire(me, false).unwrap();
        assert_eq!((holds(me), holds(other)), (3, 0));
        // One slot per holder: the free hinted slot was not taken for a second one.
        let slots = l.state().readers.iter().filter(|(r, _)| *r == me).count();
        assert_eq!(slots, 1);
        assert_eq!(l.try_acquire(other, true).unwrap(), None, "readers remain");
        for _ in 0..3 {
            l.release(me, false).unwrap();
        }
        assert!(l.release(me, false).is_err(), "a hold released twice");
        assert!(l.state().readers.is_empty());
        assert!(l.try_acquire(other, true).unwrap().is_some());
    }

    fn fresh() -> (tempfile::TempDir, SegLock) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l");
        std::fs::File::create(&p).unwrap();
        SegLock::init(&p).unwrap();
        let l = SegLock::open(&p).unwrap();
        (dir, l)
    }

    /// A lock file of the previous layout (version 1: no writer word or reader mask) is
    /// refused by field, not misread.
    #[test]
    fn a_version_1_lock_file_is_refused() {
        let (dir, l) = fresh();
        drop(l);
        let p = dir.path().join("l");
        let mut b = std::fs::read(&p).unwrap();
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        std::fs::write(&p, &b).unwrap();
        let e = SegLock::open(&p).unwrap_err().to_string();
        assert!(
            e.contains("byte 8 (version)") && e.contains("version 1"),
            "{e}"
        );
    }

    /// The writer's one-word fast path and the readers exclude each other, and a mask
    /// bit that outlived its slot (a reader killed between the two) only sends the
    /// writer to the slow path, which clears it.
    #[test]
    fn the_writer_word_and_the_reader_mask_exclude_each_other() {
        let (_dir, l) = fresh();
        let me = Holder::me();
        let other = Holder {
            pid: me.pid,
            start: (me.start + 1) & crate::native::holder::START_MASK,
        };
        assert!(l.try_exclusive_fast(me).unwrap());
        assert!(l.try_exclusive_fast(me).is_err(), "held twice");
        assert!(!l.try_exclusive_fast(other).unwrap());
        assert_eq!(l.try_acquire_ignoring_dead(other, false).unwrap(), None);
        assert_eq!(
            l.word(READER_MASK_AT).load(Ordering::SeqCst),
            0,
            "backed off"
        );
        assert!(l.release(other, true).is_err(), "not the holder");
        l.release(me, true).unwrap();
        assert!(l.release(me, true).is_err(), "released twice");
        l.acquire(other, false).unwrap();
        assert!(!l.try_exclusive_fast(me).unwrap(), "a reader holds it");
        assert_eq!(l.state().writer, None, "the writer gave way");
        l.release(other, false).unwrap();
        // A stale bit: set, with no slot behind it.
        l.word(READER_MASK_AT).fetch_or(1 << 5, Ordering::SeqCst);
        assert!(!l.try_exclusive_fast(me).unwrap());
        assert_eq!(l.acquire(me, true).unwrap(), Vec::<u32>::new());
        assert_eq!(l.word(READER_MASK_AT).load(Ordering::SeqCst), 0);
        assert_eq!(l.state().writer, Some(me));
        l.release(me, true).unwrap();
    }

    /// Threads posing as distinct holders race writer fast paths against guarded
    /// readers; a writer must never overlap a reader or another writer.
    #[test]
    fn racing_writers_and_readers_never_overlap() {
        use std::sync::atomic::AtomicI64;
        let (_dir, l) = fresh();
        let me = Holder::me();
        let inside = AtomicI64::new(0); // readers inside, or -1 for a writer
        let (writes, reads) = (AtomicU64::new(0), AtomicU64::new(0));
        // Holds long enough for the other threads to try to get in meanwhile.
        let dwell = || (0..200).for_each(|_| std::hint::spin_loop());
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (l, inside, writes, reads) = (&l, &inside, &writes, &reads);
                s.spawn(move || {
                    let h = Holder {
                        pid: me.pid,
                        start: (me.start + 1 + t) & crate::native::holder::START_MASK,
                    };
                    for k in 0..20_000 {
                        if (k + t) % 3 == 0 {
                            if l.try_exclusive_fast(h).unwrap() {
                                assert_eq!(inside.swap(-1, Ordering::SeqCst), 0);
                                dwell();
                                assert_eq!(inside.swap(0, Ordering::SeqCst), -1);
                                l.release(h, true).unwrap();
                                writes.fetch_add(1, Ordering::Relaxed);
                            }
                        } else if l.try_acquire_ignoring_dead(h, false).unwrap().is_some() {
                            assert!(inside.fetch_add(1, Ordering::SeqCst) >= 0);
                            dwell();
                            assert!(inside.fetch_sub(1, Ordering::SeqCst) >= 1);
                            l.release(h, false).unwrap();
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert!(writes.into_inner() > 0 && reads.into_inner() > 0);
        let st = l.state();
        assert_eq!((st.writer, st.readers.len()), (None, 0));
        assert_eq!(l.word(READER_MASK_AT).load(Ordering::SeqCst), 0);
    }
}

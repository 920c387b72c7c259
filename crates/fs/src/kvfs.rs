//! KVFS: a flat namespace of whole small files with put/get/erase, on the same layout
//! and service as PXFS.
//!
//! Every object is one contiguous extent of a fixed size (set at mkfs); the namespace is
//! one directory's hash table; all objects share one permission domain. A put writes the
//! new contents into a fresh extent and swaps it in with one journaled operation, so a
//! reader sees either the old or the new file, never a mix. Clients lock the hash table
//! bucket by bucket, so clients working on different keys proceed in parallel.
//!
//! Objects' extents are reserved from the service [`EXTENTS_PER_RESERVE`] at a time,
//! so a put costs a service round trip only once per that many puts (libFS reserves
//! inodes and pages in batches for the same reason). Each extent is a run of
//! consecutive pages, but the extents of one reservation need not adjoin: an erased
//! object's extent is handed out again however fragmented the domain has become.

use crate::client::Client;
use crate::error::{FsError, Result};
use crate::inode::{Inode, Kind};
use crate::journal::Op;
use crate::media::PAGE;

/// Object extents reserved from the service in one request, on a large volume: a put
/// then seldom waits for the service, and the service is woken for a reservation once
/// per so many puts.
pub const EXTENTS_PER_RESERVE: u64 = 128;

/// Object extents a store's first reservation asks for on a volume whose domains hold
/// `domain_pages` pages of objects of `object_pages`: [`EXTENTS_PER_RESERVE`], or fewer
/// on a volume too small for many clients each to hold that many ahead of need (a
/// 512th of a domain's objects, at least 16). Each further reservation asks for twice
/// as many, up to [`EXTENTS_PER_RESERVE`], as libFS's inode and page batches grow: a
/// store that puts many values soon asks seldom (with 16 at a time, the next ones
/// were asked for twelve puts ahead, and a put often waited for the service to answer
/// behind the batches it was applying), while each of a hundred stores that put a few
/// holds few.
pub fn extents_per_reserve(domain_pages: u64, object_pages: u64) -> u64 {
    (domain_pages / object_pages.max(1) / 512).clamp(16, EXTENTS_PER_RESERVE)
}

/// Object extents reserved to this store and not yet used.
#[derive(Default)]
struct ExtentPool {
    /// Domain, and the first pages of its reserved objects' extents (used from the end).
    current: Option<(u16, Vec<u64>)>,
    /// The next extents, asked for and not yet answered.
    next: Option<(u16, crate::client::ExtentAsk)>,
    /// Extents the next reservation asks for (0: not yet set, see
    /// [`extents_per_reserve`]).
    batch: u64,
    /// Extents the reservation in `current` granted.
    granted: u64,
}

impl ExtentPool {
    /// Extents to ask for now (at least `floor`); the next ask takes twice as many.
    fn next_batch(&mut self, floor: u64) -> u64 {
        let want = self.batch.max(floor);
        self.batch = (want * 2).min(EXTENTS_PER_RESERVE.max(floor));
        want
    }
}

/// A KVFS store: one directory of a volume.
pub struct Kvfs {
    client: Client,
    dir: u64,
    mode: u32,
    /// Reserved, not yet used extents.
    pool: std::sync::Mutex<ExtentPool>,
}

impl Kvfs {
    /// Opens (creating it if missing) the store in directory `path` of the volume served
    /// on `socket`; objects get permission bits `mode`.
    pub fn open(socket: &std::path::Path, path: &str, mode: u32) -> Result<Kvfs> {
        let px = crate::pxfs::Pxfs::mount(socket)?;
        match px.mkdir(path, 0o755) {
            Ok(()) | Err(FsError::Exists(_)) => {}
            Err(e) => return Err(e),
        }
        let dir = px.client().resolve(path)?;
        let client = px.into_client();
        Ok(Kvfs {
            client,
            dir,
            mode,
            pool: std::sync::Mutex::new(ExtentPool::default()),
        })
    }

    /// The lock covering `key`: the lease on the hash-table bucket (page chain) its name
    /// falls in. It sits below the lease on the whole table (the directory), as the
    /// paper's hierarchical locks over KVFS's hash table do, and covers the objects
    /// named from that bucket.
    pub fn lock_of(&self, key: &str) -> u64 {
        crate::lease::bucket_key(self.dir, crate::dir::bucket_of(key))
    }

    /// The largest value a put accepts.
    pub fn max_value(&self) -> u64 {
        self.client.state().sb().kv_object_pages * PAGE
    }

    /// Stores `value` under `key`, replacing what was there.
    ///
    /// The value goes into a free extent reserved to this client, which nothing
    /// names yet, outside the state where the mapping allows (see `client::copies`):
    /// other threads of the process go on meanwhile. Then the extent is recorded as
    /// the object's, in one step with its create.
    pub fn put(&self, key: &str, value: &[u8]) -> Result<()> {
        crate::dir::check_name(key)?;
        self.client.past_claims(|| self.put_once(key, value))
    }

    fn put_once(&self, key: &str, value: &[u8]) -> Result<()> {
        let lock = self.lock_of(key);
        let mut s = self.client.leased(lock, true)?;
        let n = s.sb().kv_object_pages;
        let floor = extents_per_reserve(s.sb().domain_pages, n);
        if value.len() as u64 > n * PAGE {
            return Err(FsError::NoSpace(format!(
                "value of {} bytes exceeds the {}-byte object",
                value.len(),
                n * PAGE
            )));
        }
        let domain = s.domain_for(self.mode)?;
        let extent = self.next_extent(&mut s, domain, n, floor)?;
        let claim = [(extent, n)];
        s.claim_pages(domain, &claim);
        if let Some(copy) = s.begin_copy(domain, true, value.len())? {
            drop(s);
            let r = copy.write(extent * PAGE, value);
            copy.fence();
            drop(copy);
            s = match r.and_then(|()| self.client.leased(lock, true)) {
                Ok(s) => s,
                Err(e) => {
                    self.client.state().unclaim_pages(domain, &claim);
                    return Err(e);
                }
            };
        } else if let Err(e) = s
            .write_data(domain, extent * PAGE, value)
            .and_then(|()| s.fence_data(domain))
        {
            s.unclaim_pages(domain, &claim);
            return Err(e);
        }
        let r = self.record_put(&mut s, key, domain, extent, value.len() as u64);
        s.unclaim_pages(domain, &claim);
        r
    }

    /// Records `key` as the object of extent `extent` in `domain`, holding `len` bytes:
    /// one local check for the create (if new), the extent and the size, which touch
    /// the same inode page, read and sealed once.
    fn record_put(
        &self,
        s: &mut crate::client::State,
        key: &str,
        domain: u16,
        extent: u64,
        len: u64,
    ) -> Result<()> {
        let mut ops = Vec::with_capacity(3);
        let ino = match s.lookup(self.dir, key)? {
            Some(ino) => ino,
            None => {
                let ino = s.take_inode()?;
                ops.push(Op::Create {
                    parent: self.dir,
                    name: key.into(),
                    ino,
                    kind: Kind::Kv,
                    mode: self.mode,
                    domain,
                });
                ino
            }
        };
        ops.push(Op::MapPages {
            ino,
            index: 0,
            page: extent,
            count: s.sb().kv_object_pages,
        });
        ops.push(Op::SetSize { ino, size: len });
        s.record_all(ops)
    }

    /// The first page of a free extent of `n` pages in domain `domain` for the next
    /// put, from the extents reserved ahead (asked for again in batches of at least
    /// `floor`).
    fn next_extent(
        &self,
        s: &mut crate::client::State,
        domain: u16,
        n: u64,
        floor: u64,
    ) -> Result<u64> {
        let mut pool = self.pool.lock().unwrap();
        if !matches!(&pool.current, Some((d, v)) if *d == domain && !v.is_empty()) {
            let asked = pool.next.take().filter(|a| a.0 == domain);
            // The service grants as many whole extents as it finds, at least one,
            // so a refusal here means the domain has no free extent at all.
            let mut starts = match asked.map(|(_, ask)| s.extent_answer(ask)) {
                Some(Ok(v)) => v,
                // Refused (the client's limit counts the extents its journal used and
                // has not shipped): asked again, shipping first if need be.
                Some(Err(FsError::NoSpace(_))) => {
                    pool.batch = floor;
                    s.take_extents(domain, n, floor)?
                }
                None => {
                    let per = pool.next_batch(floor);
                    s.take_extents(domain, n, per)?
                }
                Some(Err(e)) => return Err(e),
            };
            starts.reverse();
            pool.granted = starts.len() as u64;
            pool.current = Some((domain, starts));
        }
        let (_, starts) = pool.current.as_mut().unwrap();
        let first = starts.pop().unwrap();
        // The next extents are asked for while three quarters of these are left, and
        // collected when they run out: a put then seldom waits for the service, which
        // serves this client's requests in order and may be applying the batches
        // shipped before the request (a KVFS batch of 256 operations took it about
        // 1.2 ms when measured, some thirty puts' worth, and batches queue up).
        let left = starts.len() as u64;
        if left * 4 <= pool.granted * 3 && pool.next.is_none() {
            let per = pool.next_batch(floor);
            pool.next = Some((domain, s.ask_extents(domain, n, per)?));
        }
        Ok(first)
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let mut v = Vec::new();
        Ok(self.get_into(key, &mut v)?.then_some(v))
    }

    /// Copies the value stored under `key` into `buf` (resized to the value's length)
    /// and returns whether the key exists. A caller that reads many values reuses one
    /// buffer, as a `read` into the same array does, instead of allocating and zeroing
    /// one per value.
    pub fn get_into(&self, key: &str, buf: &mut Vec<u8>) -> Result<bool> {
        let placed = self.get_placed(key, move |len| {
            buf.resize(len, 0);
            buf.as_mut_slice()
        })?;
        Ok(placed.is_some())
    }

    /// Copies the value stored under `key` into the start of `buf`, as much of it as
    /// fits, and returns the value's whole length (which may exceed the bytes copied,
    /// unlike `read`'s count), or `None` if `key` holds no value: a read into an array
    /// the caller placed where it wants it (the benchmarks read into page-aligned
    /// buffers, see `pmlab_fscheck::bench::iobuf`).
    pub fn get_to(&self, key: &str, buf: &mut [u8]) -> Result<Option<usize>> {
        self.get_placed(key, move |len| {
            let n = len.min(buf.len());
            &mut buf[..n]
        })
    }

    /// The get of [`Kvfs::get_into`] and [`Kvfs::get_to`]: `place` is told the value's
    /// length (once, if the key names a KVFS object) and gives the bytes to copy it
    /// into.
    fn get_placed<'b>(
        &self,
        key: &str,
        place: impl FnOnce(usize) -> &'b mut [u8],
    ) -> Result<Option<usize>> {
        if let Some((i, copy)) = self.cached_copy(key) {
            return self.copy_out(copy, &i, place(i.size as usize));
        }
        let mut s = self.client.leased(self.lock_of(key), false)?;
        let Some(ino) = s.lookup(self.dir, key)? else {
            return Ok(None);
        };
        let i = s.inode(ino)?;
        if i.kind != Kind::Kv {
            return Err(FsError::WrongKind(format!("{key} is not a KVFS object")));
        }
        let len = i.size as usize;
        let buf = place(len);
        if i.root == 0 {
            buf.fill(0);
            return Ok(Some(len));
        }
        // The bytes outside the state where the mapping allows (see `client::copies`).
        let Some(copy) = s.begin_copy(i.domain, false, buf.len())? else {
            s.read_data(i.domain, i.root * PAGE, buf)?;
            return Ok(Some(len));
        };
        drop(s);
        self.copy_out(copy, &i, buf)
    }

    /// Copies the value of the object of inode `i` into `buf` through `copy`, outside
    /// the state, and returns the value's whole length.
    fn copy_out(
        &self,
        copy: crate::client::Copy,
        i: &Inode,
        buf: &mut [u8],
    ) -> Result<Option<usize>> {
        self.client
            .read_outside(copy, i.domain, |c| c.read(i.root * PAGE, buf))
            .map(|()| Some(i.size as usize))
    }

    /// The inode of a key whose bucket lease, name and inode are cached, and a copy to
    /// read its value through, found under the state shared with the process's other
    /// threads (see `client::shared`); `None` leaves the get to the exclusive path.
    fn cached_copy(&self, key: &str) -> Option<(Inode, crate::client::Copy)> {
        let s = self.client.state_shared();
        if !s.known_covered_shared(self.lock_of(key), false) {
            return None;
        }
        let i = s.cached_inode(s.cached_lookup(self.dir, key)?)?;
        if i.kind != Kind::Kv || i.root == 0 {
            return None;
        }
        let copy = s.shared_copy(i.domain, false, i.size as usize)?;
        Some((i, copy))
    }

    /// Removes `key`; returns whether it existed.
    pub fn erase(&self, key: &str) -> Result<bool> {
        let mut s = self.client.leased(self.lock_of(key), true)?;
        let Some(ino) = s.lookup(self.dir, key)? else {
            return Ok(false);
        };
        s.record(Op::Unlink {
            parent: self.dir,
            name: key.into(),
            ino,
        })?;
        Ok(true)
    }

    /// Ships pending operations.
    pub fn sync(&self) -> Result<()> {
        self.client.sync()
    }

    /// The libFS connection underneath.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

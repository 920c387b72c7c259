//! The trusted file-system service (TFS).
//!
//! One thread owns all state and polls every client's request ring itself: a request
//! goes from the client's ring straight to the handler and its reply straight back,
//! with no reader thread or channel in between (an fsync is one hop each way). Reads
//! and writes never block: a client that sends half a frame or stops reading its
//! replies stalls only itself, and one whose replies pile up past a bound is dropped.
//! Revocations travel on a socket of their own, handed to the client with its welcome,
//! so that a client's caller reads only replies in its reply ring.
//!
//! Clients are identified by their kernel credentials (SO_PEERCRED), never by anything
//! they say about themselves. The service must run under a uid of its own, the only
//! one that can open the volume's files (mkfs creates them 0600, and [`spawn`] refuses
//! a volume whose files another user could write): a client of the same uid could open
//! the metadata read-write and write anything.

mod alloc;
mod auth;
mod conn;
mod limits;
mod requests;
mod waiters;

pub use limits::Limits;

use rustc_hash::{FxHashMap, FxHashSet};
use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::apply::reclaim_orphan;
use crate::error::{FsError, Result};
use crate::inode::Kind;
use crate::layout::Superblock;
use crate::lease::Leases;
use crate::map::Writable;
use crate::redo::MetaLog;
use crate::txn::Changes;
use crate::view::{MediaView, PageSource};
use crate::volume;
use conn::Conn;
use waiters::Waiter;

/// Service settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// How long a lease holder may take to release a revoked lease before the service
    /// disconnects it and reclaims everything it held.
    pub lease_timeout: Duration,
    /// What one client may hold (`None`: [`Limits::for_volume`]).
    pub limits: Option<Limits>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            lease_timeout: Duration::from_secs(60),
            limits: None,
        }
    }
}

impl Config {
    /// The default settings with lease timeout `t`.
    pub fn with_lease_timeout(t: Duration) -> Config {
        Config {
            lease_timeout: t,
            ..Config::default()
        }
    }
}

/// Everything the service knows; owned by its one thread.
struct State {
    dir: PathBuf,
    meta: Writable,
    sb: Superblock,
    /// Data spaces the service opened (for writes on behalf of write-only clients,
    /// copies of moved files, and size checks), by domain.
    data: FxHashMap<u16, File>,
    clients: FxHashMap<u64, Conn>,
    leases: Leases,
    waiters: Vec<Waiter>,
    reserved_inodes: FxHashSet<u64>,
    reserved_pages: crate::reserved::Reserved,
    /// How many clients hold each object open (registered opens).
    open_count: FxHashMap<u64, u32>,
    /// Objects whose data lives in each domain (see `crate::domain`).
    domain_objects: FxHashMap<u16, u64>,
    next_client: u64,
    /// The redo log every metadata write goes through (see `crate::redo`: the log is
    /// replayed at start, so nothing may write a metadata page except through it).
    log: MetaLog,
    inode_hint: u64,
    /// Where the next metadata page search starts (next-fit across batches).
    meta_cursor: u64,
    /// Per domain, the data page the next page search starts from (next-fit).
    page_cursor: FxHashMap<u16, u64>,
    cfg: Config,
    limits: Limits,
    /// Metadata commits so far (a ship's reply lists the pages it wrote only if its
    /// handling committed nothing else).
    commits: u64,
}

impl State {
    fn commit(&mut self, changes: &Changes) -> Result<()> {
        self.commits += 1;
        self.log.commit(&mut self.meta, changes)
    }

    /// Runs `f` on a view of the service's metadata (see [`auth::Trusted`]).
    fn with_view<T>(&mut self, f: impl FnOnce(&mut MediaView<'_, auth::Trusted<'_>>) -> T) -> T {
        let mut t = auth::Trusted::new(&mut self.meta);
        let mut v = MediaView::with_sb(&mut t, self.sb);
        f(&mut v)
    }

    /// Inode `ino` as the media holds it.
    fn inode(&mut self, ino: u64) -> Result<crate::inode::Inode> {
        self.with_view(|v| v.inode(ino))
    }

    /// Page `pno`, checked to be of kind `tag`.
    fn page(&mut self, pno: u64, tag: crate::media::Tag) -> Result<crate::media::PageBuf> {
        self.with_view(|v| v.page(pno, tag))
    }

    /// The domain table.
    fn domain_table(&mut self) -> Result<Vec<Option<crate::domain::Domain>>> {
        self.with_view(|v| crate::domain::read_table(v))
    }

    /// Objects (files, KVFS objects, orphans) whose data lives in domain `d`.
    fn objects_in(&self, d: u16) -> u64 {
        self.domain_objects.get(&d).copied().unwrap_or(0)
    }

    /// Reclaims orphans left by a crash (unlinked objects nobody can hold open any
    /// more) and counts the objects of every domain, in one pass over the inode table.
    fn reclaim_orphans_and_count(&mut self) -> Result<usize> {
        let mut n = 0;
        for ino in 2..self.sb.inode_count {
            let i = self.inode(ino)?;
            if !matches!(i.kind, Kind::File | Kind::Kv) {
                continue;
            }
            if i.nlink == 0 {
                let out = reclaim_orphan(&mut auth::Trusted::new(&mut self.meta), self.sb, ino)?;
                self.commit(&out.changes)?;
                n += 1;
            } else {
                *self.domain_objects.entry(i.domain).or_insert(0) += 1;
            }
        }
        Ok(n)
    }

    /// Frees orphan `ino` if no client holds it open any more.
    fn maybe_reclaim(&mut self, ino: u64) {
        if self.open_count.contains_key(&ino) {
            return;
        }
        if let Ok(out) = reclaim_orphan(&mut auth::Trusted::new(&mut self.meta), self.sb, ino)
            && !out.changes.is_empty()
            && self.commit(&out.changes).is_ok()
        {
            self.after_commit(&out);
        }
    }

    /// Bookkeeping after a committed batch: leases on freed inodes go, page searches
    /// may start again at the lowest freed page, emptied domains may be freed.
    fn after_commit(&mut self, out: &crate::apply::Outcome) {
        for &ino in &out.freed_inodes {
            self.leases.forget_key(ino);
        }
        for &(d, p) in &out.lowest_freed {
            let cur = self.page_cursor.entry(d).or_insert(p.max(1));
            *cur = (*cur).min(p.max(1));
        }
        for &(d, delta) in &out.domain_objects {
            let n = self.domain_objects.entry(d).or_insert(0);
            debug_assert!(
                n.checked_add_signed(delta).is_some(),
                "domain {d}: {n} objects changed by {delta}"
            );
            *n = n.saturating_add_signed(delta);
            if *n == 0 {
                self.maybe_free_domain(d);
            }
        }
    }
}

/// A running service (for tests and embedding); stops when dropped.
pub struct Handle {
    stop: Arc<AtomicBool>,
    wake: UnixStream,
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
        let _ = std::io::Write::write_all(&mut &self.wake, &[1]);
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

/// Opens the volume at `dir` (refusing one whose files another user could write,
/// replaying its redo log and reclaiming orphans) and serves it on `socket` from a
/// thread of its own.
pub fn spawn(dir: &Path, socket: &Path, cfg: Config) -> Result<Handle> {
    volume::check_private(dir)?;
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
    listener
        .set_nonblocking(true)
        .map_err(|e| FsError::io("listener", e))?;
    let (wake, wake_rx) = UnixStream::pair().map_err(|e| FsError::io("socketpair", e))?;
    wake_rx
        .set_nonblocking(true)
        .map_err(|e| FsError::io("socketpair", e))?;
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
        open_count: FxHashMap::default(),
        domain_objects: FxHashMap::default(),
        next_client: 1,
        log,
        inode_hint: 0,
        meta_cursor: sb.pool_first,
        page_cursor: FxHashMap::default(),
        limits: cfg.limits.unwrap_or_else(|| Limits::for_volume(&sb)),
        commits: 0,
        cfg,
    };
    st.reclaim_orphans_and_count()?;
    st.free_unused_domains();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    // Named so that a profile (`perf report --comm pmlab-fs-svc`) can tell the
    // service's time from its clients' in a process that runs both.
    let thread = std::thread::Builder::new()
        .name("pmlab-fs-svc".into())
        .spawn(move || main_loop(st, listener, wake_rx, stop2))
        .map_err(|e| FsError::io("spawn the service thread", e))?;
    Ok(Handle {
        stop,
        wake,
        thread: Some(thread),
        socket: socket.to_path_buf(),
    })
}

/// How long after a client's last request the service polls for the next one without
/// sleeping. A client that ships, say, an fsync every few tens of microseconds then
/// finds the service awake: no wake-up through the scheduler (on a virtual machine,
/// an inter-processor interrupt through the hypervisor, several times the ship's own
/// handling). An idle service sleeps, so the cost is bounded by the clients' own
/// activity; with more runnable threads than cores the scheduler preempts the spin.
const REQUEST_SPIN: Duration = Duration::from_micros(100);

/// While spinning, the sockets (new clients, doorbells, hang-ups, revocations to send)
/// are polled once per this many looks at the rings: a look is a load per client and a
/// yield of the processor (to the clients, when there are more runnable threads than
/// processors), a poll a system call over every socket.
const SOCKET_POLL_EVERY: u32 = 64;

/// Which socket a poll entry watches.
#[derive(Clone, Copy)]
enum Watch {
    Wake,
    Listener,
    Requests(u64),
    Revocations(u64),
}

fn main_loop(
    mut st: State,
    listener: UnixListener,
    wake: UnixStream,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let tick = Duration::from_millis(50)
        .min(st.cfg.lease_timeout / 4)
        .max(Duration::from_millis(1));
    let mut last_tick = std::time::Instant::now();
    let mut last_request = last_tick;
    loop {
        let spin_until = last_request + REQUEST_SPIN;
        for (w, flags) in wait(&st, &listener, &wake, tick, spin_until)? {
            match w {
                Watch::Wake => {
                    let mut b = [0u8; 64];
                    let _ = (&wake).read(&mut b);
                }
                Watch::Listener => st.accept_all(&listener),
                Watch::Requests(id) => {
                    last_request = Instant::now();
                    st.serve_client(id, flags);
                }
                Watch::Revocations(id) => st.flush_client(id),
            }
        }
        st.flush_ring_backlogs();
        if stop.load(Ordering::SeqCst) {
            let ids: Vec<u64> = st.clients.keys().copied().collect();
            for id in ids {
                st.drop_client(id);
            }
            return Ok(());
        }
        if last_tick.elapsed() >= tick {
            last_tick = std::time::Instant::now();
            st.check_data_sizes();
            st.serve_waiters();
        }
    }
}

impl State {
    /// Clients with requests in their rings, as poll entries with no socket event.
    fn ring_requests(&self) -> Vec<(Watch, PollFlags)> {
        self.clients
            .iter()
            .filter(|(_, c)| c.rings.readable())
            .map(|(&id, _)| (Watch::Requests(id), PollFlags::empty()))
            .collect()
    }

    /// Writes replies that waited for room in a reply ring the client has since read.
    fn flush_ring_backlogs(&mut self) {
        let ids: Vec<u64> = self
            .clients
            .iter()
            .filter(|(_, c)| c.out.pending() > 0 && !c.out.waits_on_socket())
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.flush_client(id);
        }
    }

    /// Tells every client whether the service is about to sleep (see
    /// [`crate::proto::ring::Rings::set_asleep`]).
    fn set_asleep(&self, asleep: bool) {
        self.clients
            .values()
            .for_each(|c| c.rings.set_asleep(asleep));
    }
}

/// Waits for something to do: requests in a client's ring, or an event on the wake
/// socket, the listener or a client's sockets (for writing only where replies wait to
/// go out on them). While a client was active lately it looks at the rings without
/// sleeping, and polls the sockets now and then; then it sleeps up to a tick in `poll`,
/// and a client that writes a request meanwhile rings the doorbell on its socket.
fn wait(
    st: &State,
    listener: &UnixListener,
    wake: &UnixStream,
    tick: Duration,
    spin_until: Instant,
) -> Result<Vec<(Watch, PollFlags)>> {
    let mut watch = vec![Watch::Wake, Watch::Listener];
    let mut fds = vec![
        PollFd::new(wake.as_fd(), PollFlags::POLLIN),
        PollFd::new(listener.as_fd(), PollFlags::POLLIN),
    ];
    let mut backlog = false;
    for (&id, c) in &st.clients {
        let mut ev = PollFlags::POLLIN;
        if c.out.waits_on_socket() {
            ev |= PollFlags::POLLOUT;
        }
        backlog |= c.out.pending() > 0;
        watch.push(Watch::Requests(id));
        fds.push(PollFd::new(c.stream.as_fd(), ev));
        if c.rev_out.pending() > 0 {
            watch.push(Watch::Revocations(id));
            fds.push(PollFd::new(c.rev.as_fd(), PollFlags::POLLOUT));
        }
    }
    let mut looks = 0u32;
    loop {
        let rings = st.ring_requests();
        if !rings.is_empty() {
            return Ok(rings);
        }
        looks = looks.wrapping_add(1);
        let spinning = Instant::now() < spin_until;
        if spinning && !looks.is_multiple_of(SOCKET_POLL_EVERY) {
            std::thread::yield_now();
            continue;
        }
        let timeout = if spinning {
            PollTimeout::ZERO
        } else {
            // A reply waiting for ring room is retried soon, not a tick later.
            let sleep = if backlog {
                Duration::from_millis(1)
            } else {
                tick
            };
            st.set_asleep(true);
            let rings = st.ring_requests();
            if !rings.is_empty() {
                st.set_asleep(false);
                return Ok(rings);
            }
            PollTimeout::from(u16::try_from(sleep.as_millis()).unwrap_or(u16::MAX))
        };
        let r = poll(&mut fds, timeout);
        if timeout != PollTimeout::ZERO {
            st.set_asleep(false);
        }
        match r {
            Ok(0) if timeout == PollTimeout::ZERO => std::thread::yield_now(),
            Ok(_) | Err(nix::errno::Errno::EINTR) => break,
            Err(e) => return Err(FsError::io("poll", e.into())),
        }
    }
    let mut ready: Vec<(Watch, PollFlags)> = watch
        .into_iter()
        .zip(
            fds.iter()
                .map(|f| f.revents().unwrap_or(PollFlags::empty())),
        )
        .filter(|(_, f)| !f.is_empty())
        .collect();
    // A client whose socket said nothing may still have written into its ring.
    for (w, f) in st.ring_requests() {
        if !ready
            .iter()
            .any(|(r, _)| matches!((r, &w), (Watch::Requests(a), Watch::Requests(b)) if a == b))
        {
            ready.push((w, f));
        }
    }
    Ok(ready)
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

//! libFS's connection to the service.
//!
//! Requests go out under a lock into the request ring; replies come back in the reply
//! ring in the order the service handled the requests, and the thread that waits for
//! one reads the ring itself: whoever waits while no one else is reading takes the
//! ring, reads frames until its own reply comes, and leaves the others' replies for
//! them. A single-threaded application therefore reads its reply straight off the
//! ring, one hop each way with the service, and no reader thread or channel sits in
//! between. Revocations come on a socket of their own (see [`super::revoke`]).
//!
//! A grant is recorded in the lease table by whichever thread reads it, the moment it
//! is read, so that a revocation (which the service sends after the grant it revokes)
//! always finds the grant once the replies before it have been read.

use rustc_hash::FxHashMap;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::Thread;
use std::time::Duration;

use crate::error::{FsError, Result};
use crate::proto::ring::Rings;
use crate::proto::{self, ErrKind, Reply, Request, RingReader};

/// How long a thread waiting for a reply polls the reply ring before it sleeps. A ship
/// takes the service about 10 µs to validate and commit; sleeping for it costs a
/// wake-up through the scheduler (and, on a virtual machine, the hypervisor) that is
/// several times that. Longer waits (a lease another client must give back) sleep.
const REPLY_SPIN: Duration = Duration::from_micros(100);

pub use super::leases::LeaseTable;

#[derive(Default)]
pub(crate) struct Recv {
    /// Whether a thread is reading the socket now.
    reading: bool,
    /// Replies read by a thread they were not for, by request number.
    stash: FxHashMap<u64, (Reply, Vec<OwnedFd>)>,
    /// Lease requests not yet answered: request number -> (key, exclusive).
    acquires: FxHashMap<u64, (u64, bool)>,
    /// The highest request number whose reply was read, among requests the service
    /// answers in order (all but lease requests, which may wait): every such request
    /// up to it has been answered, every batch up to it applied.
    answered: u64,
    /// Why the connection is gone, once it is.
    closed: Option<String>,
    /// Threads asleep until the reply to their request is read (or the socket is free
    /// to read), by request number.
    asleep: FxHashMap<u64, Thread>,
    /// Threads asleep until any frame is read (waiting for a grant or for an answer
    /// they do not take).
    watching: Vec<Thread>,
}

impl Recv {
    /// Wakes the thread asleep for reply `rid`, and every watcher.
    fn wake_for(&self, rid: u64) {
        if let Some(t) = self.asleep.get(&rid) {
            t.unpark();
        }
        self.watching.iter().for_each(Thread::unpark);
    }

    /// Wakes every sleeper (the connection is gone).
    fn wake_all(&self) {
        self.asleep.values().for_each(Thread::unpark);
        self.watching.iter().for_each(Thread::unpark);
    }

    /// A waiter leaves with what it waited for: if no one reads the socket now, one
    /// sleeper is woken to read it, whose reply may still be on its way.
    fn hand_over(&self) {
        if !self.reading
            && let Some(t) = self.asleep.values().next().or(self.watching.first())
        {
            t.unpark();
        }
    }
}

/// The connection (rings and socket) and what is in flight on it.
pub(crate) struct Conn {
    /// The socket: doorbells and descriptors, and the end of the connection.
    sock: UnixStream,
    /// Requests and replies (see [`crate::proto::ring`]).
    rings: Rings,
    /// The reply ring's partial frame and early descriptors; only the thread that
    /// reads (`Recv::reading`) takes it.
    ring_in: Mutex<RingReader>,
    send_lock: Mutex<()>,
    recv: Mutex<Recv>,
    next_id: AtomicU64,
    /// The leases this client holds.
    pub leases: Mutex<LeaseTable>,
    /// The table's count of losses ([`LeaseTable::losses_counter`]).
    lease_losses: Arc<AtomicU64>,
    /// Directories where other clients took leases back lately.
    pub contention: super::granularity::Contention,
    /// Revocations answered so far.
    pub revocations: AtomicU64,
}

/// A refusal as the error it stands for.
fn refusal(kind: ErrKind, msg: String) -> FsError {
    match kind {
        ErrKind::Denied => FsError::Denied(msg),
        ErrKind::NoSpace => FsError::NoSpace(msg),
        ErrKind::NotFound => FsError::NotFound(msg),
        ErrKind::Refused => FsError::Refused(msg),
    }
}

impl Conn {
    pub fn new(sock: UnixStream, rings: Rings) -> Conn {
        let leases = LeaseTable::default();
        Conn {
            lease_losses: leases.losses_counter(),
            sock,
            rings,
            ring_in: Mutex::new(RingReader::default()),
            send_lock: Mutex::new(()),
            recv: Mutex::new(Recv::default()),
            next_id: AtomicU64::new(1),
            leases: Mutex::new(leases),
            contention: Default::default(),
            revocations: AtomicU64::new(0),
        }
    }

    /// [`LeaseTable::losses`] without the table's lock: a value the count had at some
    /// point during the call, as a read under the lock gives.
    pub fn lease_losses(&self) -> u64 {
        self.lease_losses.load(Ordering::SeqCst)
    }

    /// Requests sent so far.
    pub fn requests_sent(&self) -> u64 {
        self.next_id.load(Ordering::SeqCst) - 1
    }

    /// Sends a request (with its attachment) without waiting; returns its number.
    pub fn send(&self, req: &Request, attach: &[u8]) -> Result<u64> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        if let Request::Acquire { key, exclusive } | Request::TryAcquire { key, exclusive } = req {
            self.lock_recv().acquires.insert(id, (*key, *exclusive));
        }
        let frame = proto::encode_request(id, req, attach);
        let _g = self.send_lock.lock().unwrap_or_else(|e| e.into_inner());
        proto::send_frame_ring(&self.rings, &self.sock, &frame).inspect_err(|e| {
            let mut g = self.lock_recv();
            g.closed.get_or_insert(e.to_string());
            g.wake_all();
        })?;
        Ok(id)
    }

    /// Sends a request and waits for its reply.
    pub fn call(&self, req: &Request, attach: &[u8]) -> Result<(Reply, Vec<OwnedFd>)> {
        let id = self.send(req, attach)?;
        self.wait(id)
    }

    fn lock_recv(&self) -> MutexGuard<'_, Recv> {
        self.recv.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for the reply to request `id`; a refusal is its error.
    pub fn wait(&self, id: u64) -> Result<(Reply, Vec<OwnedFd>)> {
        let mut g = self.lock_recv();
        loop {
            if let Some((r, fds)) = g.stash.remove(&id) {
                g.hand_over();
                return match r {
                    Reply::Err(kind, msg) => Err(refusal(kind, msg)),
                    r => Ok((r, fds)),
                };
            }
            if let Some(why) = &g.closed {
                return Err(FsError::Protocol(format!(
                    "the service connection is gone: {why}"
                )));
            }
            g = self.read_or_sleep(g, Some(id));
        }
    }

    /// Reads one frame if no one else is reading the socket, else sleeps until woken:
    /// for the reply to `id` (`None`: for any frame), or to take over reading. Each
    /// frame wakes only the thread it is for (and the watchers), not every waiter:
    /// the threads of a process waiting at once for their fsyncs would otherwise all
    /// wake for each reply, through the scheduler (and a hypervisor), to find it is not
    /// theirs.
    fn read_or_sleep<'a>(
        &'a self,
        mut g: MutexGuard<'a, Recv>,
        id: Option<u64>,
    ) -> MutexGuard<'a, Recv> {
        if !g.reading {
            return self.read_one(g);
        }
        let me = std::thread::current();
        match id {
            Some(id) => {
                g.asleep.insert(id, me);
            }
            None => g.watching.push(me),
        }
        drop(g);
        // A wake-up between the registration and here leaves the token: no sleep.
        std::thread::park();
        let mut g = self.lock_recv();
        match id {
            Some(id) => {
                g.asleep.remove(&id);
            }
            None => {
                let me = std::thread::current().id();
                g.watching.retain(|t| t.id() != me);
            }
        }
        g
    }

    /// Reads one frame off the socket (the caller holds `g` and no one else is
    /// reading), records a grant it carries, and stashes it for its waiter.
    fn read_one<'a>(&'a self, mut g: MutexGuard<'a, Recv>) -> MutexGuard<'a, Recv> {
        g.reading = true;
        drop(g);
        let frame = self
            .ring_in
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .recv_frame(&self.rings, &self.sock, REPLY_SPIN);
        let mut g = self.lock_recv();
        g.reading = false;
        match frame {
            Ok(Some((body, fds))) => match proto::decode_reply(&body) {
                Ok((rid, rep)) => {
                    let acquire = g.acquires.remove(&rid);
                    if acquire.is_none() {
                        g.answered = g.answered.max(rid);
                    }
                    // Grant 0: a try that was not granted.
                    if let (Some((key, excl)), Reply::Granted { grant }) = (acquire, &rep)
                        && *grant != 0
                    {
                        let mut l = self.leases.lock().unwrap_or_else(|e| e.into_inner());
                        l.insert(key, (excl, *grant));
                    }
                    g.stash.insert(rid, (rep, fds));
                    g.wake_for(rid);
                    return g;
                }
                Err(e) => g.closed = Some(format!("bad reply: {e}")),
            },
            Ok(None) => g.closed = Some("the service closed the connection".into()),
            Err(e) => g.closed = Some(e.to_string()),
        }
        g.wake_all();
        g
    }

    /// Waits until the reply to request `id` (not a lease request) has been read, by
    /// this thread or another, and leaves it for its waiter: the service has then
    /// handled every batch sent up to `id`. An error once the connection is gone.
    pub fn wait_answered(&self, id: u64) -> Result<()> {
        let mut g = self.lock_recv();
        loop {
            if g.answered >= id {
                g.hand_over();
                return Ok(());
            }
            if let Some(why) = &g.closed {
                return Err(FsError::Protocol(format!(
                    "the service connection is gone: {why}"
                )));
            }
            g = self.read_or_sleep(g, None);
        }
    }

    /// Waits until grant `grant` of `key` has been read (true), or until it is clear
    /// the client holds no such grant any more (false): nothing for `key` is in flight.
    pub fn settle_grant(&self, key: u64, grant: u64) -> bool {
        let mut g = self.lock_recv();
        loop {
            let have = self
                .leases
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                .map(|h| h.1);
            if have.is_some_and(|h| h >= grant) {
                g.hand_over();
                return have == Some(grant);
            }
            if g.closed.is_some() || !g.acquires.values().any(|a| a.0 == key) {
                g.hand_over();
                return false;
            }
            g = self.read_or_sleep(g, None);
        }
    }

    /// Closes the request socket (the service then lets the client go).
    pub fn shutdown(&self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}

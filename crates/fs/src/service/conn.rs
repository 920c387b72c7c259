//! A client's connection: its sockets, what it holds, and the service's side of
//! accepting it, reading its requests, answering, and letting it go.

use rustc_hash::{FxHashMap, FxHashSet};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};

use nix::poll::PollFlags;

use super::State;
use crate::pool::PagePool;
use crate::proto::ring::Rings;
use crate::proto::{self, FrameReader, Outbox, Reply};
use crate::volume;

/// Replies a client leaves unread beyond this many bytes get it dropped: the service
/// must not hold an unbounded queue for a client that stopped reading.
const MAX_UNREAD: usize = 8 << 20;

/// One connected client.
pub(super) struct Conn {
    /// The request socket (non-blocking): doorbells, descriptors, the end of the
    /// connection. Requests and replies travel in `rings`.
    pub stream: UnixStream,
    /// The connection's request and reply rings (see [`crate::proto::ring`]).
    pub rings: Rings,
    /// The service's end of the revocation socket (non-blocking).
    pub rev: UnixStream,
    pub reader: FrameReader,
    pub out: Outbox,
    pub rev_out: Outbox,
    pub uid: u32,
    pub gid: u32,
    /// Inodes reserved to the client.
    pub inodes: FxHashSet<u64>,
    /// Data pages reserved to the client, per domain, as runs.
    pub pages: FxHashMap<u16, PagePool>,
    /// Objects the client registered as open.
    pub opens: FxHashSet<u64>,
    /// Domains whose data space the client was handed (a domain is freed only when no
    /// connected client holds it: one may be about to create files in it).
    pub domains: FxHashSet<u16>,
}

impl Conn {
    /// Data pages reserved to the client, over all domains.
    pub fn reserved_pages(&self) -> u64 {
        self.pages.values().map(|p| p.len()).sum()
    }

    /// Queues a reply (with descriptors) for the reply ring.
    pub fn send(&mut self, id: u64, r: &Reply, fds: Vec<OwnedFd>) {
        self.out.push(proto::encode_reply(id, r), fds);
    }
}

impl State {
    /// Accepts every pending connection.
    pub(super) fn accept_all(&mut self, listener: &UnixListener) {
        while let Ok((s, _)) = listener.accept() {
            self.accept(s);
        }
    }

    fn accept(&mut self, s: UnixStream) {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        let Ok(cred) = getsockopt(&s, PeerCredentials) else {
            return;
        };
        // The client's end of its revocation socket goes out with the welcome.
        let Ok((rev, rev_client)) = UnixStream::pair() else {
            return;
        };
        if s.set_nonblocking(true).is_err() || rev.set_nonblocking(true).is_err() {
            return;
        }
        // A fresh read-only descriptor: the client can map the metadata, never write it.
        let Ok(meta) = File::open(volume::meta_path(&self.dir)) else {
            return;
        };
        let Ok((rings, rings_fd)) = Rings::create() else {
            return;
        };
        let id = self.next_client;
        self.next_client += 1;
        let c = Conn {
            stream: s,
            rings,
            rev,
            reader: FrameReader::default(),
            out: Outbox::default(),
            rev_out: Outbox::default(),
            uid: cred.uid(),
            gid: cred.gid(),
            inodes: FxHashSet::default(),
            pages: FxHashMap::default(),
            opens: FxHashSet::default(),
            domains: FxHashSet::default(),
        };
        // The welcome goes on the socket itself, with the descriptors the client needs
        // before it can read anything else: the metadata, its revocation socket's end
        // and the rings. A new socket's buffer takes it whole.
        let welcome = proto::encode_reply(
            0,
            &Reply::Welcome {
                client: id,
                uid: c.uid,
                gid: c.gid,
            },
        );
        let fds = [
            meta.as_raw_fd(),
            rev_client.as_raw_fd(),
            rings_fd.as_raw_fd(),
        ];
        if proto::send_frame(&c.stream, &welcome, &fds).is_err() {
            return;
        }
        self.clients.insert(id, c);
    }

    /// Reads and handles what client `id` sent; drops it if it hung up or broke the
    /// protocol. `flags` are what polling its socket reported (empty: not polled).
    pub(super) fn serve_client(&mut self, id: u64, flags: PollFlags) {
        if flags.contains(PollFlags::POLLOUT) {
            self.flush_client(id);
        }
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        let mut closed = false;
        if flags.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR) {
            match proto::drain_doorbells(&c.stream) {
                Ok(x) => closed = x,
                Err(e) => {
                    eprintln!("pmlab fs: client {id} dropped: {e}");
                    return self.drop_client(id);
                }
            }
        }
        // Requests a client wrote before hanging up are still served (their replies
        // go nowhere), as they were when they came on the socket.
        let frames = match c.reader.read_ring(&c.rings) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("pmlab fs: client {id} dropped: {e}");
                return self.drop_client(id);
            }
        };
        for f in frames {
            if !self.clients.contains_key(&id) {
                return;
            }
            if self.handle(id, &f).is_err() {
                eprintln!("pmlab fs: client {id} dropped: a request frame that does not decode");
                return self.drop_client(id);
            }
        }
        if closed {
            self.drop_client(id);
            self.serve_waiters();
            return;
        }
        self.flush_client(id);
    }

    /// Sends what client `id`'s sockets take; drops a client that cannot be written to
    /// or leaves too much unread.
    pub(super) fn flush_client(&mut self, id: u64) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        let sent = c
            .out
            .flush_ring(&c.rings, &c.stream)
            .and_then(|_| c.rev_out.flush(&c.rev));
        let unread = c.out.pending() + c.rev_out.pending();
        if let Err(e) = &sent {
            eprintln!("pmlab fs: client {id} dropped: {e}");
        } else if unread > MAX_UNREAD {
            eprintln!("pmlab fs: client {id} dropped: {unread} bytes of replies left unread");
        }
        if sent.is_err() || unread > MAX_UNREAD {
            self.drop_client(id);
        }
    }

    /// Lets client `id` go: its leases, waiting requests, reservations and registered
    /// opens are given back, orphans only it held open are freed, and domains only it
    /// held that have no objects are freed.
    pub(super) fn drop_client(&mut self, id: u64) {
        let Some(c) = self.clients.remove(&id) else {
            return;
        };
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
        let _ = c.rev.shutdown(std::net::Shutdown::Both);
        self.leases.release_all(id);
        self.waiters.retain(|w| w.client != id);
        for i in &c.inodes {
            self.reserved_inodes.remove(i);
        }
        for (&d, pool) in &c.pages {
            for (start, end) in pool.runs() {
                for p in start..end {
                    self.reserved_pages.remove(d, p);
                }
                let cur = self.page_cursor.entry(d).or_insert(start);
                *cur = (*cur).min(start);
            }
        }
        for ino in &c.opens {
            self.unpin(*ino);
        }
        for ino in &c.opens {
            self.maybe_reclaim(*ino);
        }
        for d in c.domains {
            self.maybe_free_domain(d);
        }
    }

    /// One client fewer holds `ino` open.
    pub(super) fn unpin(&mut self, ino: u64) {
        if let Some(n) = self.open_count.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                self.open_count.remove(&ino);
            }
        }
    }
}

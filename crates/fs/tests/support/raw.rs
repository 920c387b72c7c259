//! A client that speaks the wire protocol by hand: for tests that play a hostile or
//! unresponsive client, which libFS would never be.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use pmlab_fs::proto::ring::Rings;
use pmlab_fs::proto::{self, Reply, Request, RingReader};

/// A raw connection: the request socket, the revocation socket and the descriptors the
/// welcome carried, with the rings requests and replies travel in.
pub struct Raw {
    /// The request socket (doorbells and descriptors).
    pub s: UnixStream,
    rings: Rings,
    rings_fd: OwnedFd,
    reader: RingReader,
    /// The revocation socket (never read unless a test reads it).
    pub rev: UnixStream,
    /// The metadata descriptor from the welcome.
    pub meta: OwnedFd,
    /// The client number the service gave.
    pub id: u64,
    next: u64,
}

impl Raw {
    /// Connects and reads the welcome.
    pub fn connect(sock: &Path) -> Raw {
        let s = UnixStream::connect(sock).unwrap();
        let (body, fds) = proto::recv_frame(&s).unwrap().unwrap();
        let (_, r) = proto::decode_reply(&body).unwrap();
        let Reply::Welcome { client, .. } = r else {
            panic!("expected a welcome, got {r:?}")
        };
        let mut fds = fds.into_iter();
        let meta = fds.next().expect("the metadata descriptor");
        let rev = UnixStream::from(fds.next().expect("the revocation socket"));
        let rings_fd = fds.next().expect("the rings");
        let rings = Rings::open(&rings_fd).unwrap();
        Raw {
            s,
            rings,
            rings_fd,
            reader: RingReader::default(),
            rev,
            meta,
            id: client,
            next: 1,
        }
    }

    /// Sends `req` with `bin` attached, without waiting for its reply.
    pub fn send(&mut self, req: Request, bin: &[u8]) {
        let id = self.next;
        self.next += 1;
        let frame = proto::encode_request(id, &req, bin);
        proto::send_frame_ring(&self.rings, &self.s, &frame).unwrap();
    }

    /// Sends `req` with `bin` attached and returns its reply (and descriptors).
    pub fn call_fds(&mut self, req: Request, bin: &[u8]) -> (Reply, Vec<OwnedFd>) {
        let id = self.next;
        self.next += 1;
        let frame = proto::encode_request(id, &req, bin);
        proto::send_frame_ring(&self.rings, &self.s, &frame).unwrap();
        loop {
            let (body, fds) = self
                .reader
                .recv_frame(&self.rings, &self.s, std::time::Duration::ZERO)
                .unwrap()
                .expect("a reply");
            let (rid, r) = proto::decode_reply(&body).unwrap();
            if rid == id {
                return (r, fds);
            }
        }
    }

    /// Writes `value` at byte `at` of the rings' control page (the request ring's head
    /// is at 0, the reply ring's tail at 192), through a mapping of its own, as a
    /// hostile client would, and rings the doorbell.
    pub fn forge_control_word(&self, at: usize, value: u64) {
        use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};
        let len = std::num::NonZeroUsize::new(4096).unwrap();
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: a fresh shared mapping of the first page of the rings file, written
        // through a volatile store and unmapped at once.
        unsafe {
            let p = mmap(None, len, rw, MapFlags::MAP_SHARED, &self.rings_fd, 0).unwrap();
            std::ptr::write_volatile((p.as_ptr() as *mut u8).add(at) as *mut u64, value);
            munmap(p, 4096).unwrap();
        }
        proto::ring_doorbell(&self.s);
    }

    /// Sends `req` with `bin` attached and returns its reply.
    pub fn call(&mut self, req: Request, bin: &[u8]) -> Reply {
        self.call_fds(req, bin).0
    }
}

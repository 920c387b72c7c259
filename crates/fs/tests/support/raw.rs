//! A client that speaks the wire protocol by hand: for tests that play a hostile or
//! unresponsive client, which libFS would never be.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use pmlab_fs::proto::{self, Reply, Request};

/// A raw connection: the request socket, the revocation socket and the descriptors the
/// welcome carried.
pub struct Raw {
    /// The request socket.
    pub s: UnixStream,
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
        Raw {
            s,
            rev,
            meta,
            id: client,
            next: 1,
        }
    }

    /// Sends `req` with `bin` attached and returns its reply (and descriptors).
    pub fn call_fds(&mut self, req: Request, bin: &[u8]) -> (Reply, Vec<OwnedFd>) {
        let id = self.next;
        self.next += 1;
        proto::send_frame(&self.s, &proto::encode_request(id, &req, bin), &[]).unwrap();
        loop {
            let (body, fds) = proto::recv_frame(&self.s).unwrap().expect("a reply");
            let (rid, r) = proto::decode_reply(&body).unwrap();
            if rid == id {
                return (r, fds);
            }
        }
    }

    /// Sends `req` with `bin` attached and returns its reply.
    pub fn call(&mut self, req: Request, bin: &[u8]) -> Reply {
        self.call_fds(req, bin).0
    }
}

//! The wire protocol between libFS and the service over a Unix stream socket.
//!
//! A frame is: total length (u32), header length (u32), a JSON header, then a binary
//! attachment (a journal batch). The service attaches descriptors (the metadata space,
//! domain data spaces) with `SCM_RIGHTS`. Journals travel as the checksummed binary
//! records of [`crate::journal`]; the JSON is only the envelope.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use serde::{Deserialize, Serialize};

use crate::error::{FsError, Result};

/// Largest frame accepted (a batch of a few thousand records fits easily).
pub const MAX_FRAME: usize = 16 << 20;

/// A client's request; the id pairs it with its reply.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Acquire a lease on an object (and so on everything below it).
    Acquire {
        /// The object.
        ino: u64,
        /// Exclusive (to change) or shared (to read).
        exclusive: bool,
    },
    /// Give up a lease, after applying the attached batch (possibly empty).
    Release {
        /// The object.
        ino: u64,
        /// The grant given up.
        grant: u64,
    },
    /// Apply the attached batch now (fsync, or a full journal).
    Ship,
    /// Reserve free inodes and free data pages of a domain for local allocation. The
    /// service grants as many as it can, at least one of each kind asked for (pages in
    /// whole extents), or refuses.
    Reserve {
        /// Inodes wanted.
        inodes: u32,
        /// Domain of the pages.
        domain: u16,
        /// Data pages wanted, in all.
        pages: u32,
        /// Pages per extent: granted pages come in runs of this many consecutive pages
        /// (KVFS objects' extents); 1 (or 0) for single pages anywhere.
        extent: u32,
    },
    /// The domain for new files of this client with permission bits `mode`, created if
    /// needed; its data space comes attached.
    Domain {
        /// Permission bits.
        mode: u32,
    },
    /// Map an existing domain's data space (attached; writable only if permitted).
    MapDomain {
        /// The domain.
        domain: u16,
    },
    /// Note that the client holds these objects open. Clients send it lazily: before
    /// giving back a lease (another client may be about to unlink or rename them) and
    /// before shipping a batch that unlinks one of them. Each object stays registered
    /// until the client sends [`Request::Close`] for it or disconnects.
    Opened {
        /// The objects.
        inos: Vec<u64>,
    },
    /// Note that the client closed `ino`.
    Close {
        /// The object.
        ino: u64,
    },
}

/// The service's answer, or a message it sends on its own (id 0).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Done.
    Ok,
    /// Refused, with the reason (for a batch: the operation that failed and why).
    Err(String),
    /// First message on a connection; the metadata space (read-only) comes attached.
    Welcome {
        /// The client's number.
        client: u64,
        /// Its user, from SO_PEERCRED.
        uid: u32,
        /// Its group, from SO_PEERCRED.
        gid: u32,
    },
    /// Reserved resources.
    Reserved {
        /// Inode numbers.
        inodes: Vec<u64>,
        /// Data page numbers.
        pages: Vec<u64>,
    },
    /// A domain's data space is attached.
    Domain {
        /// The domain.
        domain: u16,
        /// Whether the attached descriptor and mapping are writable.
        writable: bool,
    },
    /// A lease was granted.
    Granted {
        /// The grant's number.
        grant: u64,
    },
    /// Unsolicited: another client needs a lease that conflicts with this one; ship
    /// the journal and release it.
    Revoke {
        /// The object.
        ino: u64,
        /// The grant revoked.
        grant: u64,
    },
}

/// A request frame's header.
#[derive(Serialize, Deserialize, Debug)]
pub struct ReqHeader {
    /// Request number, chosen by the client.
    pub id: u64,
    /// The request.
    pub req: Request,
}

/// A reply frame's header.
#[derive(Serialize, Deserialize, Debug)]
pub struct RepHeader {
    /// The request answered (0: unsolicited).
    pub id: u64,
    /// The answer.
    pub reply: Reply,
}

/// Sends one frame with an optional descriptor.
pub fn send<T: Serialize>(s: &UnixStream, header: &T, bin: &[u8], fd: Option<RawFd>) -> Result<()> {
    let json = serde_json::to_vec(header).map_err(|e| FsError::Protocol(e.to_string()))?;
    let total = (8 + json.len() + bin.len()) as u32;
    let mut head = Vec::with_capacity(8 + json.len());
    head.extend_from_slice(&total.to_le_bytes());
    head.extend_from_slice(&(json.len() as u32).to_le_bytes());
    head.extend_from_slice(&json);
    let io = |e: nix::errno::Errno| FsError::io("send", e.into());
    match fd {
        Some(fd) => {
            let fds = [fd];
            let cmsg = [ControlMessage::ScmRights(&fds)];
            let iov = [IoSlice::new(&head[..1])];
            sendmsg::<()>(s.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None).map_err(io)?;
            let mut w = s;
            w.write_all(&head[1..])
                .map_err(|e| FsError::io("send", e))?;
        }
        None => {
            let mut w = s;
            w.write_all(&head).map_err(|e| FsError::io("send", e))?;
        }
    }
    let mut w = s;
    w.write_all(bin).map_err(|e| FsError::io("send", e))
}

/// A received frame: JSON header bytes, attachment, and a descriptor if one came.
pub struct Frame {
    /// The JSON header.
    pub header: Vec<u8>,
    /// The binary attachment.
    pub bin: Vec<u8>,
    /// A descriptor passed with the frame.
    pub fd: Option<OwnedFd>,
}

/// Receives one frame; `Ok(None)` at a clean end of stream.
pub fn recv(s: &UnixStream) -> Result<Option<Frame>> {
    let mut len = [0u8; 8];
    let mut got = 0;
    let mut fd = None;
    while got < 8 {
        let mut cmsg = nix::cmsg_space!([RawFd; 2]);
        let mut iov = [IoSliceMut::new(&mut len[got..])];
        let msg = recvmsg::<()>(
            s.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(|e| FsError::io("recv", e.into()))?;
        for c in msg.cmsgs().map_err(|e| FsError::io("recv", e.into()))? {
            if let ControlMessageOwned::ScmRights(fds) = c {
                for f in fds {
                    // SAFETY: the kernel just gave us this descriptor.
                    let owned = unsafe { OwnedFd::from_raw_fd(f) };
                    if fd.is_none() {
                        fd = Some(owned);
                    }
                }
            }
        }
        if msg.bytes == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(FsError::Protocol("stream ended inside a frame".into()));
        }
        got += msg.bytes;
    }
    let total = u32::from_le_bytes(len[..4].try_into().unwrap()) as usize;
    let hlen = u32::from_le_bytes(len[4..].try_into().unwrap()) as usize;
    if !(8..=MAX_FRAME).contains(&total) || hlen > total - 8 {
        return Err(FsError::Protocol(format!(
            "frame of {total} bytes with a {hlen}-byte header"
        )));
    }
    let mut rest = vec![0u8; total - 8];
    let mut r = s;
    r.read_exact(&mut rest)
        .map_err(|e| FsError::io("recv", e))?;
    let bin = rest.split_off(hlen);
    Ok(Some(Frame {
        header: rest,
        bin,
        fd,
    }))
}

/// Decodes a JSON header.
pub fn parse<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Result<T> {
    serde_json::from_slice(b).map_err(|e| FsError::Protocol(format!("bad header: {e}")))
}

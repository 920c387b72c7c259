//! The wire protocol between libFS and the service: frames in a connection's rings
//! ([`ring`]), and on its Unix stream socket for the welcome and revocations.
//!
//! A frame is its length (u32, the bytes after it, at most [`MAX_FRAME`]), a message
//! type (u8), the request number (u64; 0 for what the service sends unasked), the
//! message's fields (little-endian, fixed widths; lists and strings carry their length
//! first), then, for a batch or a data write, the attachment: the rest of the frame.
//! Journals travel as the checksummed records of [`crate::journal`]. The service sends
//! descriptors (the metadata space, its end of the revocation socket, the rings, domain
//! data spaces) with `SCM_RIGHTS` on the socket: with the welcome's first byte, and for
//! a reply in the ring ahead of it (see [`Outbox::flush_ring`]).
//!
//! A fixed binary layout instead of the JSON envelope it replaces: decoding a frame is
//! a few bounds checks, with no allocation beyond what its lists hold, and every decoder
//! names the byte offset and field where a frame stops making sense ([`WireError`]).
//! Nothing a peer sends is trusted: lengths and counts are checked against the bytes
//! that are there before anything is allocated for them.

mod io;
pub mod ring;

pub use io::{
    FrameReader, Outbox, RingReader, drain_doorbells, recv_frame, ring_doorbell, send_frame,
    send_frame_ring,
};

use thiserror::Error;

/// Largest frame accepted (a batch of a few thousand records, or a data write of a few
/// MiB, fits easily).
pub const MAX_FRAME: usize = 16 << 20;

/// Bytes of the length field in front of every frame.
pub const LEN_BYTES: usize = 4;

/// Longest error message a reply carries (longer ones are cut).
pub const MAX_MESSAGE: usize = 4096;

/// A client's request; the id pairs it with its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Acquire a lease on an object (and so on everything below it).
    Acquire {
        /// The object (an inode number or a directory bucket's key).
        key: u64,
        /// Exclusive (to change) or shared (to read).
        exclusive: bool,
    },
    /// Acquire a lease only if that needs no other client to give anything back and
    /// no earlier request waits for it: granted at once, or answered with grant 0.
    /// Clients ask this way for a lease wider than they need (a whole directory), so
    /// that asking never takes leases from others.
    TryAcquire {
        /// The object (an inode number or a directory bucket's key).
        key: u64,
        /// Exclusive (to change) or shared (to read).
        exclusive: bool,
    },
    /// Give up a lease, after applying the attached batch (possibly empty).
    Release {
        /// The object.
        key: u64,
        /// The grant given up.
        grant: u64,
    },
    /// Apply the attached batch now (fsync, or a full journal).
    Ship,
    /// Reserve free inodes and free data pages of a domain for local allocation. The
    /// service grants as many as it can within the client's limits, at least one of
    /// each kind asked for (pages in whole extents), or refuses.
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
    /// The domain of owner `uid`, group `gid` and permission bits `mode`, created if
    /// needed; its data space comes attached. Only root may ask for another owner's.
    Domain {
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
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
    /// Change an object's attributes (chmod, chown, utimes); the service moves a file's
    /// data to the domain of its new owner, group and mode.
    SetAttr {
        /// The object.
        ino: u64,
        /// The change.
        change: crate::apply::AttrChange,
    },
    /// Write the attached bytes at byte `offset` of domain `domain`'s data space: the
    /// path for a client that may write a domain but not read it, which gets no mapping
    /// (memory cannot be write-only, and a writable mapping is also a readable one).
    WriteData {
        /// The domain.
        domain: u16,
        /// Byte offset in the data space (page `p` starts at `p * PAGE`).
        offset: u64,
    },
}

/// The kind of a refusal, so that libFS can report it as the right error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ErrKind {
    /// The request or batch is invalid (a rejected batch names its operation).
    Refused = 1,
    /// The client lacks the permission.
    Denied = 2,
    /// Nothing left to grant, or the client's limit is reached.
    NoSpace = 3,
    /// What the request names does not exist.
    NotFound = 4,
}

impl ErrKind {
    fn from_u8(v: u8) -> Option<ErrKind> {
        [
            ErrKind::Refused,
            ErrKind::Denied,
            ErrKind::NoSpace,
            ErrKind::NotFound,
        ]
        .into_iter()
        .find(|k| *k as u8 == v)
    }
}

/// How a client may reach a domain's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum DataAccess {
    /// A read-only mapping (descriptor attached).
    Read = 1,
    /// A read-write mapping (descriptor attached).
    ReadWrite = 2,
    /// No mapping: writes go through the service ([`Request::WriteData`]).
    WriteOnly = 3,
}

impl DataAccess {
    fn from_u8(v: u8) -> Option<DataAccess> {
        [
            DataAccess::Read,
            DataAccess::ReadWrite,
            DataAccess::WriteOnly,
        ]
        .into_iter()
        .find(|k| *k as u8 == v)
    }
}

/// The service's answer, or a message it sends on its own (id 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Done.
    Ok,
    /// Refused, with the reason (for a batch: the operation that failed and why).
    Err(ErrKind, String),
    /// First message on a connection; the metadata space (read-only) and the client's
    /// end of its revocation socket come attached.
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
    /// A domain: its data space is attached unless the client may only write it.
    Domain {
        /// The domain.
        domain: u16,
        /// How the client may reach its data.
        access: DataAccess,
    },
    /// A shipped batch was applied; these are the metadata pages the service wrote for
    /// it, as pairs of page number and the page's trailer (checksum and kind), so that
    /// libFS can keep its own image of a page the service wrote exactly as libFS did
    /// instead of reading it back. (A plain [`Reply::Ok`] to a ship says the service
    /// wrote more than it can list, and libFS forgets every page it changed.)
    Shipped {
        /// Page number, trailer, page number, trailer, ...
        written: Vec<u64>,
    },
    /// A lease was granted.
    Granted {
        /// The grant's number (never 0, which answers a [`Request::TryAcquire`] that
        /// was not granted).
        grant: u64,
    },
    /// Unsolicited, on the revocation socket: another client needs a lease that
    /// conflicts with this one; ship the journal and release it.
    Revoke {
        /// The object.
        key: u64,
        /// The grant revoked.
        grant: u64,
    },
}

/// A frame that does not decode: where and why.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("frame byte {offset}: {field}: {why}")]
pub struct WireError {
    /// Byte offset in the frame body (after the length field).
    pub offset: usize,
    /// The field being read.
    pub field: &'static str,
    /// What is wrong.
    pub why: String,
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], WireError> {
        let left = self.b.len() - self.pos;
        if left < n {
            return Err(WireError {
                offset: self.pos,
                field,
                why: format!("needs {n} bytes, {left} remain"),
            });
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self, f: &'static str) -> Result<u8, WireError> {
        Ok(self.take(1, f)?[0])
    }
    fn u16(&mut self, f: &'static str) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.take(2, f)?.try_into().expect("2")))
    }
    fn u32(&mut self, f: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.take(4, f)?.try_into().expect("4")))
    }
    fn u64(&mut self, f: &'static str) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.take(8, f)?.try_into().expect("8")))
    }
    fn bool(&mut self, f: &'static str) -> Result<bool, WireError> {
        let at = self.pos;
        match self.u8(f)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(WireError {
                offset: at,
                field: f,
                why: format!("{v} is neither 0 nor 1"),
            }),
        }
    }
    /// A list of u64s: its length (u32), checked against the bytes left before anything
    /// is allocated, then the values.
    fn u64s(&mut self, f: &'static str) -> Result<Vec<u64>, WireError> {
        let at = self.pos;
        let n = self.u32(f)? as usize;
        let left = self.b.len() - self.pos;
        if n > left / 8 {
            return Err(WireError {
                offset: at,
                field: f,
                why: format!("{n} values cannot fit the {left} bytes left"),
            });
        }
        (0..n).map(|_| self.u64(f)).collect()
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.pos..];
        self.pos = self.b.len();
        s
    }
    fn end(&self) -> Result<(), WireError> {
        if self.pos != self.b.len() {
            return Err(WireError {
                offset: self.pos,
                field: "frame",
                why: format!("{} bytes after the last field", self.b.len() - self.pos),
            });
        }
        Ok(())
    }
}

/// Builds a frame: the length field, then the body `fill` writes.
fn frame(ty: u8, id: u64, fill: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&[0; LEN_BYTES]);
    out.push(ty);
    out.extend_from_slice(&id.to_le_bytes());
    fill(&mut out);
    let len = (out.len() - LEN_BYTES) as u32;
    out[..LEN_BYTES].copy_from_slice(&len.to_le_bytes());
    out
}

fn put_u64s(out: &mut Vec<u8>, v: &[u64]) {
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// Encodes request `req` numbered `id`, with `attach` after its fields (the batch of a
/// ship or release, the bytes of a data write; empty otherwise), as a whole frame.
pub fn encode_request(id: u64, req: &Request, attach: &[u8]) -> Vec<u8> {
    let (ty, body) = request_body(req);
    frame(ty, id, |o| {
        o.extend_from_slice(&body);
        o.extend_from_slice(attach);
    })
}

fn request_body(req: &Request) -> (u8, Vec<u8>) {
    let mut o = Vec::with_capacity(32);
    let ty = match req {
        Request::Acquire { key, exclusive } => {
            o.extend_from_slice(&key.to_le_bytes());
            o.push(u8::from(*exclusive));
            1
        }
        Request::Release { key, grant } => {
            o.extend_from_slice(&key.to_le_bytes());
            o.extend_from_slice(&grant.to_le_bytes());
            2
        }
        Request::TryAcquire { key, exclusive } => {
            o.extend_from_slice(&key.to_le_bytes());
            o.push(u8::from(*exclusive));
            11
        }
        Request::Ship => 3,
        Request::Reserve {
            inodes,
            domain,
            pages,
            extent,
        } => {
            o.extend_from_slice(&inodes.to_le_bytes());
            o.extend_from_slice(&domain.to_le_bytes());
            o.extend_from_slice(&pages.to_le_bytes());
            o.extend_from_slice(&extent.to_le_bytes());
            4
        }
        Request::Domain { uid, gid, mode } => {
            for v in [uid, gid, mode] {
                o.extend_from_slice(&v.to_le_bytes());
            }
            5
        }
        Request::MapDomain { domain } => {
            o.extend_from_slice(&domain.to_le_bytes());
            6
        }
        Request::Opened { inos } => {
            put_u64s(&mut o, inos);
            7
        }
        Request::Close { ino } => {
            o.extend_from_slice(&ino.to_le_bytes());
            8
        }
        Request::SetAttr { ino, change } => {
            o.extend_from_slice(&ino.to_le_bytes());
            let flags = u8::from(change.mode.is_some())
                | u8::from(change.uid.is_some()) << 1
                | u8::from(change.gid.is_some()) << 2
                | u8::from(change.mtime.is_some()) << 3;
            o.push(flags);
            o.extend_from_slice(&change.mode.unwrap_or(0).to_le_bytes());
            o.extend_from_slice(&change.uid.unwrap_or(0).to_le_bytes());
            o.extend_from_slice(&change.gid.unwrap_or(0).to_le_bytes());
            o.extend_from_slice(&change.mtime.unwrap_or(0).to_le_bytes());
            9
        }
        Request::WriteData { domain, offset } => {
            o.extend_from_slice(&domain.to_le_bytes());
            o.extend_from_slice(&offset.to_le_bytes());
            10
        }
    };
    (ty, o)
}

/// Decodes a request frame's body (the bytes after the length field): its number,
/// the request, and its attachment (empty for requests that carry none; any byte
/// after the fields of one of those is an error).
pub fn decode_request(b: &[u8]) -> Result<(u64, Request, &[u8]), WireError> {
    let mut r = Reader { b, pos: 0 };
    let ty = r.u8("message type")?;
    let id = r.u64("request id")?;
    let req = match ty {
        1 => Request::Acquire {
            key: r.u64("key")?,
            exclusive: r.bool("exclusive")?,
        },
        2 => Request::Release {
            key: r.u64("key")?,
            grant: r.u64("grant")?,
        },
        3 => Request::Ship,
        11 => Request::TryAcquire {
            key: r.u64("key")?,
            exclusive: r.bool("exclusive")?,
        },
        4 => Request::Reserve {
            inodes: r.u32("inodes")?,
            domain: r.u16("domain")?,
            pages: r.u32("pages")?,
            extent: r.u32("extent")?,
        },
        5 => Request::Domain {
            uid: r.u32("uid")?,
            gid: r.u32("gid")?,
            mode: r.u32("mode")?,
        },
        6 => Request::MapDomain {
            domain: r.u16("domain")?,
        },
        7 => Request::Opened {
            inos: r.u64s("inodes")?,
        },
        8 => Request::Close { ino: r.u64("ino")? },
        9 => decode_set_attr(&mut r)?,
        10 => Request::WriteData {
            domain: r.u16("domain")?,
            offset: r.u64("offset")?,
        },
        t => {
            return Err(WireError {
                offset: 0,
                field: "message type",
                why: format!("{t} is not a request"),
            });
        }
    };
    let attach = match req {
        Request::Release { .. } | Request::Ship | Request::WriteData { .. } => r.rest(),
        _ => {
            r.end()?;
            &[]
        }
    };
    Ok((id, req, attach))
}

fn decode_set_attr(r: &mut Reader<'_>) -> Result<Request, WireError> {
    let ino = r.u64("ino")?;
    let at = r.pos;
    let flags = r.u8("attribute flags")?;
    if flags & !0x0f != 0 {
        return Err(WireError {
            offset: at,
            field: "attribute flags",
            why: format!("{flags:#04x} has unknown bits"),
        });
    }
    let on = |bit: u8| flags & (1 << bit) != 0;
    // A field the flags leave out must be zero: one change, one encoding.
    let absent_zero = |bit: u8, v: u64, at: usize, f: &'static str| {
        if !on(bit) && v != 0 {
            return Err(WireError {
                offset: at,
                field: f,
                why: format!("{v} in a field the flags leave out"),
            });
        }
        Ok(())
    };
    let at = r.pos;
    let mode = r.u32("mode")?;
    absent_zero(0, mode.into(), at, "mode")?;
    let at = r.pos;
    let uid = r.u32("uid")?;
    absent_zero(1, uid.into(), at, "uid")?;
    let at = r.pos;
    let gid = r.u32("gid")?;
    absent_zero(2, gid.into(), at, "gid")?;
    let at = r.pos;
    let mtime = r.u64("mtime")?;
    absent_zero(3, mtime, at, "mtime")?;
    Ok(Request::SetAttr {
        ino,
        change: crate::apply::AttrChange {
            mode: on(0).then_some(mode),
            uid: on(1).then_some(uid),
            gid: on(2).then_some(gid),
            mtime: on(3).then_some(mtime),
        },
    })
}

/// Encodes reply `rep` to request `id` (0: unsolicited) as a whole frame.
pub fn encode_reply(id: u64, rep: &Reply) -> Vec<u8> {
    match rep {
        Reply::Ok => frame(64, id, |_| {}),
        Reply::Err(kind, msg) => frame(65, id, |o| {
            let mut n = msg.len().min(MAX_MESSAGE);
            while !msg.is_char_boundary(n) {
                n -= 1;
            }
            o.push(*kind as u8);
            o.extend_from_slice(&(n as u16).to_le_bytes());
            o.extend_from_slice(&msg.as_bytes()[..n]);
        }),
        Reply::Welcome { client, uid, gid } => frame(66, id, |o| {
            o.extend_from_slice(&client.to_le_bytes());
            o.extend_from_slice(&uid.to_le_bytes());
            o.extend_from_slice(&gid.to_le_bytes());
        }),
        Reply::Reserved { inodes, pages } => frame(67, id, |o| {
            put_u64s(o, inodes);
            put_u64s(o, pages);
        }),
        Reply::Domain { domain, access } => frame(68, id, |o| {
            o.extend_from_slice(&domain.to_le_bytes());
            o.push(*access as u8);
        }),
        Reply::Shipped { written } => frame(71, id, |o| put_u64s(o, written)),
        Reply::Granted { grant } => frame(69, id, |o| o.extend_from_slice(&grant.to_le_bytes())),
        Reply::Revoke { key, grant } => frame(70, id, |o| {
            o.extend_from_slice(&key.to_le_bytes());
            o.extend_from_slice(&grant.to_le_bytes());
        }),
    }
}

/// Decodes a reply frame's body (the bytes after the length field): the request it
/// answers and the reply.
pub fn decode_reply(b: &[u8]) -> Result<(u64, Reply), WireError> {
    let mut r = Reader { b, pos: 0 };
    let ty = r.u8("message type")?;
    let id = r.u64("request id")?;
    let rep = match ty {
        64 => Reply::Ok,
        65 => {
            let at = r.pos;
            let k = r.u8("error kind")?;
            let kind = ErrKind::from_u8(k).ok_or_else(|| WireError {
                offset: at,
                field: "error kind",
                why: format!("{k} is not an error kind"),
            })?;
            let n = r.u16("message length")? as usize;
            let at = r.pos;
            let bytes = r.take(n, "message")?;
            let msg = std::str::from_utf8(bytes).map_err(|e| WireError {
                offset: at + e.valid_up_to(),
                field: "message",
                why: "not UTF-8".into(),
            })?;
            Reply::Err(kind, msg.to_string())
        }
        66 => Reply::Welcome {
            client: r.u64("client")?,
            uid: r.u32("uid")?,
            gid: r.u32("gid")?,
        },
        67 => Reply::Reserved {
            inodes: r.u64s("inodes")?,
            pages: r.u64s("pages")?,
        },
        68 => {
            let domain = r.u16("domain")?;
            let at = r.pos;
            let a = r.u8("data access")?;
            let access = DataAccess::from_u8(a).ok_or_else(|| WireError {
                offset: at,
                field: "data access",
                why: format!("{a} is not a kind of data access"),
            })?;
            Reply::Domain { domain, access }
        }
        69 => Reply::Granted {
            grant: r.u64("grant")?,
        },
        70 => Reply::Revoke {
            key: r.u64("key")?,
            grant: r.u64("grant")?,
        },
        71 => {
            let at = r.pos;
            let written = r.u64s("written pages")?;
            if written.len() % 2 != 0 {
                return Err(WireError {
                    offset: at,
                    field: "written pages",
                    why: format!("{} values are not pairs", written.len()),
                });
            }
            Reply::Shipped { written }
        }
        t => {
            return Err(WireError {
                offset: 0,
                field: "message type",
                why: format!("{t} is not a reply"),
            });
        }
    };
    r.end()?;
    Ok((id, rep))
}

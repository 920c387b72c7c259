//! Moving frames: through a connection's rings ([`super::ring`]) for requests and
//! replies, with the socket beside them for doorbells, descriptors and the end of the
//! connection; over the socket alone for the welcome and revocations. libFS blocks
//! while it waits for its own replies; the service never does (one thread serves every
//! client, so a client that sends half a frame, or stops reading its replies, can stall
//! no one but itself).

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};

use super::ring::Rings;
use super::{LEN_BYTES, MAX_FRAME};
use crate::error::{FsError, Result};

/// Smallest frame body: a message type and a request number.
const MIN_BODY: usize = 9;

fn check_len(len: usize) -> Result<()> {
    if !(MIN_BODY..=MAX_FRAME).contains(&len) {
        return Err(FsError::Protocol(format!(
            "frame byte 0: length: {len} is outside {MIN_BODY}..={MAX_FRAME}"
        )));
    }
    Ok(())
}

/// Sends a whole frame (blocking), with `fds` attached to its first byte.
pub fn send_frame(s: &UnixStream, frame: &[u8], fds: &[RawFd]) -> Result<()> {
    let io = |e: Errno| FsError::io("send", e.into());
    let mut rest = frame;
    if !fds.is_empty() {
        let cmsg = [ControlMessage::ScmRights(fds)];
        let iov = [IoSlice::new(&frame[..1])];
        sendmsg::<()>(s.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None).map_err(io)?;
        rest = &frame[1..];
    }
    let mut w = s;
    w.write_all(rest).map_err(|e| FsError::io("send", e))
}

/// Descriptors in the control messages of a `recvmsg`.
fn take_fds(msg: &nix::sys::socket::RecvMsg<'_, '_, ()>, into: &mut Vec<OwnedFd>) -> Result<()> {
    for c in msg.cmsgs().map_err(|e| FsError::io("recv", e.into()))? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for f in fds {
                // SAFETY: the kernel just installed this descriptor for us.
                into.push(unsafe { OwnedFd::from_raw_fd(f) });
            }
        }
    }
    Ok(())
}

/// Receives one frame (blocking): its body and the descriptors that came with it;
/// `Ok(None)` at a clean end of stream.
pub fn recv_frame(s: &UnixStream) -> Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut len = [0u8; LEN_BYTES];
    let mut got = 0;
    let mut fds = Vec::new();
    while got < LEN_BYTES {
        let mut cmsg = nix::cmsg_space!([RawFd; 4]);
        let mut iov = [IoSliceMut::new(&mut len[got..])];
        let flags = MsgFlags::MSG_CMSG_CLOEXEC;
        let msg = match recvmsg::<()>(s.as_raw_fd(), &mut iov, Some(&mut cmsg), flags) {
            Err(Errno::EINTR) => continue,
            m => m.map_err(|e| FsError::io("recv", e.into()))?,
        };
        take_fds(&msg, &mut fds)?;
        if msg.bytes == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(FsError::Protocol(format!(
                "frame byte {got}: length: stream ended inside the length field"
            )));
        }
        got += msg.bytes;
    }
    let n = u32::from_le_bytes(len) as usize;
    check_len(n)?;
    // Grown as the bytes arrive, not allocated up front from a length the peer chose.
    let mut body = Vec::with_capacity(n.min(64 << 10));
    let mut r = s.take(n as u64);
    r.read_to_end(&mut body)
        .map_err(|e| FsError::io("recv", e))?;
    if body.len() != n {
        return Err(FsError::Protocol(format!(
            "frame byte {}: body: stream ended after {} of {n} bytes",
            body.len(),
            body.len()
        )));
    }
    Ok(Some((body, fds)))
}

/// A frame being assembled from a non-blocking socket.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out as frames.
    done: usize,
}

/// Most bytes read from one client per call, so that one busy client cannot starve the
/// others of the service's attention.
const READ_BUDGET: usize = 1 << 20;

impl FrameReader {
    /// Takes what the client's request ring holds (up to a budget) and returns the
    /// frame bodies now complete. A frame whose length is out of range, or ring indices
    /// that make no sense, are an error: the service drops the client.
    pub fn read_ring(&mut self, rings: &Rings) -> Result<Vec<Vec<u8>>> {
        rings.read_into(&mut self.buf, READ_BUDGET)?;
        self.frames()
    }

    /// The complete frames in the buffer, which keeps the incomplete tail.
    fn frames(&mut self) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        loop {
            let avail = &self.buf[self.done..];
            if avail.len() < LEN_BYTES {
                break;
            }
            let n = u32::from_le_bytes(avail[..LEN_BYTES].try_into().expect("4")) as usize;
            check_len(n)?;
            if avail.len() < LEN_BYTES + n {
                break;
            }
            out.push(avail[LEN_BYTES..LEN_BYTES + n].to_vec());
            self.done += LEN_BYTES + n;
        }
        if self.done > 0 {
            self.buf.drain(..self.done);
            self.done = 0;
        }
        Ok(out)
    }
}

/// One `recvmsg` on a socket that carries doorbells and descriptors, not frames: the
/// bytes read (0 at the end of the stream, which a reset also is), the descriptors
/// added to `fds`; `None` if `dontwait` and nothing was there.
fn recv_socket(s: &UnixStream, dontwait: bool, fds: &mut Vec<OwnedFd>) -> Result<Option<usize>> {
    let mut chunk = [0u8; 256];
    let mut flags = MsgFlags::MSG_CMSG_CLOEXEC;
    if dontwait {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    loop {
        let mut cmsg = nix::cmsg_space!([RawFd; 4]);
        let mut iov = [IoSliceMut::new(&mut chunk)];
        match recvmsg::<()>(s.as_raw_fd(), &mut iov, Some(&mut cmsg), flags) {
            Err(Errno::EAGAIN) if dontwait => return Ok(None),
            Err(Errno::EINTR) => continue,
            Err(Errno::ECONNRESET) => return Ok(Some(0)),
            Err(e) => return Err(FsError::io("recv", e.into())),
            Ok(msg) => {
                take_fds(&msg, fds)?;
                return Ok(Some(msg.bytes));
            }
        }
    }
}

/// Reads the doorbells waiting on a socket (without blocking) and drops them, with any
/// descriptors a client sent (it has no business sending any); true if the peer has
/// closed its end.
pub fn drain_doorbells(s: &UnixStream) -> Result<bool> {
    loop {
        match recv_socket(s, true, &mut Vec::new())? {
            None => return Ok(false),
            Some(0) => return Ok(true),
            Some(_) => {}
        }
    }
}

/// Wakes a peer asleep on its socket: one byte, dropped by whoever reads it. Never
/// blocks; a full socket already holds doorbells enough, and a broken one is noticed
/// by whoever reads it.
pub fn ring_doorbell(s: &UnixStream) {
    let _ = sendmsg::<()>(
        s.as_raw_fd(),
        &[IoSlice::new(&[DOORBELL])],
        &[],
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        None,
    );
}

/// libFS's end of the reply ring: the bytes of a frame not yet complete, and the
/// descriptors read off the socket ahead of the frames that announce them.
#[derive(Debug, Default)]
pub struct RingReader {
    buf: Vec<u8>,
    fds: VecDeque<OwnedFd>,
}

impl RingReader {
    /// Receives one reply frame from the rings (its body and the descriptors that came
    /// with it), looking at the ring for up to `spin` before sleeping on the socket
    /// until the service rings; `Ok(None)` once the service has closed the connection.
    pub fn recv_frame(
        &mut self,
        rings: &Rings,
        sock: &UnixStream,
        spin: Duration,
    ) -> Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
        let start = Instant::now();
        loop {
            if let Some(f) = self.take_frame(rings, sock)? {
                return Ok(Some(f));
            }
            if start.elapsed() < spin {
                // Yield between looks rather than spin in place: with more runnable
                // threads than processors (FileBench's 50 and 100), the thread that
                // will answer may need this one's processor. Spinning in place made
                // webserver x100 and varmail x16 about a tenth slower.
                std::thread::yield_now();
                continue;
            }
            rings.set_asleep(true);
            if rings.readable() {
                rings.set_asleep(false);
                continue;
            }
            let closed = self.read_socket(sock)?;
            rings.set_asleep(false);
            if closed {
                return match self.take_frame(rings, sock)? {
                    Some(f) => Ok(Some(f)),
                    None if self.buf.is_empty() => Ok(None),
                    None => Err(FsError::Protocol(
                        "the service closed the connection inside a frame".into(),
                    )),
                };
            }
        }
    }

    /// The next complete frame in the ring, with its descriptors (read off the socket,
    /// where the service sent them before the frame).
    fn take_frame(
        &mut self,
        rings: &Rings,
        sock: &UnixStream,
    ) -> Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
        if rings.readable() {
            rings.read_into(&mut self.buf, usize::MAX)?;
        }
        let head = 1 + LEN_BYTES;
        if self.buf.len() < head {
            return Ok(None);
        }
        let nfds = self.buf[0] as usize;
        let n = u32::from_le_bytes(self.buf[1..head].try_into().expect("4")) as usize;
        check_len(n)?;
        if self.buf.len() < head + n {
            return Ok(None);
        }
        let body = self.buf[head..head + n].to_vec();
        self.buf.drain(..head + n);
        while self.fds.len() < nfds {
            if self.read_socket(sock)? {
                return Err(FsError::Protocol(
                    "the service closed the connection before a frame's descriptors".into(),
                ));
            }
        }
        Ok(Some((body, self.fds.drain(..nfds).collect())))
    }

    /// Reads the socket (blocking): doorbells, which are dropped, and descriptors,
    /// which are kept for their frames. True at the end of the stream.
    fn read_socket(&mut self, sock: &UnixStream) -> Result<bool> {
        let mut got = Vec::new();
        let n = recv_socket(sock, false, &mut got)?;
        self.fds.extend(got);
        Ok(n == Some(0))
    }
}

/// Writes a whole frame into the request ring (blocking while the ring is full), and
/// rings the service's doorbell if it sleeps. An error if the service closes the
/// connection while the ring is full.
pub fn send_frame_ring(rings: &Rings, sock: &UnixStream, frame: &[u8]) -> Result<()> {
    let mut rest = frame;
    loop {
        let n = rings.write(rest)?;
        rest = &rest[n..];
        if n > 0 && rings.peer_asleep() {
            ring_doorbell(sock);
        }
        if rest.is_empty() {
            return Ok(());
        }
        // Full: the service drains it when it next looks. Wait a little, watching for
        // the end of the connection (not for doorbells, which are the reader's).
        let mut fds = [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(sock),
            nix::poll::PollFlags::from_bits_retain(libc::POLLRDHUP),
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(1u8)) {
            Ok(0) | Err(Errno::EINTR) => {}
            Ok(_) => {
                return Err(FsError::Protocol(
                    "the service closed the connection".into(),
                ));
            }
            Err(e) => return Err(FsError::io("poll", e.into())),
        }
    }
}

/// The byte of a doorbell on the socket.
const DOORBELL: u8 = 0;
/// The byte that carries a reply's descriptors on the socket (its frame goes in the
/// ring, announcing them).
const CARRIER: u8 = 1;

/// Frames waiting to go out on a non-blocking socket.
#[derive(Debug, Default)]
pub struct Outbox {
    queue: VecDeque<(Vec<u8>, Vec<OwnedFd>, usize)>,
    bytes: usize,
}

impl Outbox {
    /// Queues a whole frame with descriptors for its first byte.
    pub fn push(&mut self, frame: Vec<u8>, fds: Vec<OwnedFd>) {
        self.bytes += frame.len();
        self.queue.push_back((frame, fds, 0));
    }

    /// Bytes queued and not yet sent.
    pub fn pending(&self) -> usize {
        self.bytes
    }

    /// Writes what the reply ring takes, each frame behind one byte that counts the
    /// descriptors sent ahead of it on the socket `s`; true once everything is out.
    /// Rings `s`'s doorbell if the client sleeps and something was written.
    pub fn flush_ring(&mut self, rings: &Rings, s: &UnixStream) -> Result<bool> {
        let mut wrote = false;
        let done = loop {
            let Some((frame, fds, sent)) = self.queue.front_mut() else {
                break true;
            };
            if *sent == 0 {
                let n = u8::try_from(fds.len()).map_err(|_| {
                    FsError::Protocol(format!("{} descriptors for one frame", fds.len()))
                })?;
                // The count goes in only with its descriptors sent, and they go only
                // when the count has room: it can then not fail after them.
                if rings.room()? == 0 || (n > 0 && !send_carrier(s, fds)?) {
                    break false;
                }
                fds.clear();
                let one = rings.write(&[n])?;
                debug_assert_eq!(one, 1, "the ring had room");
                *sent = 1;
                wrote = true;
            }
            let n = rings.write(&frame[*sent - 1..])?;
            *sent += n;
            self.bytes -= n;
            wrote |= n > 0;
            if *sent - 1 < frame.len() {
                break false;
            }
            self.queue.pop_front();
        };
        if wrote && rings.peer_asleep() {
            ring_doorbell(s);
        }
        Ok(done)
    }

    /// Whether the frame in front waits to send descriptors on the socket (then the
    /// socket's room matters, not the ring's).
    pub fn waits_on_socket(&self) -> bool {
        self.queue
            .front()
            .is_some_and(|(_, fds, sent)| *sent == 0 && !fds.is_empty())
    }

    /// Sends what the socket takes without blocking; true once everything is out.
    pub fn flush(&mut self, s: &UnixStream) -> Result<bool> {
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        while let Some((frame, fds, sent)) = self.queue.front_mut() {
            let r = if *sent == 0 && !fds.is_empty() {
                let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
                let cmsg = [ControlMessage::ScmRights(&raw)];
                let iov = [IoSlice::new(&frame[..1])];
                sendmsg::<()>(s.as_raw_fd(), &iov, &cmsg, flags, None)
            } else {
                let iov = [IoSlice::new(&frame[*sent..])];
                sendmsg::<()>(s.as_raw_fd(), &iov, &[], flags, None)
            };
            match r {
                Err(Errno::EAGAIN) => return Ok(false),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(FsError::io("send", e.into())),
                Ok(n) => {
                    *sent += n;
                    self.bytes -= n;
                    if *sent == frame.len() {
                        self.queue.pop_front();
                    }
                }
            }
        }
        Ok(true)
    }
}

/// Sends `fds` on the socket behind one carrier byte; false if the socket is full.
fn send_carrier(s: &UnixStream, fds: &[OwnedFd]) -> Result<bool> {
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let cmsg = [ControlMessage::ScmRights(&raw)];
    let iov = [IoSlice::new(&[CARRIER])];
    let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    loop {
        match sendmsg::<()>(s.as_raw_fd(), &iov, &cmsg, flags, None) {
            Err(Errno::EAGAIN) => return Ok(false),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(FsError::io("send", e.into())),
            Ok(_) => return Ok(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Reply, decode_reply, encode_reply};

    fn frame(id: u64) -> Vec<u8> {
        encode_reply(id, &Reply::Ok)
    }

    /// A frame already there, one that comes while the reader sleeps, and the end of
    /// the stream: each is read as it should be.
    #[test]
    fn a_blocking_reader_gets_early_and_late_frames_and_the_end() {
        let (a, b) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            send_frame(&a, &frame(1), &[]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            send_frame(&a, &frame(2), &[]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        });
        for want in [1, 2] {
            let (body, fds) = recv_frame(&b).unwrap().expect("a frame");
            assert!(fds.is_empty());
            assert_eq!(decode_reply(&body).unwrap().0, want);
        }
        writer.join().unwrap();
        assert!(recv_frame(&b).unwrap().is_none());
    }
}

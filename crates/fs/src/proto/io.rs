//! Moving frames over a Unix stream socket: blocking for libFS (which waits for its
//! own replies), non-blocking for the service (one thread polls every client's socket,
//! so a client that sends half a frame, or stops reading its replies, can stall no one
//! but itself).

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};

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
    recv_frame_spinning(s, Duration::ZERO)
}

/// [`recv_frame`], but for up to `spin` the socket is polled without sleeping before the thread blocks:
/// a reply that comes within a service's handling time (microseconds) then costs no
/// sleep and no wake-up, which on a virtual machine is an inter-processor interrupt
/// through the hypervisor and several times the handling itself.
pub fn recv_frame_spinning(
    s: &UnixStream,
    spin: Duration,
) -> Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut len = [0u8; LEN_BYTES];
    let mut got = 0;
    let mut fds = Vec::new();
    let start = Instant::now();
    while got < LEN_BYTES {
        let mut cmsg = nix::cmsg_space!([RawFd; 4]);
        let mut iov = [IoSliceMut::new(&mut len[got..])];
        let spinning = got == 0 && !spin.is_zero() && start.elapsed() < spin;
        let flags = if spinning {
            MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT
        } else {
            MsgFlags::MSG_CMSG_CLOEXEC
        };
        let msg = recvmsg::<()>(s.as_raw_fd(), &mut iov, Some(&mut cmsg), flags);
        let msg = match msg {
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) if spinning => {
                // Yield rather than spin in place: with more runnable threads than
                // cores, the thread we wait for may need this one's core.
                std::thread::yield_now();
                continue;
            }
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
    /// Reads what the socket holds without blocking and returns the frame bodies now
    /// complete, and whether the peer has closed its end. Descriptors a client sends
    /// are closed unread (no request carries one). A frame whose length is out of range
    /// is an error: the service drops the client.
    pub fn read_from(&mut self, s: &UnixStream) -> Result<(Vec<Vec<u8>>, bool)> {
        let mut closed = false;
        let mut chunk = [0u8; 16384];
        let mut read = 0;
        while read < READ_BUDGET {
            let mut cmsg = nix::cmsg_space!([RawFd; 4]);
            let mut iov = [IoSliceMut::new(&mut chunk)];
            let r = recvmsg::<()>(
                s.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
            );
            let n = match r {
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(Errno::ECONNRESET) => {
                    closed = true;
                    break;
                }
                Err(e) => return Err(FsError::io("recv", e.into())),
                Ok(msg) => {
                    // Dropped at once: a client has no business sending descriptors.
                    let mut ignored = Vec::new();
                    take_fds(&msg, &mut ignored)?;
                    msg.bytes
                }
            };
            if n == 0 {
                closed = true;
                break;
            }
            self.buf.extend_from_slice(&chunk[..n]);
            read += n;
        }
        Ok((self.frames()?, closed))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Reply, decode_reply, encode_reply};

    fn frame(id: u64) -> Vec<u8> {
        encode_reply(id, &Reply::Ok)
    }

    /// A reply that comes while the reader polls, one that comes after it gave up
    /// polling and slept, and the end of the stream: each is read as the blocking
    /// reader reads it.
    #[test]
    fn a_spinning_reader_gets_early_and_late_frames_and_the_end() {
        let (a, b) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            send_frame(&a, &frame(1), &[]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            send_frame(&a, &frame(2), &[]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        });
        let spin = Duration::from_micros(200);
        for want in [1, 2] {
            let (body, fds) = recv_frame_spinning(&b, spin).unwrap().expect("a frame");
            assert!(fds.is_empty());
            assert_eq!(decode_reply(&body).unwrap().0, want);
        }
        writer.join().unwrap();
        assert!(recv_frame_spinning(&b, spin).unwrap().is_none());
    }
}

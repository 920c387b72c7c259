//! A minimal client of Redis's protocol (RESP2) over a Unix socket: what the
//! correctness test replays a recorded mix through against the real `redis-server`,
//! and what the SET-percentage sweep drives it with (one request in flight per
//! connection, as `redis-benchmark` without pipelining).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// A reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK` and other simple strings.
    Status(String),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// The null bulk string (a GET of a missing key).
    Nil,
    /// An integer.
    Int(i64),
    /// An error reply.
    Error(String),
}

/// One connection.
pub struct RespClient {
    out: UnixStream,
    inp: BufReader<UnixStream>,
    buf: Vec<u8>,
}

impl RespClient {
    /// Connects to the server's Unix socket.
    pub fn connect(socket: &Path) -> std::io::Result<RespClient> {
        let s = UnixStream::connect(socket)?;
        Ok(RespClient {
            out: s.try_clone()?,
            inp: BufReader::new(s),
            buf: Vec::new(),
        })
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, argv: &[&[u8]]) -> std::io::Result<Reply> {
        self.buf.clear();
        self.buf
            .extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
        for a in argv {
            self.buf
                .extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            self.buf.extend_from_slice(a);
            self.buf.extend_from_slice(b"\r\n");
        }
        self.out.write_all(&self.buf)?;
        self.read_reply()
    }

    fn read_reply(&mut self) -> std::io::Result<Reply> {
        let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        let mut line = Vec::new();
        self.inp.read_until(b'\n', &mut line)?;
        if line.len() < 3 || !line.ends_with(b"\r\n") {
            return Err(bad(format!(
                "reply line {:?} is not CRLF-terminated",
                String::from_utf8_lossy(&line)
            )));
        }
        let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        match line[0] {
            b'+' => Ok(Reply::Status(text)),
            b'-' => Ok(Reply::Error(text)),
            b':' => text
                .parse()
                .map(Reply::Int)
                .map_err(|_| bad(format!("integer reply {text:?}"))),
            b'$' => {
                let n: i64 = text
                    .parse()
                    .map_err(|_| bad(format!("bulk length {text:?}")))?;
                if n < 0 {
                    return Ok(Reply::Nil);
                }
                let mut v = vec![0u8; n as usize + 2];
                self.inp.read_exact(&mut v)?;
                v.truncate(n as usize);
                Ok(Reply::Bulk(v))
            }
            c => Err(bad(format!(
                "reply type {:?} not expected from GET or SET",
                c as char
            ))),
        }
    }
}

//! Property tests of every decoder that reads bytes another process wrote: the wire
//! protocol's request and reply decoders (`proto::decode_request`, `decode_reply`), its
//! two stream readers (`proto::recv_frame`, libFS's blocking one, and
//! `proto::FrameReader`, the service's reader of a client's request ring) and the journal behind a
//! shipped batch (`journal::decode_batch`, `decode_op`).
//!
//! Each decoder meets random bytes and mutated well-formed messages (bits flipped,
//! bytes replaced, cut short, bytes inserted, length and count fields forged): it must
//! decode or return an error naming the byte offset and the field, never panic, and
//! never allocate much more than the bytes it was given (a counting allocator watches
//! every allocation made while a decoder runs). Well-formed messages round-trip.
//!
//! The number of cases per decoder is `PROPTEST_CASES` (proptest's own variable;
//! 256 when unset, as CI runs it; a long run sets 100000), and each test prints
//! "decoder: N cases, 0 panics" for the record.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};

use pmlab_fs::apply::AttrChange;
use pmlab_fs::inode::Kind;
use pmlab_fs::journal::{Op, decode_batch, decode_op, encode_batch, encode_op};
use pmlab_fs::proto::{
    self, DataAccess, ErrKind, FrameReader, Reply, Request, decode_reply, decode_request,
    encode_reply, encode_request,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// The system allocator, noting the largest allocation a watched thread makes.
struct Counting;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is passed to the system allocator unchanged; the bookkeeping only
// touches thread-local cells, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size());
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size());
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note(new);
        unsafe { System.realloc(p, l, new) }
    }
}

fn note(size: usize) {
    let _ = WATCHING.try_with(|w| {
        if w.get() {
            let _ = LARGEST.try_with(|m| m.set(m.get().max(size)));
        }
    });
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns its result and the largest single allocation it made.
fn watched<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|m| m.set(0));
    WATCHING.with(|w| w.set(true));
    let r = f();
    WATCHING.with(|w| w.set(false));
    (r, LARGEST.with(|m| m.get()))
}

/// What a decoder may allocate for `input` bytes: a few times the input (a list grows
/// by doubling), plus a constant for buffers of fixed size.
fn alloc_bound(input: usize) -> usize {
    4 * input + (80 << 10)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// Runs `check` on `cases()` values of `strategy`, counting cases and panics (a panic is
/// a failure that proptest shrinks and reports), and prints the figures.
fn run<S: Strategy>(name: &str, strategy: S, check: impl Fn(S::Value) -> Result<(), String>)
where
    S::Value: Clone,
{
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let n = AtomicU64::new(0);
    let panics = AtomicU64::new(0);
    let result = runner.run(&strategy, |v| {
        n.fetch_add(1, Ordering::Relaxed);
        match std::panic::catch_unwind(AssertUnwindSafe(|| check(v))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(TestCaseError::fail(why)),
            Err(_) => {
                panics.fetch_add(1, Ordering::Relaxed);
                Err(TestCaseError::fail("the decoder panicked"))
            }
        }
    });
    println!(
        "{name}: {} cases, {} panics",
        n.load(Ordering::Relaxed),
        panics.load(Ordering::Relaxed)
    );
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}

fn arb_change() -> impl Strategy<Value = AttrChange> {
    (
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(mode, uid, gid, mtime)| AttrChange {
            mode,
            uid,
            gid,
            mtime,
        })
}

fn arb_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (any::<u64>(), any::<bool>())
            .prop_map(|(key, exclusive)| Request::Acquire { key, exclusive }),
        (any::<u64>(), any::<bool>())
            .prop_map(|(key, exclusive)| Request::TryAcquire { key, exclusive }),
        (any::<u64>(), any::<u64>()).prop_map(|(key, grant)| Request::Release { key, grant }),
        Just(Request::Ship),
        (any::<u32>(), any::<u16>(), any::<u32>(), any::<u32>()).prop_map(
            |(inodes, domain, pages, extent)| Request::Reserve {
                inodes,
                domain,
                pages,
                extent
            }
        ),
        (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(uid, gid, mode)| Request::Domain {
            uid,
            gid,
            mode
        }),
        any::<u16>().prop_map(|domain| Request::MapDomain { domain }),
        proptest::collection::vec(any::<u64>(), 0..8).prop_map(|inos| Request::Opened { inos }),
        any::<u64>().prop_map(|ino| Request::Close { ino }),
        (any::<u64>(), arb_change()).prop_map(|(ino, change)| Request::SetAttr { ino, change }),
        (any::<u16>(), any::<u64>())
            .prop_map(|(domain, offset)| Request::WriteData { domain, offset }),
    ]
}

fn arb_err_kind() -> impl Strategy<Value = ErrKind> {
    prop_oneof![
        Just(ErrKind::Refused),
        Just(ErrKind::Denied),
        Just(ErrKind::NoSpace),
        Just(ErrKind::NotFound)
    ]
}

fn arb_reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        Just(Reply::Ok),
        (arb_err_kind(), ".{0,80}").prop_map(|(k, m)| Reply::Err(k, m)),
        (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(client, uid, gid)| Reply::Welcome {
            client,
            uid,
            gid
        }),
        (
            proptest::collection::vec(any::<u64>(), 0..20),
            proptest::collection::vec(any::<u64>(), 0..20)
        )
            .prop_map(|(inodes, pages)| Reply::Reserved { inodes, pages }),
        (
            any::<u16>(),
            prop_oneof![
                Just(DataAccess::Read),
                Just(DataAccess::ReadWrite),
                Just(DataAccess::WriteOnly)
            ]
        )
            .prop_map(|(domain, access)| Reply::Domain { domain, access }),
        any::<u64>().prop_map(|grant| Reply::Granted { grant }),
        (any::<u64>(), any::<u64>()).prop_map(|(key, grant)| Reply::Revoke { key, grant }),
        proptest::collection::vec((any::<u64>(), any::<u64>()), 0..20).prop_map(|pairs| {
            Reply::Shipped {
                written: pairs.into_iter().flat_map(|(p, t)| [p, t]).collect(),
            }
        }),
    ]
}

fn arb_name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9._-]{1,40}"
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            any::<u64>(),
            arb_name(),
            any::<u64>(),
            1u8..4,
            any::<u32>(),
            any::<u16>()
        )
            .prop_map(|(parent, name, ino, k, mode, domain)| Op::Create {
                parent,
                name,
                ino,
                kind: Kind::from_u8(k).unwrap(),
                mode,
                domain
            }),
        (any::<u64>(), arb_name(), any::<u64>()).prop_map(|(parent, name, ino)| Op::Link {
            parent,
            name,
            ino
        }),
        (any::<u64>(), arb_name(), any::<u64>()).prop_map(|(parent, name, ino)| Op::Unlink {
            parent,
            name,
            ino
        }),
        (
            any::<u64>(),
            arb_name(),
            any::<u64>(),
            arb_name(),
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(
                |(from_parent, from_name, to_parent, to_name, ino, replace)| Op::Rename {
                    from_parent,
                    from_name,
                    to_parent,
                    to_name,
                    ino,
                    replace
                }
            ),
        (any::<u64>(), any::<u64>()).prop_map(|(ino, size)| Op::SetSize { ino, size }),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(ino, index, page, count)| Op::MapPages {
                ino,
                index,
                page,
                count
            }
        ),
        any::<u64>().prop_map(|now| Op::Stamp { now }),
    ]
}

/// A change to a well-formed message: each kind of damage a peer could do.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(prop::sample::Index, u8),
    Set(prop::sample::Index, u8),
    Cut(prop::sample::Index),
    Insert(prop::sample::Index, Vec<u8>),
    /// A 32-bit little-endian field (a length or a count) replaced.
    Forge32(prop::sample::Index, u32),
}

fn arb_mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let one = prop_oneof![
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, v)| Mutation::Set(i, v)),
        any::<prop::sample::Index>().prop_map(Mutation::Cut),
        (
            any::<prop::sample::Index>(),
            proptest::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        (
            any::<prop::sample::Index>(),
            prop_oneof![0u32..64, any::<u32>(), Just(u32::MAX)]
        )
            .prop_map(|(i, v)| Mutation::Forge32(i, v)),
    ];
    proptest::collection::vec(one, 1..4)
}

fn mutate(mut b: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    for m in ms {
        if b.is_empty() {
            break;
        }
        match m {
            Mutation::Flip(i, bit) => {
                let i = i.index(b.len());
                b[i] ^= 1 << bit;
            }
            Mutation::Set(i, v) => {
                let i = i.index(b.len());
                b[i] = *v;
            }
            Mutation::Cut(i) => {
                let i = i.index(b.len());
                b.truncate(i);
            }
            Mutation::Insert(i, v) => {
                let i = i.index(b.len() + 1);
                b.splice(i..i, v.iter().copied());
            }
            Mutation::Forge32(i, v) => {
                let i = i.index(b.len());
                let end = (i + 4).min(b.len());
                b[i..end].copy_from_slice(&v.to_le_bytes()[..end - i]);
            }
        }
    }
    b
}

/// A decoder error must name where: an offset within the input and a field.
fn located(offset: usize, field: &str, len: usize, what: &str) -> Result<(), String> {
    if offset > len || field.is_empty() {
        return Err(format!(
            "{what}: error at offset {offset} ({field:?}) of {len} bytes"
        ));
    }
    Ok(())
}

fn check_request(body: &[u8]) -> Result<(), String> {
    let (r, big) = watched(|| decode_request(body).map(|(id, req, a)| (id, req, a.len())));
    if big > alloc_bound(body.len()) {
        return Err(format!(
            "allocated {big} bytes for {} input bytes",
            body.len()
        ));
    }
    match r {
        Ok((id, req, attach)) => {
            // What decodes must encode to the same bytes.
            let again = encode_request(id, &req, &body[body.len() - attach..]);
            if again[proto::LEN_BYTES..] != *body {
                return Err(format!("{req:?} decoded but re-encodes differently"));
            }
            Ok(())
        }
        Err(e) => located(e.offset, e.field, body.len(), "request"),
    }
}

fn check_reply(body: &[u8]) -> Result<(), String> {
    let (r, big) = watched(|| decode_reply(body));
    if big > alloc_bound(body.len()) {
        return Err(format!(
            "allocated {big} bytes for {} input bytes",
            body.len()
        ));
    }
    match r {
        Ok((id, rep)) => {
            let again = encode_reply(id, &rep);
            if again[proto::LEN_BYTES..] != *body {
                return Err(format!("{rep:?} decoded but re-encodes differently"));
            }
            Ok(())
        }
        Err(e) => located(e.offset, e.field, body.len(), "reply"),
    }
}

fn check_batch(b: &[u8]) -> Result<(), String> {
    let (r, big) = watched(|| decode_batch(b));
    if big > alloc_bound(b.len()) {
        return Err(format!("allocated {big} bytes for {} input bytes", b.len()));
    }
    match r {
        Ok(ops) if encode_batch(&ops) != b => {
            Err("a batch decoded but re-encodes differently".into())
        }
        Ok(_) => Ok(()),
        Err(e) => located(e.offset, e.field, b.len(), "batch"),
    }
}

/// Feeds `bytes` to libFS's blocking frame reader as a peer that then hangs up; every
/// error must name a byte and the allocation stay bounded.
fn check_recv_frame(bytes: &[u8]) -> Result<(), String> {
    let (mut tx, rx) = UnixStream::pair().unwrap();
    tx.write_all(bytes).unwrap();
    drop(tx);
    let (r, big) = watched(|| {
        let mut out = Vec::new();
        loop {
            match proto::recv_frame(&rx) {
                Ok(Some((body, _))) => out.push(Ok(body.len())),
                Ok(None) => return out,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
            }
        }
    });
    if big > alloc_bound(bytes.len()) {
        return Err(format!(
            "allocated {big} bytes for {} input bytes",
            bytes.len()
        ));
    }
    match r.last() {
        Some(Err(e)) if !e.contains("byte") && !e.contains("recv") => {
            Err(format!("error without a place: {e}"))
        }
        _ => Ok(()),
    }
}

/// Feeds `bytes` to the service's frame reader through a client's request ring, in
/// pieces.
fn check_frame_reader(bytes: &[u8], split: usize) -> Result<(), String> {
    let (service, fd) = proto::ring::Rings::create().unwrap();
    let client = proto::ring::Rings::open(&fd).unwrap();
    let mut reader = FrameReader::default();
    let cut = split.min(bytes.len());
    let mut total = 0;
    for part in [&bytes[..cut], &bytes[cut..]] {
        assert_eq!(client.write(part).unwrap(), part.len());
        let (r, big) = watched(|| reader.read_ring(&service));
        if big > alloc_bound(bytes.len()) {
            return Err(format!(
                "allocated {big} bytes for {} input bytes",
                bytes.len()
            ));
        }
        match r {
            Ok(frames) => total += frames.iter().map(|f| f.len() + 4).sum::<usize>(),
            Err(e) if e.to_string().contains("byte") => return Ok(()),
            Err(e) => return Err(format!("error without a place: {e}")),
        }
    }
    if total > bytes.len() {
        return Err(format!(
            "{total} bytes of frames from {} bytes",
            bytes.len()
        ));
    }
    Ok(())
}

fn random_bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..600)
}

#[test]
fn request_decoder() {
    run("decode_request, random bytes", random_bytes(), |b| {
        check_request(&b)
    });
    run(
        "decode_request, mutated requests",
        (
            any::<u64>(),
            arb_request(),
            proptest::collection::vec(any::<u8>(), 0..64),
            arb_mutations(),
        ),
        |(id, req, attach, ms)| {
            let carries = matches!(
                req,
                Request::Ship | Request::Release { .. } | Request::WriteData { .. }
            );
            let f = encode_request(id, &req, if carries { &attach } else { &[] });
            check_request(&mutate(f[proto::LEN_BYTES..].to_vec(), &ms))
        },
    );
}

#[test]
fn reply_decoder() {
    run("decode_reply, random bytes", random_bytes(), |b| {
        check_reply(&b)
    });
    run(
        "decode_reply, mutated replies",
        (any::<u64>(), arb_reply(), arb_mutations()),
        |(id, rep, ms)| {
            let f = encode_reply(id, &rep);
            check_reply(&mutate(f[proto::LEN_BYTES..].to_vec(), &ms))
        },
    );
}

#[test]
fn journal_decoder() {
    run("decode_batch, random bytes", random_bytes(), |b| {
        check_batch(&b)
    });
    run(
        "decode_batch, mutated batches",
        (proptest::collection::vec(arb_op(), 0..6), arb_mutations()),
        |(ops, ms)| check_batch(&mutate(encode_batch(&ops), &ms)),
    );
    // Valid framing and checksum around random contents: random bytes almost never get
    // past the record checksums, so these reach the field decoders behind them.
    run(
        "decode_op, checksummed random records",
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..160)),
        |(ty, payload)| {
            let mut rec = (payload.len() as u32).to_le_bytes().to_vec();
            let mut body = vec![ty];
            body.extend_from_slice(&payload);
            rec.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
            rec.extend_from_slice(&body);
            let (r, big) = watched(|| decode_op(&rec, 0));
            if big > alloc_bound(rec.len()) {
                return Err(format!("allocated {big} bytes"));
            }
            match r {
                Ok((op, used)) => {
                    let mut again = Vec::new();
                    encode_op(&op, &mut again);
                    if used != rec.len() || again != rec {
                        return Err(format!("{op:?} decoded but re-encodes differently"));
                    }
                    Ok(())
                }
                Err(e) => located(e.offset, e.field, rec.len(), "record"),
            }
        },
    );
}

#[test]
fn blocking_frame_reader() {
    run("recv_frame, random bytes", random_bytes(), |b| {
        check_recv_frame(&b)
    });
    run(
        "recv_frame, mutated frames",
        (
            proptest::collection::vec((any::<u64>(), arb_reply()), 1..4),
            arb_mutations(),
        ),
        |(reps, ms)| {
            let mut stream = Vec::new();
            for (id, r) in &reps {
                stream.extend_from_slice(&encode_reply(*id, r));
            }
            check_recv_frame(&mutate(stream, &ms))
        },
    );
}

#[test]
fn service_frame_reader() {
    run(
        "FrameReader, random bytes",
        (random_bytes(), any::<usize>()),
        |(b, split)| check_frame_reader(&b, split % (b.len() + 1)),
    );
    run(
        "FrameReader, mutated frames",
        (
            proptest::collection::vec((any::<u64>(), arb_request()), 1..4),
            arb_mutations(),
            any::<usize>(),
        ),
        |(reqs, ms, split)| {
            let mut stream = Vec::new();
            for (id, r) in &reqs {
                let carries = matches!(
                    r,
                    Request::Ship | Request::Release { .. } | Request::WriteData { .. }
                );
                stream.extend_from_slice(&encode_request(
                    *id,
                    r,
                    if carries { b"attachment" } else { b"" },
                ));
            }
            let b = mutate(stream, &ms);
            check_frame_reader(&b, split % (b.len() + 1))
        },
    );
}

#[test]
fn messages_round_trip() {
    run(
        "requests round trip",
        (
            any::<u64>(),
            arb_request(),
            proptest::collection::vec(any::<u8>(), 0..256),
        ),
        |(id, req, attach)| {
            let carries = matches!(
                req,
                Request::Ship | Request::Release { .. } | Request::WriteData { .. }
            );
            let want_att: &[u8] = if carries { &attach } else { &[] };
            let f = encode_request(id, &req, want_att);
            let (gid, greq, gatt) =
                decode_request(&f[proto::LEN_BYTES..]).map_err(|e| e.to_string())?;
            if (gid, &greq) != (id, &req) || gatt != want_att {
                return Err(format!("{req:?} came back as {greq:?}"));
            }
            Ok(())
        },
    );
    run(
        "replies round trip over a socket, with a descriptor",
        (any::<u64>(), arb_reply(), any::<bool>()),
        |(id, rep, attach)| {
            let (tx, rx) = UnixStream::pair().unwrap();
            let file = tempfile::tempfile().unwrap();
            let fds: Vec<i32> = if attach {
                vec![file.as_raw_fd()]
            } else {
                vec![]
            };
            proto::send_frame(&tx, &encode_reply(id, &rep), &fds).map_err(|e| e.to_string())?;
            let (body, got) = proto::recv_frame(&rx)
                .map_err(|e| e.to_string())?
                .ok_or("no frame")?;
            let (gid, grep) = decode_reply(&body).map_err(|e| e.to_string())?;
            if (gid, &grep) != (id, &rep) || got.len() != usize::from(attach) {
                return Err(format!(
                    "{rep:?} came back as {grep:?} with {} fds",
                    got.len()
                ));
            }
            drop(tx);
            match proto::recv_frame(&rx) {
                Ok(None) => Ok(()),
                other => Err(format!(
                    "no clean end after the frame: {:?}",
                    other.map(|o| o.is_some())
                )),
            }
        },
    );
}

#[test]
fn errors_name_the_offset_and_field() {
    let f = encode_request(
        7,
        &Request::Opened {
            inos: vec![1, 2, 3],
        },
        &[],
    );
    let mut body = f[proto::LEN_BYTES..].to_vec();
    // The count says 1000 values; 24 bytes follow it.
    body[9..13].copy_from_slice(&1000u32.to_le_bytes());
    let e = decode_request(&body).unwrap_err();
    assert_eq!((e.offset, e.field), (9, "inodes"), "{e}");
    let e = decode_reply(&[70, 0, 0]).unwrap_err();
    assert_eq!((e.offset, e.field), (1, "request id"), "{e}");
    let e = decode_request(&[99; 9]).unwrap_err();
    assert_eq!((e.offset, e.field), (0, "message type"), "{e}");
    let mut b = encode_batch(&[Op::SetSize { ino: 3, size: 9 }]);
    b[20] ^= 0xff;
    let e = decode_batch(&b).unwrap_err();
    assert_eq!((e.offset, e.field), (12, "record checksum"));
}

//! Property tests of the decoders that read bytes another process wrote: the service's
//! socket frames and JSON headers (`proto`), and the journal records behind them
//! (`journal`). Random input must be refused with an error, never a panic, and every
//! well-formed message must decode to what was encoded.
//!
//! The journal's own tests already cover round trips, random bytes and single bit flips;
//! random bytes almost never get past its batch magic and record checksums, so the
//! journal properties here forge valid framing and checksums around random contents.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use pmlab_fs::journal::{decode_batch, decode_op, encode_batch, encode_op};
use pmlab_fs::proto::{self, RepHeader, Reply, ReqHeader, Request};
use proptest::prelude::*;

fn arb_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (any::<u64>(), any::<bool>())
            .prop_map(|(ino, exclusive)| Request::Acquire { ino, exclusive }),
        (any::<u64>(), any::<u64>()).prop_map(|(ino, grant)| Request::Release { ino, grant }),
        Just(Request::Ship),
        (any::<u32>(), any::<u16>(), any::<u32>(), any::<u32>()).prop_map(
            |(inodes, domain, pages, extent)| Request::Reserve {
                inodes,
                domain,
                pages,
                extent
            }
        ),
        any::<u32>().prop_map(|mode| Request::Domain { mode }),
        any::<u16>().prop_map(|domain| Request::MapDomain { domain }),
        proptest::collection::vec(any::<u64>(), 0..8).prop_map(|inos| Request::Opened { inos }),
        any::<u64>().prop_map(|ino| Request::Close { ino }),
    ]
}

fn arb_reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        Just(Reply::Ok),
        ".{0,80}".prop_map(Reply::Err),
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
        (any::<u16>(), any::<bool>())
            .prop_map(|(domain, writable)| Reply::Domain { domain, writable }),
        any::<u64>().prop_map(|grant| Reply::Granted { grant }),
        (any::<u64>(), any::<u64>()).prop_map(|(ino, grant)| Reply::Revoke { ino, grant }),
    ]
}

/// Feeds `bytes` to the frame decoder as a peer that then hangs up, and returns what
/// each call gave until the end of the stream or the first error.
fn frames_of(bytes: &[u8]) -> Vec<Result<usize, String>> {
    let (mut tx, rx) = UnixStream::pair().unwrap();
    tx.write_all(bytes).unwrap();
    drop(tx);
    let mut out = Vec::new();
    loop {
        match proto::recv(&rx) {
            Ok(Some(f)) => out.push(Ok(f.header.len() + f.bin.len())),
            Ok(None) => return out,
            Err(e) => {
                out.push(Err(e.to_string()));
                return out;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_stream_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        frames_of(&bytes);
    }

    /// Lengths near the body's size reach the code behind the length checks (uniform
    /// `u32`s would almost never pass the `MAX_FRAME` check and test nothing more).
    #[test]
    fn forged_frame_lengths_never_panic(
        total in prop_oneof![0u32..320, any::<u32>()],
        hlen in prop_oneof![0u32..320, any::<u32>()],
        body in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut b = total.to_le_bytes().to_vec();
        b.extend_from_slice(&hlen.to_le_bytes());
        b.extend_from_slice(&body);
        let got = frames_of(&b);
        // A length the body cannot fill, or an impossible header length, is an error.
        let fits = (8..=proto::MAX_FRAME as u64).contains(&u64::from(total))
            && u64::from(hlen) <= u64::from(total) - 8
            && u64::from(total) - 8 <= body.len() as u64;
        if !fits {
            prop_assert!(got.first().is_some_and(|r| r.is_err()), "{got:?}");
        }
    }

    #[test]
    fn random_json_headers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = proto::parse::<ReqHeader>(&bytes);
        let _ = proto::parse::<RepHeader>(&bytes);
    }

    #[test]
    fn damaged_json_headers_never_panic(
        req in arb_request(),
        cut in any::<prop::sample::Index>(),
        junk in any::<u8>(),
    ) {
        let mut json = serde_json::to_vec(&ReqHeader { id: 1, req }).unwrap();
        let at = cut.index(json.len());
        json[at] = junk;
        let _ = proto::parse::<ReqHeader>(&json);
        json.truncate(at);
        prop_assert!(proto::parse::<ReqHeader>(&json).is_err());
    }

    #[test]
    fn requests_round_trip(
        id in any::<u64>(),
        req in arb_request(),
        bin in proptest::collection::vec(any::<u8>(), 0..4096),
    ) {
        let (tx, rx) = UnixStream::pair().unwrap();
        proto::send(&tx, &ReqHeader { id, req: req.clone() }, &bin, None).unwrap();
        let f = proto::recv(&rx).unwrap().expect("one frame");
        let h: ReqHeader = proto::parse(&f.header).unwrap();
        prop_assert_eq!(h.id, id);
        prop_assert_eq!(h.req, req);
        prop_assert_eq!(f.bin, bin);
        prop_assert!(f.fd.is_none());
    }

    #[test]
    fn replies_round_trip_with_a_descriptor(
        id in any::<u64>(),
        reply in arb_reply(),
        bin in proptest::collection::vec(any::<u8>(), 0..512),
        attach in any::<bool>(),
    ) {
        let (tx, rx) = UnixStream::pair().unwrap();
        let file = tempfile::tempfile().unwrap();
        let fd = attach.then(|| file.as_raw_fd());
        proto::send(&tx, &RepHeader { id, reply: reply.clone() }, &bin, fd).unwrap();
        let f = proto::recv(&rx).unwrap().expect("one frame");
        let h: RepHeader = proto::parse(&f.header).unwrap();
        prop_assert_eq!(h.id, id);
        prop_assert_eq!(h.reply, reply);
        prop_assert_eq!(f.bin, bin);
        prop_assert_eq!(f.fd.is_some(), attach);
        drop(tx);
        prop_assert!(proto::recv(&rx).unwrap().is_none(), "clean end after the frame");
    }

    /// A record with valid framing and checksum around random contents: the decoder must
    /// refuse it or decode something that re-encodes to an equal record.
    #[test]
    fn checksummed_random_records_never_panic(
        ty in any::<u8>(),
        payload in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut rec = (payload.len() as u32).to_le_bytes().to_vec();
        let mut body = vec![ty];
        body.extend_from_slice(&payload);
        rec.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        rec.extend_from_slice(&body);
        if let Ok((op, used)) = decode_op(&rec, 0) {
            prop_assert!(used <= rec.len());
            let mut again = Vec::new();
            encode_op(&op, &mut again);
            let (op2, used2) = decode_op(&again, 0).unwrap();
            prop_assert_eq!(op2, op);
            prop_assert_eq!(used2, again.len());
        }
    }

    /// Every strict prefix of a batch is refused: the record count and the checksums
    /// leave no way to lose the tail of a journal silently.
    #[test]
    fn truncated_batches_are_refused(
        tys in proptest::collection::vec(any::<u64>(), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let ops: Vec<_> = tys
            .iter()
            .map(|&v| pmlab_fs::journal::Op::SetSize { ino: v, size: v / 3 })
            .collect();
        let b = encode_batch(&ops);
        prop_assert_eq!(decode_batch(&b).unwrap(), ops);
        let at = cut.index(b.len());
        prop_assert!(decode_batch(&b[..at]).is_err());
    }

    #[test]
    fn random_bytes_behind_a_valid_batch_header_never_panic(
        count in any::<u32>(),
        rest in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut b = encode_batch(&[])[..4].to_vec();
        b.extend_from_slice(&count.to_le_bytes());
        b.extend_from_slice(&rest);
        let _ = decode_batch(&b);
    }
}

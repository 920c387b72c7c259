//! Every trace reader meets arbitrary and mutated bytes: din (extended and traditional),
//! lackey, pmlab's binary format, each plain and inside xz and zstd, and format
//! detection. Each must end in references or an error naming the input and where in it
//! (a line, a byte offset, or the compressed stream's offset), never panic, and never
//! allocate more than a stated bound.
//!
//! Cases per property: `PROPTEST_CASES` (default 256; the README's long mode runs
//! 100,000).

use std::io::Read;

use pmlab_testkit::alloc::{Counting, peak_during};
use pmlab_testkit::fuzz_config;
use pmlab_trace::{
    BinaryReader, BinaryWriter, DinReader, DinWriter, Kind, LackeyReader, Ref, RefSource,
    TraceError, XZ_MEMLIMIT, trace_from_reader,
};
use proptest::prelude::*;

#[global_allocator]
static ALLOC: Counting = Counting;

/// What a plain reader may allocate for inputs of a few KiB: its 1 MiB line or record
/// buffer and the batch, with room to spare.
const PLAIN_BOUND: usize = 8 << 20;
/// What a decompressing reader may allocate: the decoder's own limit and the above.
const COMPRESSED_BOUND: usize = XZ_MEMLIMIT as usize + PLAIN_BOUND;

/// Reads to the end with a small batch; returns the error if there is one.
fn drain(src: &mut dyn RefSource) -> Option<TraceError> {
    let mut buf = Vec::with_capacity(7);
    loop {
        match src.next_batch(&mut buf) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => return Some(e),
        }
    }
}

/// An error must name the input (`p`) and a place in it.
fn assert_located(e: &TraceError) {
    let text = e.to_string();
    assert!(text.starts_with("p"), "no input name: {text}");
    let located = match e {
        TraceError::Syntax { line, .. } => *line >= 1,
        TraceError::Binary { .. } => text.contains("byte offset"),
        TraceError::Io { .. } => text.contains("byte offset") || text.contains("p:"),
        // Recognising the format looks at the first bytes: the place is the start.
        TraceError::Format { .. } => true,
    };
    assert!(located, "no place in: {text}");
}

/// Runs every plain reader over `bytes`.
fn plain_readers(bytes: &[u8]) {
    let readers: [Box<dyn RefSource>; 4] = [
        Box::new(DinReader::extended(bytes, "p")),
        Box::new(DinReader::traditional(bytes, "p")),
        Box::new(LackeyReader::new(bytes, "p")),
        Box::new(BinaryReader::new(bytes, "p")),
    ];
    for mut r in readers {
        let (e, peak) = peak_during(|| drain(&mut *r));
        if let Some(e) = e {
            assert_located(&e);
        }
        assert!(peak <= PLAIN_BOUND, "a reader allocated {peak} bytes");
    }
}

/// Runs detection (and decompression) over `bytes`.
fn detected(bytes: &[u8]) {
    let owned: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(bytes.to_vec()));
    let (result, peak) = peak_during(|| match trace_from_reader(owned, "p", None) {
        Ok(mut src) => drain(&mut *src),
        Err(e) => Some(e),
    });
    if let Some(e) = result {
        assert_located(&e);
    }
    assert!(peak <= COMPRESSED_BOUND, "detection allocated {peak} bytes");
}

/// Text made of plausible and implausible tokens, to reach deep into the parsers.
fn texty() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just("r".to_string()),
        Just("w".to_string()),
        Just("i".to_string()),
        Just("c".to_string()),
        Just("2 ".to_string()),
        Just("I ".to_string()),
        Just(" L".to_string()),
        Just(" M".to_string()),
        Just("==1==".to_string()),
        Just("0x".to_string()),
        Just(",".to_string()),
        Just("4".to_string()),
        "[0-9a-fA-F]{1,20}",
        "[ \t\r\n]{1,3}",
        ".{0,4}",
    ];
    prop::collection::vec(token, 0..60).prop_map(|t| t.concat().into_bytes())
}

fn kind() -> impl Strategy<Value = Kind> {
    prop::sample::select(Kind::ALL.to_vec())
}

fn refs() -> impl Strategy<Value = Vec<Ref>> {
    let one =
        (any::<u64>(), 1u32..64, kind(), any::<u16>()).prop_map(|(addr, size, kind, asid)| Ref {
            addr,
            size,
            kind,
            asid,
        });
    prop::collection::vec(one, 0..40)
}

/// A valid encoding of `refs` in one of the formats, maybe compressed.
fn encoded(refs: &[Ref], format: u8, compression: u8) -> Vec<u8> {
    let plain = if format == 0 {
        let mut w = BinaryWriter::new(Vec::new()).unwrap();
        w.write_refs(refs).unwrap();
        w.into_inner().unwrap()
    } else {
        let mut w = DinWriter::new(Vec::new());
        w.write_refs(refs).unwrap();
        w.into_inner().unwrap()
    };
    match compression {
        0 => plain,
        1 => {
            let mut out = Vec::new();
            let mut e = xz2::read::XzEncoder::new(&plain[..], 1);
            e.read_to_end(&mut out).unwrap();
            out
        }
        _ => {
            // With a content checksum, as pmlab's trace writer makes them.
            let mut e = zstd::Encoder::new(Vec::new(), 1).unwrap();
            e.include_checksum(true).unwrap();
            std::io::Write::write_all(&mut e, &plain).unwrap();
            e.finish().unwrap()
        }
    }
}

/// Flips, overwrites and truncation applied to `bytes`.
fn mutate(
    mut bytes: Vec<u8>,
    edits: &[(prop::sample::Index, u8)],
    cut: prop::sample::Index,
) -> Vec<u8> {
    if bytes.is_empty() {
        return bytes;
    }
    for (i, b) in edits {
        let i = i.index(bytes.len());
        bytes[i] = *b;
    }
    let keep = cut.index(bytes.len() + 1);
    bytes.truncate(keep);
    bytes
}

proptest! {
    #![proptest_config(fuzz_config())]

    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        plain_readers(&bytes);
        detected(&bytes);
    }

    #[test]
    fn random_text(bytes in texty()) {
        plain_readers(&bytes);
        detected(&bytes);
    }

    #[test]
    fn mutated_traces_plain_and_compressed(
        refs in refs(),
        format in 0u8..2,
        compression in 0u8..3,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let bytes = mutate(encoded(&refs, format, compression), &edits, cut);
        if compression == 0 {
            plain_readers(&bytes);
        }
        detected(&bytes);
    }
}

/// The bounds above can fail: a line with no end is refused once it passes the reader's
/// buffer, where an unbounded reader would keep growing.
#[test]
fn an_endless_line_is_refused_within_the_bound() {
    let endless = std::io::repeat(b'7').take(64 << 20);
    let (e, peak) = peak_during(|| drain(&mut DinReader::extended(endless, "p")));
    let e = e.expect("an endless line is an error");
    assert!(e.to_string().contains("p:1: line: longer than"), "{e}");
    assert!(peak <= PLAIN_BOUND, "{peak}");
}

/// A damaged compressed stream is refused with the compressed offset it reached.
#[test]
fn a_damaged_compressed_stream_names_its_offset() {
    let refs: Vec<Ref> = (0..5000u64)
        .map(|i| Ref {
            addr: i * 64,
            size: 8,
            kind: Kind::Read,
            asid: 0,
        })
        .collect();
    for compression in [1, 2] {
        let mut bytes = encoded(&refs, 1, compression);
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        let owned: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(bytes));
        let e = match trace_from_reader(owned, "p", None) {
            Ok(mut src) => drain(&mut *src),
            Err(e) => Some(e),
        }
        .unwrap_or_else(|| panic!("compression {compression}: a damaged stream was read"));
        assert!(e.to_string().contains("compressed byte offset"), "{e}");
    }
}

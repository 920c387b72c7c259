//! Property tests of the log and intent decoders: arbitrary bytes never panic, valid
//! encodings round-trip, and any single flipped bit in the checksummed bytes is caught.

use pmlab_tx::{
    Intent, POOL_HEADER, POOL_MAGIC, POOL_VERSION, PoolLayout, RedoRecord, UndoRecord,
    decode_intent, decode_redo, decode_undo, encode_intent, encode_redo, encode_undo,
    undo_record_len,
};
use proptest::prelude::*;

fn records() -> impl Strategy<Value = Vec<RedoRecord>> {
    prop::collection::vec(
        (any::<u64>(), prop::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(addr, data)| RedoRecord { addr, data }),
        0..6,
    )
}

proptest! {
    // A fixed seed keeps runs reproducible; failures are reported, not persisted; the
    // case count follows PROPTEST_CASES (the README's long mode).
    #![proptest_config(pmlab_testkit::fuzz_config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_redo(&bytes);
        let _ = decode_undo(&bytes);
        let _ = undo_record_len(&bytes);
        let _ = decode_intent(&bytes);
    }

    #[test]
    fn redo_with_valid_magic_never_panics(mut bytes in prop::collection::vec(any::<u8>(), 64..300), len in any::<u64>(), v1 in any::<bool>()) {
        // Either format: the current one, or the previous one still read.
        bytes[0..8].copy_from_slice(if v1 { b"PMREDO01" } else { b"PMREDO02" });
        bytes[16..24].copy_from_slice(&(len % 400).to_le_bytes());
        let _ = decode_redo(&bytes);
    }

    #[test]
    fn redo_round_trips_and_catches_bit_flips(seq in any::<u64>(), recs in records(), flip in any::<prop::sample::Index>(), bit in 0u8..8) {
        let enc = encode_redo(seq, &recs);
        let dec = decode_redo(&enc).unwrap();
        prop_assert_eq!(dec.seq, seq);
        prop_assert_eq!(&dec.records, &recs);
        // Checksummed bytes: magic, header fields 8..36, and the whole body.
        let covered: Vec<usize> = (0..36).chain(64..enc.len()).collect();
        let at = covered[flip.index(covered.len())];
        let mut bad = enc.clone();
        bad[at] ^= 1 << bit;
        prop_assert!(decode_redo(&bad).is_err(), "flip of byte {} bit {} not caught", at, bit);
    }

    #[test]
    fn undo_round_trips_and_catches_bit_flips(seq in any::<u64>(), addr in any::<u64>(), old in prop::collection::vec(any::<u8>(), 0..60), flip in any::<prop::sample::Index>(), bit in 0u8..8) {
        let r = UndoRecord { seq, addr, old };
        let enc = encode_undo(&r);
        prop_assert_eq!(undo_record_len(&enc), Some(enc.len() as u64));
        prop_assert_eq!(decode_undo(&enc).unwrap(), r.clone());
        let covered: Vec<usize> = (0..28).chain(32..32 + r.old.len()).collect();
        let at = covered[flip.index(covered.len())];
        let mut bad = enc.clone();
        bad[at] ^= 1 << bit;
        match decode_undo(&bad) {
            Err(_) => {}
            Ok(d) => prop_assert!(false, "flip of byte {} bit {} decoded as {:?}", at, bit, d),
        }
    }

    #[test]
    fn intent_round_trips_and_catches_bit_flips(alloc in any::<bool>(), first in any::<u64>(), count in any::<u64>(), slot in any::<u64>(), at in 0usize..36, bit in 0u8..8) {
        let i = Intent { alloc, first, count, slot };
        let enc = encode_intent(&i);
        prop_assert_eq!(decode_intent(&enc), Some(i));
        let mut bad = enc;
        bad[at] ^= 1 << bit;
        prop_assert_eq!(decode_intent(&bad), None);
    }

    #[test]
    fn a_pool_header_with_a_valid_checksum_is_checked_field_by_field(
        names in prop::collection::vec(prop_oneof![Just(0u8), 0x21u8..0x7f, any::<u8>()], 32),
        areas in prop::collection::vec(prop_oneof![any::<u64>(), 0u64..1 << 22], 4),
        size in prop_oneof![any::<u64>(), 0u64..1 << 22],
    ) {
        // A hostile writer can compute the checksum too: everything past it must hold.
        let b = pool_header(&names, &areas);
        if let Ok(l) = PoolLayout::decode(&b, size) {
            prop_assert!(l.log.base >= POOL_HEADER && l.data.base >= l.log.base + l.log.len);
            prop_assert!(l.data.base.checked_add(l.data.len).is_some_and(|e| e <= size));
            for name in [&l.protocol, &l.layout] {
                prop_assert!(!name.is_empty() && name.bytes().all(|c| c.is_ascii_graphic()), "{:?}", name);
            }
        }
    }

    #[test]
    fn a_planned_pool_header_round_trips(log in 0u64..1 << 20, data in 0u64..1 << 20, extra in 0u64..1 << 16) {
        let size = PoolLayout::needed(log, data) + extra;
        let l = PoolLayout::plan(size, "redo", "btree", log, data).unwrap();
        prop_assert_eq!(PoolLayout::decode(&l.encode().unwrap(), size).unwrap(), l);
    }
}

/// A pool header with the given names and areas and a correct checksum.
fn pool_header(names: &[u8], areas: &[u64]) -> [u8; 84] {
    let mut b = [0u8; 84];
    b[0..8].copy_from_slice(&POOL_MAGIC.to_le_bytes());
    b[8..12].copy_from_slice(&POOL_VERSION.to_le_bytes());
    b[16..48].copy_from_slice(names);
    for (i, v) in areas.iter().enumerate() {
        b[48 + 8 * i..56 + 8 * i].copy_from_slice(&v.to_le_bytes());
    }
    let crc = crc32fast::hash(&b[..80]);
    b[80..84].copy_from_slice(&crc.to_le_bytes());
    b
}

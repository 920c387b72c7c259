//! Property tests of the log and intent decoders: arbitrary bytes never panic, valid
//! encodings round-trip, and any single flipped bit in the checksummed bytes is caught.

use pmlab_tx::{
    Intent, RedoRecord, UndoRecord, decode_intent, decode_redo, decode_undo, encode_intent,
    encode_redo, encode_undo, undo_record_len,
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
    fn redo_with_valid_magic_never_panics(mut bytes in prop::collection::vec(any::<u8>(), 64..300), len in any::<u64>()) {
        bytes[0..8].copy_from_slice(b"PMREDO01");
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
}

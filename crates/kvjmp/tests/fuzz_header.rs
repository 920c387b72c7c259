//! Fuzz suite of the store's segment reader: hostile bytes — random headers of any
//! length, well-checksummed headers with wrong fields, and a real store's image with
//! bytes overwritten anywhere — must give an error naming the byte (and, for the
//! header, the field), never a panic or a hang. `PROPTEST_CASES` sets the cases
//! (100,000 in the long mode the README names; small by default).

use std::sync::OnceLock;

use pmlab_kvjmp::layout::Header;
use pmlab_kvjmp::view::View;
use pmlab_kvjmp::{KvError, KvStore, check};
use pmlab_testkit::fuzz_config;
use proptest::prelude::*;

const SEG: u64 = 4 << 20;

/// A real store's segment bytes: 300 keys over a rehash, replaced values, frees.
fn image() -> &'static [u8] {
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("pmlab-kv-fuzz")
            .tempdir_in(pmlab_kvjmp::bench::shm_or_tmp())
            .unwrap();
        let mut s = KvStore::create(dir.path(), "f", SEG, pmlab_vas::Mode(0o600), 3).unwrap();
        for j in 0..400u64 {
            let v = "y".repeat((j % 9) as usize * 6);
            s.set(format!("key:{}", j % 300).as_bytes(), v.as_bytes())
                .unwrap();
        }
        let bytes = std::fs::read(s.segment_path()).unwrap();
        bytes[pmlab_vas::native::segfile::HEADER_BYTES as usize..].to_vec()
    })
}

/// The error must locate the damage: a byte offset, and a field for the header.
fn located(e: &KvError, header: bool) -> Result<(), TestCaseError> {
    match e {
        KvError::BadFormat { field, .. } => prop_assert!(!field.is_empty()),
        KvError::Corrupt { .. } => prop_assert!(!header, "header error without a field: {e}"),
        other => prop_assert!(false, "not a located error: {other}"),
    }
    prop_assert!(e.to_string().contains("byte "), "{e}");
    Ok(())
}

proptest! {
    #![proptest_config(fuzz_config())]

    #[test]
    fn random_bytes_of_any_length_are_refused_by_field(
        b in proptest::collection::vec(any::<u8>(), 0..160),
        size in any::<u64>(),
    ) {
        if let Err(e) = Header::decode(&b, size, "fuzz") {
            located(&e, true)?;
        }
    }

    #[test]
    fn checksummed_headers_with_wrong_fields_are_refused_by_field(
        fields in proptest::array::uniform5(any::<u64>()),
        pick in 0usize..5,
        keep in any::<bool>(),
    ) {
        let good = Header::for_size(SEG, 7);
        let mut h = good;
        let slot = [&mut h.size, &mut h.log, &mut h.root, &mut h.heap, &mut h.seed];
        // One field (or all of them) hostile, the checksum made right for it.
        for (i, f) in slot.into_iter().enumerate() {
            if i == pick || !keep {
                *f = fields[i];
            }
        }
        match Header::decode(&h.encode(), SEG, "fuzz") {
            Ok(d) => prop_assert_eq!(Header { seed: good.seed, ..d }, good),
            Err(e) => located(&e, true)?,
        }
    }

    #[test]
    fn a_damaged_store_image_gives_located_errors_not_panics(
        writes in proptest::collection::vec((0u64..SEG, any::<u64>()), 1..8),
        near_root in any::<bool>(),
    ) {
        let mut seg = image().to_vec();
        let h = Header::decode(&seg[..64], SEG, "fuzz").unwrap();
        for (at, v) in writes {
            // Half the cases aim at the root and the first heap pages, where the
            // tables and chains start; the others anywhere.
            let at = if near_root { h.root + at % 16384 } else { at } as usize & !7;
            let end = (at + 8).min(seg.len());
            seg[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
        }
        match View::new(&seg, "fuzz") {
            Err(e) => located(&e, true)?,
            Ok(v) => {
                if let Err(e) = check::check(&v) {
                    located(&e, false)?;
                }
                for k in 0..40 {
                    if let Err(e) = v.get(format!("key:{k}").as_bytes()) {
                        located(&e, false)?;
                    }
                }
            }
        }
    }
}

//! Region headers meet arbitrary and mutated bytes, with and without a checksum that
//! matches (a hostile file can carry a valid checksum over bad fields): decoding accepts
//! only a header consistent with its object, and otherwise names the field and its byte
//! offset, never panics (cases: `PROPTEST_CASES`, default 256). Opening real files whose
//! first page is such bytes behaves the same.

use std::path::PathBuf;

use pmlab_native::{
    DATA_OFFSET, HEADER_LEN, Header, MIN_REGION_SIZE, Region, RegionError, RegionSource,
};
use pmlab_testkit::fuzz_config;
use proptest::prelude::*;

fn src() -> RegionSource {
    RegionSource::Path(PathBuf::from("p.scm"))
}

/// Rewrites the checksum so that it matches whatever the other bytes say.
fn reseal(bytes: &mut [u8]) {
    let crc = crc32fast::hash(&bytes[..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
}

/// A decoded header must describe a region of exactly `actual` bytes.
fn check(bytes: &[u8], actual: u64) -> Result<(), TestCaseError> {
    match Header::decode(bytes, actual, &src()) {
        Ok(h) => {
            prop_assert_eq!(h.region_size, actual);
            prop_assert_eq!(h.data_offset, DATA_OFFSET);
            prop_assert_eq!(h.data_size, actual - DATA_OFFSET);
            prop_assert!(actual >= MIN_REGION_SIZE);
        }
        Err(RegionError::Header { offset, .. }) => prop_assert!(offset < u64::from(HEADER_LEN)),
        Err(e @ RegionError::BadSize { .. }) => prop_assert!(e.to_string().contains("p.scm")),
        Err(e) => prop_assert!(false, "unexpected error kind: {}", e),
    }
    Ok(())
}

proptest! {
    #![proptest_config(fuzz_config())]

    #[test]
    fn random_headers(bytes in prop::collection::vec(any::<u8>(), 0..128), sealed in any::<bool>(), actual in MIN_REGION_SIZE..1 << 40) {
        let mut bytes = bytes;
        if sealed && bytes.len() >= 64 {
            reseal(&mut bytes);
        }
        check(&bytes, actual)?;
    }

    #[test]
    fn mutated_headers(
        size_pages in 2u64..1 << 20,
        edits in prop::collection::vec((0usize..64, any::<u8>()), 1..4),
        sealed in any::<bool>(),
        actual_delta in -2i64..3,
    ) {
        let size = size_pages * 4096;
        let mut bytes = Header::new(size, 1_700_000_000).encode().to_vec();
        for (i, b) in edits {
            bytes[i] = b;
        }
        if sealed {
            reseal(&mut bytes);
        }
        let actual = (size as i64 + actual_delta * 4096) as u64;
        check(&bytes, actual)?;
    }
}

/// The same bytes through the real open path: a file on tmpfs.
#[test]
fn opening_files_of_mutated_headers_never_panics() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("r.scm");
    let size = MIN_REGION_SIZE;
    let good = Header::new(size, 1).encode();
    for i in 0..64usize {
        for sealed in [false, true] {
            let mut page = vec![0u8; size as usize];
            page[..64].copy_from_slice(&good);
            page[i] ^= 0x5a;
            if sealed {
                reseal(&mut page);
            }
            std::fs::write(&path, &page).unwrap();
            match Region::open(&path) {
                // Only a change the header does not depend on may open, and only resealed:
                // the creation time, or the checksum itself (resealing restores it). A
                // reserved byte must stay zero.
                Ok(r) => assert!(
                    sealed && ((40..48).contains(&i) || i >= 60),
                    "byte {i}: {:?}",
                    r.header()
                ),
                Err(e) => assert!(e.to_string().contains("r.scm"), "{e}"),
            }
        }
    }
}

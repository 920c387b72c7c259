//! A log torn so that a new header sits over a stale record — the same slot still
//! holding an earlier transaction's bytes for the same address — must not verify, even
//! when the payloads are CRC-sealed (as file-system metadata pages are). A CRC-32 log
//! checksum accepts this log (the CRC residue); pmlab's does not.

use pmlab_tx::{RedoRecord, decode_redo, encode_redo};

/// A 4 KiB page whose last 4 bytes are the CRC-32 of the rest.
fn sealed_page(fill: u8) -> Vec<u8> {
    let mut b: Vec<u8> = (0..4092u32).map(|i| (i as u8).wrapping_mul(fill)).collect();
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn a_stale_sealed_record_under_a_new_header_is_rejected() {
    let old = encode_redo(
        7,
        &[RedoRecord {
            addr: 0x4000,
            data: sealed_page(3),
        }],
    );
    let new = encode_redo(
        8,
        &[RedoRecord {
            addr: 0x4000,
            data: sealed_page(5),
        }],
    );
    assert_eq!(old.len(), new.len());
    // The crash: the header line of the new log reached memory, its body did not.
    let mut torn = old.clone();
    torn[..64].copy_from_slice(&new[..64]);
    assert!(decode_redo(&new).is_ok());
    assert!(
        decode_redo(&torn).is_err(),
        "recovery would replay the old page as transaction 8"
    );
}

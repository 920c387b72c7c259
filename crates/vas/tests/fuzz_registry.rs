//! Fuzz of the registry's readers: a segment file's header and a VAS file may have been
//! written by anyone with write access to the registry, so arbitrary or checksummed
//! but hostile bytes must give an error naming the file and field, never a panic, and
//! anything accepted must describe a range this registry could have placed.
//!
//! Case counts follow `PROPTEST_CASES` (README "Hostile input", long mode).

use std::path::Path;

use pmlab_vas::native::Registry;
use pmlab_vas::native::segfile::{FLAGS_AT, HEADER_BYTES, SegHeader};
use proptest::prelude::*;

/// A header with these fields and a correct checksum (what a hostile writer can make).
fn checksummed(id: u64, base: u64, size: u64, name_len: u16, name: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_BYTES as usize];
    b[0..8].copy_from_slice(b"PMLABSEG");
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    b[16..24].copy_from_slice(&id.to_le_bytes());
    b[24..32].copy_from_slice(&base.to_le_bytes());
    b[32..40].copy_from_slice(&size.to_le_bytes());
    b[48..50].copy_from_slice(&name_len.to_le_bytes());
    b[64..64 + name.len()].copy_from_slice(name);
    let crc = crc32fast::hash(&b[..128]);
    b[128..132].copy_from_slice(&crc.to_le_bytes());
    b
}

fn addresses() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        (0u64..1 << 36).prop_map(|p| p << 12),
        (0u64..1 << 12).prop_map(|p| 0x1000_0000_0000 + (p << 12)),
    ]
}

proptest! {
    #![proptest_config(pmlab_testkit::fuzz_config())]

    #[test]
    fn arbitrary_header_bytes_are_refused_with_a_field(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        file_len in any::<u64>(),
    ) {
        if let Err(e) = SegHeader::decode(&bytes, file_len, Path::new("x.seg")) {
            prop_assert!(e.to_string().contains("byte "), "{}", e);
        }
    }

    #[test]
    fn a_checksummed_header_is_accepted_only_when_consistent(
        base in addresses(),
        size in prop_oneof![any::<u64>(), (1u64..64).prop_map(|p| p << 12)],
        name_len in prop_oneof![any::<u16>(), 0u16..70],
        name in prop::collection::vec(any::<u8>(), 64),
        file_len in prop_oneof![any::<u64>(), Just(u64::MAX)],
    ) {
        let b = checksummed(1, base, size, name_len, &name);
        let file_len = if file_len == u64::MAX { HEADER_BYTES.wrapping_add(size) } else { file_len };
        if let Ok((h, _)) = SegHeader::decode(&b[..FLAGS_AT as usize + 4], file_len, Path::new("x.seg")) {
            prop_assert!(h.size > 0 && h.size % 4096 == 0 && h.base % 4096 == 0);
            prop_assert_eq!(file_len, HEADER_BYTES + h.size);
            prop_assert!(!h.name.is_empty() && h.name.len() <= 64);
        }
    }
}

proptest! {
    // Each case writes real registry files, as a hostile writer would.
    #![proptest_config(pmlab_testkit::fuzz_config())]

    #[test]
    fn a_registry_reads_only_segments_inside_its_window(base in addresses(), pages in 1u64..4) {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::create(dir.path(), 3).unwrap();
        let size = pages << 12;
        let mut b = checksummed(9, base, size, 1, b"s");
        b.resize((HEADER_BYTES + size) as usize, 0);
        std::fs::write(reg.seg_path("s"), &b).unwrap();
        let (lo, hi) = reg.window();
        match reg.read_seg("s") {
            Ok((h, _, _)) => prop_assert!(h.base >= lo && h.base + h.size <= hi, "{:#x}", h.base),
            Err(e) => prop_assert!(e.to_string().contains("byte "), "{}", e),
        }
    }

    #[test]
    fn arbitrary_vas_files_are_refused_with_a_line_or_field(text in "(?s).{0,200}", prefix in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::create(dir.path(), 3).unwrap();
        let body = if prefix { format!("format = \"pmlab-vas 1\"\nid = 1\nname = \"v\"\n{text}") } else { text };
        std::fs::write(reg.vas_path("v"), body).unwrap();
        if let Err(e) = reg.read_vas("v") {
            let e = e.to_string();
            prop_assert!(e.contains("line ") || e.contains("field ") || e.contains("byte "), "{}", e);
        }
    }
}

//! A segment's file: one header page, then the segment's bytes.
//!
//! ```text
//! offset  field
//!   0     magic "PMLABSEG"
//!   8     layout version (u32, 1)
//!  12     reserved (u32)
//!  16     id (u64)
//!  24     base: the fixed virtual address (u64)
//!  32     size in bytes (u64)
//!  40     id of the segment this is a clone of, or 0 (u64)
//!  48     name length (u16), name at 64..128
//! 128     CRC-32 of bytes 0..128 (u32)
//! 256     flags (u32; bit 0: lockable), written alone so it changes atomically
//! 4096    the segment's bytes, mapped at `base`
//! ```
//! All integers little-endian. A file that does not start with the magic is "of
//! another format"; a bad checksum or field is corrupt; both are refused with the
//! offset of the field.

use std::path::Path;

use crate::error::VasError;

/// Bytes before the segment's data in its file.
pub const HEADER_BYTES: u64 = 4096;
const MAGIC: &[u8; 8] = b"PMLABSEG";
const VERSION: u32 = 1;
const CRC_AT: usize = 128;
/// Offset of the flags word.
pub const FLAGS_AT: u64 = 256;
/// Flag: switching into a VAS that holds the segment takes its lock.
pub const FLAG_LOCKABLE: u32 = 1;

/// The header checksum: CRC-32 (ISO HDLC, as zlib's), from tables built at compile
/// time. Every process that reaches a VAS checks a header, and a CRC that probes the
/// CPU for a faster path first (CPUID, a VM exit per leaf on virtual machines) would
/// cost more than the rest of reaching it; 128 bytes need no faster path.
fn header_crc(b: &[u8]) -> u32 {
    const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
    CRC32.checksum(b)
}

/// The immutable description in a segment's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegHeader {
    /// Registry id.
    pub id: u64,
    /// Fixed virtual address.
    pub base: u64,
    /// Size in bytes.
    pub size: u64,
    /// The id of the segment this is a clone of (0: none). A clone shares its
    /// original's address range.
    pub clone_of: u64,
    /// Registry name.
    pub name: String,
}

impl SegHeader {
    /// The first 4096 bytes of the file (flags: lockable).
    pub fn encode(&self, flags: u32) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_BYTES as usize];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.id.to_le_bytes());
        b[24..32].copy_from_slice(&self.base.to_le_bytes());
        b[32..40].copy_from_slice(&self.size.to_le_bytes());
        b[40..48].copy_from_slice(&self.clone_of.to_le_bytes());
        b[48..50].copy_from_slice(&(self.name.len() as u16).to_le_bytes());
        b[64..64 + self.name.len()].copy_from_slice(self.name.as_bytes());
        let crc = header_crc(&b[..CRC_AT]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        b[FLAGS_AT as usize..FLAGS_AT as usize + 4].copy_from_slice(&flags.to_le_bytes());
        b
    }

    /// Decodes and checks a header read from `path` (at least 260 bytes); also returns
    /// the flags.
    pub fn decode(b: &[u8], file_len: u64, path: &Path) -> Result<(SegHeader, u32), VasError> {
        let bad = |off: usize, field: &str, problem: String| {
            VasError::format(path, format!("byte {off} ({field})"), problem)
        };
        if b.len() < FLAGS_AT as usize + 4 || &b[0..8] != MAGIC {
            return Err(bad(
                0,
                "magic",
                "not a pmlab segment (another format)".into(),
            ));
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let version = u32_at(8);
        if version != VERSION {
            return Err(bad(
                8,
                "version",
                format!("layout {version}, this pmlab reads {VERSION}"),
            ));
        }
        let crc = header_crc(&b[..CRC_AT]);
        if crc != u32_at(CRC_AT) {
            return Err(bad(
                CRC_AT,
                "checksum",
                "header checksum mismatch: corrupt".into(),
            ));
        }
        let len = usize::from(u16::from_le_bytes([b[48], b[49]]));
        let name = std::str::from_utf8(b.get(64..64 + len).unwrap_or(&[]))
            .ok()
            .filter(|n| len <= 64 && !n.is_empty())
            .ok_or_else(|| bad(48, "name", "not a valid name".into()))?
            .to_string();
        let h = SegHeader {
            id: u64_at(16),
            base: u64_at(24),
            size: u64_at(32),
            clone_of: u64_at(40),
            name,
        };
        let page = rustix::param::page_size() as u64;
        if h.base % page != 0 || h.size == 0 || h.size % page != 0 {
            return Err(bad(
                24,
                "base/size",
                format!("base {:#x} size {} not page multiples", h.base, h.size),
            ));
        }
        if file_len != HEADER_BYTES + h.size {
            return Err(bad(
                32,
                "size",
                format!(
                    "file is {file_len} bytes, header says {} + {}",
                    HEADER_BYTES, h.size
                ),
            ));
        }
        Ok((h, u32_at(FLAGS_AT as usize)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals_name_the_field() {
        let h = SegHeader {
            id: 7,
            base: 0x1000_0000_0000,
            size: 8192,
            clone_of: 0,
            name: "s0".into(),
        };
        let b = h.encode(FLAG_LOCKABLE);
        let p = Path::new("s0.seg");
        assert_eq!(
            SegHeader::decode(&b, 4096 + 8192, p).unwrap(),
            (h.clone(), FLAG_LOCKABLE)
        );
        let mut bad = b.clone();
        bad[30] ^= 1;
        let e = SegHeader::decode(&bad, 4096 + 8192, p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("checksum"), "{e}");
        let e = SegHeader::decode(b"#!/bin/sh\n", 10, p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("another format"), "{e}");
        let e = SegHeader::decode(&b, 4096, p).unwrap_err().to_string();
        assert!(e.contains("(size)"), "{e}");
    }

    /// The checksum is the one segment files have always carried (crc32fast's CRC-32),
    /// so registries made before still open.
    #[test]
    fn the_checksum_is_the_one_written_before() {
        let h = SegHeader {
            id: 3,
            base: 0x1000_0020_0000,
            size: 4096,
            clone_of: 0,
            name: "reads".into(),
        };
        let b = h.encode(0);
        assert_eq!(header_crc(&b[..CRC_AT]), crc32fast::hash(&b[..CRC_AT]));
        assert_eq!(
            header_crc(b"123456789"),
            0xcbf4_3926,
            "the CRC-32 check value"
        );
    }
}

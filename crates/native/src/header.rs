//! The region header: the first 64 bytes of every region.
//!
//! | offset | size | field          | meaning                                            |
//! |-------:|-----:|----------------|----------------------------------------------------|
//! |      0 |    8 | `magic`        | `PMLABSCM`                                         |
//! |      8 |    4 | `version`      | layout version, [`LAYOUT_VERSION`]                 |
//! |     12 |    4 | `header_len`   | [`HEADER_LEN`]                                     |
//! |     16 |    8 | `region_size`  | bytes of the backing object when it was formatted  |
//! |     24 |    8 | `data_offset`  | first byte of the data area, [`DATA_OFFSET`]       |
//! |     32 |    8 | `data_size`    | `region_size - data_offset`                        |
//! |     40 |    8 | `created_unix` | creation time, seconds since the Unix epoch        |
//! |     48 |   12 | reserved       | zero                                               |
//! |     60 |    4 | `checksum`     | CRC-32 (IEEE) of bytes 0..60                       |
//!
//! All integers are little-endian. The data area starts on its own page so that a file
//! system above can map parts of it with page protections of their own.

use crate::error::{RegionError, RegionSource};

/// The eight magic bytes at offset 0.
pub const MAGIC: [u8; 8] = *b"PMLABSCM";
/// The layout version this crate writes and accepts.
pub const LAYOUT_VERSION: u32 = 1;
/// Bytes covered by the header, checksum included.
pub const HEADER_LEN: u32 = 64;
/// Offset of the data area: one page, so that the data area is page-aligned.
pub const DATA_OFFSET: u64 = 4096;
/// The smallest region: the header page plus one data page.
pub const MIN_REGION_SIZE: u64 = 2 * DATA_OFFSET;

const CHECKSUM_OFFSET: usize = 60;

/// The decoded header of a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Layout version.
    pub version: u32,
    /// Bytes of the backing object the header was written for.
    pub region_size: u64,
    /// First byte of the data area.
    pub data_offset: u64,
    /// Bytes in the data area.
    pub data_size: u64,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix: u64,
    /// The stored CRC-32 of bytes 0..60.
    pub checksum: u32,
}

impl Header {
    /// A fresh header for a region of `region_size` bytes.
    pub fn new(region_size: u64, created_unix: u64) -> Self {
        let mut h = Header {
            version: LAYOUT_VERSION,
            region_size,
            data_offset: DATA_OFFSET,
            data_size: region_size - DATA_OFFSET,
            created_unix,
            checksum: 0,
        };
        h.checksum = crc32fast::hash(&h.encode()[..CHECKSUM_OFFSET]);
        h
    }

    /// The 64 header bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut b = [0u8; HEADER_LEN as usize];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&HEADER_LEN.to_le_bytes());
        b[16..24].copy_from_slice(&self.region_size.to_le_bytes());
        b[24..32].copy_from_slice(&self.data_offset.to_le_bytes());
        b[32..40].copy_from_slice(&self.data_size.to_le_bytes());
        b[40..48].copy_from_slice(&self.created_unix.to_le_bytes());
        b[60..64].copy_from_slice(&self.checksum.to_le_bytes());
        b
    }

    /// Decodes and validates the header at the start of `bytes`, a region whose backing
    /// object has `actual_size` bytes. Foreign data fails on the magic, a newer layout on
    /// the version, a corrupted header on its checksum (naming the field that also looks
    /// wrong, when one does), a truncated or grown object on `region_size`.
    pub fn decode(
        bytes: &[u8],
        actual_size: u64,
        src: &RegionSource,
    ) -> Result<Header, RegionError> {
        let err = |offset: u64, field: &'static str, problem: String| RegionError::Header {
            source_name: src.clone(),
            offset,
            field,
            problem,
        };
        if bytes.len() < HEADER_LEN as usize {
            return Err(RegionError::BadSize {
                source_name: src.clone(),
                size: actual_size,
                problem: format!("shorter than the {HEADER_LEN}-byte header"),
            });
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        if bytes[0..8] != MAGIC {
            return Err(err(
                0,
                "magic",
                format!(
                    "found {:02x?} (\"{}\"), expected \"PMLABSCM\": not a pmlab region",
                    &bytes[0..8],
                    String::from_utf8_lossy(&bytes[0..8]).escape_default()
                ),
            ));
        }
        let version = u32_at(8);
        if version != LAYOUT_VERSION {
            return Err(err(
                8,
                "version",
                format!("layout version {version}, this build reads version {LAYOUT_VERSION}"),
            ));
        }
        let h = Header {
            version,
            region_size: u64_at(16),
            data_offset: u64_at(24),
            data_size: u64_at(32),
            created_unix: u64_at(40),
            checksum: u32_at(60),
        };
        let computed = crc32fast::hash(&bytes[..CHECKSUM_OFFSET]);
        let field_problem = Self::field_problem(&h, u32_at(12), &bytes[48..60], actual_size);
        if computed != h.checksum {
            let hint = match &field_problem {
                Some((o, f, p)) => format!("; field `{f}` at offset {o} looks wrong: {p}"),
                None => String::new(),
            };
            return Err(err(
                CHECKSUM_OFFSET as u64,
                "checksum",
                format!(
                    "stored {:#010x}, computed {computed:#010x} over bytes 0..{CHECKSUM_OFFSET}: the header is corrupted{hint}",
                    h.checksum
                ),
            ));
        }
        if let Some((o, f, p)) = field_problem {
            return Err(err(o, f, p));
        }
        Ok(h)
    }

    fn field_problem(
        h: &Header,
        header_len: u32,
        reserved: &[u8],
        actual_size: u64,
    ) -> Option<(u64, &'static str, String)> {
        if header_len != HEADER_LEN {
            return Some((
                12,
                "header_len",
                format!("{header_len}, expected {HEADER_LEN}"),
            ));
        }
        if h.region_size != actual_size {
            return Some((
                16,
                "region_size",
                format!(
                    "header says {} bytes but the backing object has {actual_size} bytes (truncated or resized?)",
                    h.region_size
                ),
            ));
        }
        if h.data_offset != DATA_OFFSET {
            return Some((
                24,
                "data_offset",
                format!("{}, expected {DATA_OFFSET}", h.data_offset),
            ));
        }
        if h.data_size != h.region_size.saturating_sub(h.data_offset)
            || h.region_size < MIN_REGION_SIZE
        {
            return Some((
                32,
                "data_size",
                format!(
                    "{} bytes, but region_size - data_offset = {}",
                    h.data_size,
                    h.region_size.saturating_sub(h.data_offset)
                ),
            ));
        }
        if let Some(i) = reserved.iter().position(|&b| b != 0) {
            return Some((
                48 + i as u64,
                "reserved",
                format!("byte is {:#04x}, expected 0", reserved[i]),
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src() -> RegionSource {
        RegionSource::Memfd("t".into())
    }

    #[test]
    fn round_trip() {
        let h = Header::new(1 << 20, 7);
        let b = h.encode();
        assert_eq!(Header::decode(&b, 1 << 20, &src()).unwrap(), h);
    }

    fn field_of(e: RegionError) -> (u64, &'static str) {
        match e {
            RegionError::Header { offset, field, .. } => (offset, field),
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn every_corruption_is_located() {
        let h = Header::new(1 << 20, 7);
        let good = h.encode();
        let mut b = good;
        b[0] = b'X';
        assert_eq!(
            field_of(Header::decode(&b, 1 << 20, &src()).unwrap_err()),
            (0, "magic")
        );
        let mut b = good;
        b[8] = 9;
        assert_eq!(
            field_of(Header::decode(&b, 1 << 20, &src()).unwrap_err()),
            (8, "version")
        );
        for i in 12..60 {
            let mut b = good;
            b[i] ^= 0x10;
            let e = Header::decode(&b, 1 << 20, &src()).unwrap_err();
            assert_eq!(field_of(e), (60, "checksum"), "byte {i}");
        }
        let e = Header::decode(&good, 2 << 20, &src()).unwrap_err();
        assert_eq!(field_of(e), (16, "region_size"));
        assert!(e_text(&good, 2 << 20).contains("truncated or resized"));
    }

    fn e_text(b: &[u8], size: u64) -> String {
        Header::decode(b, size, &src()).unwrap_err().to_string()
    }

    #[test]
    fn checksum_error_names_the_suspicious_field() {
        let mut b = Header::new(1 << 20, 7).encode();
        b[16] ^= 1;
        let t = e_text(&b, 1 << 20);
        assert!(t.contains("`checksum` at byte offset 60"), "{t}");
        assert!(t.contains("`region_size` at offset 16"), "{t}");
    }
}

//! The header every workload's data area starts with.
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! |      0 |    8 | `magic` `PMWKLD01` |
//! |      8 |   16 | `workload`: name, zero-padded ASCII |
//! |     24 |    8 | `elements` the structure was made for |
//! |     32 |    8 | `footprint`: bytes of the data area it uses |
//! |     40 |    8 | `param`: a structure's own parameter (0 if none) |
//! |     48 |    4 | `crc`: CRC-32 of bytes 0..48 |
//! |     64 |  192 | state words (root, counts, node pool), changed by transactions |
//!
//! The structure itself begins at [`STRUCT_OFF`]. The fixed fields are written once,
//! by the formatting transaction; the state words change only inside transactions.

use pmlab_spine::Addr;
use pmlab_tx::{Protocol, TxError};

use crate::error::WorkloadError;

/// The magic of a workload header.
pub const WORKLOAD_MAGIC: u64 = u64::from_le_bytes(*b"PMWKLD01");
/// Where the state words start.
pub const STATE_OFF: u64 = 64;
/// How many state words there are.
pub const STATE_WORDS: u64 = 24;
/// Where the structure starts, from the data area's base.
pub const STRUCT_OFF: u64 = 256;
/// Most elements a structure may be made for (so that no size computation overflows).
pub const MAX_ELEMENTS: u64 = 1 << 40;

/// The fixed fields of a workload header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The data area's base (where the header lives).
    pub base: Addr,
    /// The workload's name.
    pub name: &'static str,
    /// Elements the structure was made for.
    pub elements: u64,
    /// Bytes of the data area it uses.
    pub footprint: u64,
    /// The structure's own parameter.
    pub param: u64,
}

impl Header {
    /// Address of state word `i`.
    pub fn state(&self, i: u64) -> Addr {
        debug_assert!(i < STATE_WORDS);
        self.base + STATE_OFF + 8 * i
    }

    /// The first byte of the structure.
    pub fn body(&self) -> Addr {
        self.base + STRUCT_OFF
    }

    fn encode(&self) -> [u8; 256] {
        let mut b = [0u8; 256];
        b[0..8].copy_from_slice(&WORKLOAD_MAGIC.to_le_bytes());
        b[8..8 + self.name.len()].copy_from_slice(self.name.as_bytes());
        b[24..32].copy_from_slice(&self.elements.to_le_bytes());
        b[32..40].copy_from_slice(&self.footprint.to_le_bytes());
        b[40..48].copy_from_slice(&self.param.to_le_bytes());
        let crc = crc32fast::hash(&b[..48]);
        b[48..52].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Writes the header (state words zero) inside the running transaction.
    pub fn write<P: Protocol>(&self, p: &mut P) -> Result<(), TxError> {
        p.write(self.base, &self.encode())
    }

    /// Reads and checks the header of `name` at `base`; each problem names its field.
    pub fn read<P: Protocol>(
        p: &mut P,
        base: Addr,
        name: &'static str,
    ) -> Result<Header, WorkloadError> {
        let mut b = [0u8; 52];
        p.read(base, &mut b)?;
        let bad = |offset, field, problem: String| WorkloadError::BadHeader {
            addr: base,
            offset,
            field,
            problem,
        };
        let word = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        if word(0) != WORKLOAD_MAGIC {
            return Err(bad(
                0,
                "magic",
                format!(
                    "{:#018x} is not {WORKLOAD_MAGIC:#018x}: no workload here",
                    word(0)
                ),
            ));
        }
        let stored = u32::from_le_bytes(b[48..52].try_into().expect("4 bytes"));
        let computed = crc32fast::hash(&b[..48]);
        if stored != computed {
            return Err(bad(
                48,
                "crc",
                format!("stored {stored:#010x}, computed {computed:#010x}: the header is corrupt"),
            ));
        }
        let raw = &b[8..24];
        let end = raw.iter().position(|&c| c == 0).unwrap_or(16);
        if &raw[..end] != name.as_bytes() {
            return Err(bad(
                8,
                "workload",
                format!(
                    "the area holds a {:?} structure, not {name:?}",
                    String::from_utf8_lossy(&raw[..end])
                ),
            ));
        }
        if word(24) < 2 || word(24) > MAX_ELEMENTS {
            return Err(bad(
                24,
                "elements",
                format!("{} is not between 2 and {MAX_ELEMENTS}", word(24)),
            ));
        }
        Ok(Header {
            base,
            name,
            elements: word(24),
            footprint: word(32),
            param: word(40),
        })
    }
}

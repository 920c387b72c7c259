//! A transaction pool: one memory laid out as a header, a protocol's log area and the
//! data area the transactions update — what `pmlab tx bench --region` keeps in a
//! native region between runs, and what the crash explorer lays out on the model.
//!
//! # Layout (spine addresses)
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! |      0 |    8 | `magic` `PMTXPOOL` |
//! |      8 |    4 | `version` (1) |
//! |     16 |   16 | `protocol`: the protocol's name, zero-padded ASCII |
//! |     32 |   16 | `layout`: what the data area holds (a workload's name) |
//! |     48 |    8 | `log_off` |
//! |     56 |    8 | `log_len` |
//! |     64 |    8 | `data_off` |
//! |     72 |    8 | `data_len` |
//! |     80 |    4 | `crc`: CRC-32 of bytes 0..80 |
//!
//! The header page (4 KiB) is followed by the log area and the data area, each
//! page-aligned. The header is written last when a pool is made (after the protocol
//! and the structure in the data area are formatted), so a pool whose making was
//! interrupted is not a pool at all; it never changes afterwards.

use pmlab_spine::{Addr, Memory};

use crate::codec::{get_u32, get_u64, put_u32, put_u64};
use crate::error::TxError;
use crate::protocol::Area;

/// The magic of a pool header.
pub const POOL_MAGIC: u64 = u64::from_le_bytes(*b"PMTXPOOL");
/// The pool format version.
pub const POOL_VERSION: u32 = 1;
/// Bytes reserved for the header (the log area starts here).
pub const POOL_HEADER: u64 = 4096;
const NAME: usize = 16;
const CRC_AT: usize = 80;

/// Where a pool's parts are, and what they hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolLayout {
    /// The transaction protocol's name (`redo`, `undo`, ...).
    pub protocol: String,
    /// What the data area holds (a workload's name).
    pub layout: String,
    /// The protocol's log area.
    pub log: Area,
    /// The data area.
    pub data: Area,
}

fn bad(offset: u64, field: &'static str, problem: String) -> TxError {
    TxError::BadHeader {
        structure: "tx pool",
        addr: 0,
        offset,
        field,
        problem,
    }
}

fn page_up(n: u64) -> u64 {
    n.div_ceil(POOL_HEADER) * POOL_HEADER
}

fn name_field(name: &str, field: &'static str, offset: u64) -> Result<[u8; NAME], TxError> {
    let ok = !name.is_empty() && name.len() <= NAME && name.bytes().all(|b| b.is_ascii_graphic());
    if !ok {
        return Err(bad(
            offset,
            field,
            format!("{name:?} is not 1 to {NAME} printable ASCII characters"),
        ));
    }
    let mut b = [0u8; NAME];
    b[..name.len()].copy_from_slice(name.as_bytes());
    Ok(b)
}

impl PoolLayout {
    /// Plans a pool of `protocol` and `layout` with a log of `log_len` bytes and a data
    /// area of `data_len` bytes in a memory of `size` bytes; an error if it does not fit.
    pub fn plan(
        size: u64,
        protocol: &str,
        layout: &str,
        log_len: u64,
        data_len: u64,
    ) -> Result<PoolLayout, TxError> {
        name_field(protocol, "protocol", 16)?;
        name_field(layout, "layout", 32)?;
        let log = Area::new(POOL_HEADER, page_up(log_len));
        let data = Area::new(log.end(), page_up(data_len));
        if data.end() > size {
            return Err(TxError::BadArea {
                structure: "tx pool",
                addr: 0,
                problem: format!(
                    "too small: a {layout} pool under {protocol} needs {} bytes (header {POOL_HEADER}, log {}, data {}), the memory holds {size}",
                    data.end(),
                    log.len,
                    data.len
                ),
            });
        }
        Ok(PoolLayout {
            protocol: protocol.into(),
            layout: layout.into(),
            log,
            data,
        })
    }

    /// Bytes a pool with these parts needs.
    pub fn needed(log_len: u64, data_len: u64) -> u64 {
        POOL_HEADER + page_up(log_len) + page_up(data_len)
    }

    /// The header's bytes.
    pub fn encode(&self) -> Result<[u8; 84], TxError> {
        let mut b = [0u8; 84];
        put_u64(&mut b, 0, POOL_MAGIC);
        put_u32(&mut b, 8, POOL_VERSION);
        b[16..32].copy_from_slice(&name_field(&self.protocol, "protocol", 16)?);
        b[32..48].copy_from_slice(&name_field(&self.layout, "layout", 32)?);
        put_u64(&mut b, 48, self.log.base);
        put_u64(&mut b, 56, self.log.len);
        put_u64(&mut b, 64, self.data.base);
        put_u64(&mut b, 72, self.data.len);
        let crc = crc32fast::hash(&b[..CRC_AT]);
        put_u32(&mut b, CRC_AT, crc);
        Ok(b)
    }

    /// Writes the header and makes it durable: the last step of making a pool.
    pub fn write<M: Memory + ?Sized>(&self, mem: &mut M) -> Result<(), TxError> {
        let b = self.encode()?;
        mem.write(0, &b)?;
        mem.persist(0, b.len() as u64)?;
        Ok(())
    }

    /// Reads and validates the header of the pool in `mem`; every problem names its
    /// field and byte offset.
    pub fn read<M: Memory + ?Sized>(mem: &mut M) -> Result<PoolLayout, TxError> {
        let mut b = [0u8; 84];
        if mem.size() < POOL_HEADER {
            return Err(bad(
                0,
                "magic",
                format!("{} bytes cannot hold a tx pool: not a tx pool", mem.size()),
            ));
        }
        mem.read(0, &mut b)?;
        Self::decode(&b, mem.size())
    }

    /// Decodes a header read from a memory of `size` bytes.
    pub fn decode(b: &[u8; 84], size: u64) -> Result<PoolLayout, TxError> {
        let magic = get_u64(b, 0).unwrap_or(0);
        if magic != POOL_MAGIC {
            return Err(bad(
                0,
                "magic",
                format!("{magic:#018x} is not {POOL_MAGIC:#018x}: not a tx pool"),
            ));
        }
        let version = get_u32(b, 8).unwrap_or(0);
        if version != POOL_VERSION {
            return Err(bad(
                8,
                "version",
                format!("{version} is not {POOL_VERSION}"),
            ));
        }
        let (stored, computed) = (
            get_u32(b, CRC_AT).unwrap_or(0),
            crc32fast::hash(&b[..CRC_AT]),
        );
        if stored != computed {
            return Err(bad(
                CRC_AT as u64,
                "crc",
                format!("stored {stored:#010x}, computed {computed:#010x}: the header is corrupt"),
            ));
        }
        // Names are printed in errors and reports, so a hostile header must not smuggle
        // control characters (terminal escapes) through them: the same rule as `plan`.
        let text = |off: usize, field| {
            let raw = &b[off..off + NAME];
            let end = raw.iter().position(|&c| c == 0).unwrap_or(NAME);
            let name = &raw[..end];
            if name.is_empty() || !name.iter().all(u8::is_ascii_graphic) {
                return Err(bad(
                    off as u64,
                    field,
                    format!("{name:?} is not 1 to {NAME} printable ASCII characters"),
                ));
            }
            Ok(String::from_utf8_lossy(name).into_owned())
        };
        let area = |off: usize| {
            Area::new(
                get_u64(b, off).unwrap_or(0),
                get_u64(b, off + 8).unwrap_or(0),
            )
        };
        let layout = PoolLayout {
            protocol: text(16, "protocol")?,
            layout: text(32, "layout")?,
            log: area(48),
            data: area(64),
        };
        let fits = |a: Area| a.base.checked_add(a.len).is_some_and(|e| e <= size);
        if layout.log.base < POOL_HEADER || !fits(layout.log) {
            return Err(bad(
                48,
                "log_off",
                format!(
                    "the log {:?} does not lie inside the {size}-byte pool after its header",
                    layout.log
                ),
            ));
        }
        if layout.data.base < layout.log.end() || !fits(layout.data) {
            return Err(bad(
                64,
                "data_off",
                format!(
                    "the data area {:?} does not lie inside the {size}-byte pool after the log",
                    layout.data
                ),
            ));
        }
        Ok(layout)
    }

    /// Checks that the pool holds `layout` (and, if given, runs `protocol`): a pool
    /// of another layout is refused by name, before anything is written.
    pub fn expect(&self, protocol: Option<&str>, layout: &str) -> Result<(), TxError> {
        if self.layout != layout {
            return Err(bad(
                32,
                "layout",
                format!(
                    "the pool holds a {:?} data area, not {layout:?}",
                    self.layout
                ),
            ));
        }
        match protocol {
            Some(p) if p != self.protocol => Err(bad(
                16,
                "protocol",
                format!("the pool runs the {:?} protocol, not {p:?}", self.protocol),
            )),
            _ => Ok(()),
        }
    }

    /// The first data byte (for structures that lay themselves out from there).
    pub fn data_base(&self) -> Addr {
        self.data.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmlab_spine::VecMemory;

    #[test]
    fn a_header_round_trips_and_every_corruption_is_named() {
        let mut m = VecMemory::new(1 << 20);
        let l = PoolLayout::plan(1 << 20, "redo", "sps", 10_000, 100_000).unwrap();
        assert_eq!(l.log, Area::new(4096, 12288));
        assert_eq!(l.data.base, 16384);
        l.write(&mut m).unwrap();
        assert_eq!(PoolLayout::read(&mut m).unwrap(), l);
        l.expect(Some("redo"), "sps").unwrap();
        let e = l.expect(None, "btree").unwrap_err().to_string();
        assert!(e.contains("field `layout`") && e.contains("\"sps\""), "{e}");
        let e = l.expect(Some("undo"), "sps").unwrap_err().to_string();
        assert!(e.contains("field `protocol`"), "{e}");
        for (off, field) in [(0, "magic"), (8, "version"), (20, "crc"), (50, "crc")] {
            let mut c = m.clone();
            let mut byte = [0u8];
            c.read(off, &mut byte).unwrap();
            c.write(off, &[byte[0] ^ 0x40]).unwrap();
            let e = PoolLayout::read(&mut c).unwrap_err().to_string();
            assert!(e.contains(&format!("field `{field}`")), "offset {off}: {e}");
        }
        let e = PoolLayout::plan(1 << 16, "redo", "sps", 10_000, 100_000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("too small") && e.contains("needs"), "{e}");
        assert!(PoolLayout::read(&mut VecMemory::new(1 << 16)).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_header_bytes_decode_or_are_refused_without_panicking(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 84),
            size in 0u64..1 << 30,
        ) {
            let b: [u8; 84] = bytes.try_into().unwrap();
            let _ = PoolLayout::decode(&b, size);
        }
    }
}

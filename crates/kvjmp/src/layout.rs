//! Where everything lives in the store's segment. Every offset is from the segment's
//! first byte; the segment sits at one fixed address in every process, so an offset
//! plus the segment's base is a pointer in any client.
//!
//! ```text
//! offset        what
//!      0        header (static after format): magic "PMLABKV1", version, checksum,
//!               segment size, log area, root, heap area, hash seed
//!   4096        redo log (LOG_LEN bytes): every SET is one transaction through it
//!   4096+LOG    root (one page): the two hash tables, the rehash index, the heap's
//!               bump pointer and free-list heads, the SET count
//!   +4096       heap: blocks of 2^class bytes, each with an 8-byte header
//! ```
//!
//! The redo protocol's data area is the root and the heap: every change to them after
//! format is transactional. The header is written once, last, by format.

use crate::error::KvError;

/// `PMLABKV1`, little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"PMLABKV1");
/// The layout version this code reads and writes.
pub const VERSION: u32 = 1;
/// Bytes of the header page.
pub const HEADER_LEN: u64 = 4096;
/// Bytes of the redo log: one SET of the largest key and value, a rehash step and the
/// allocator's changes fit with room to spare.
pub const LOG_LEN: u64 = 1 << 20;
/// Largest key (Redis allows 512 MB; a SET must fit one log).
pub const MAX_KEY: usize = 64 * 1024;
/// Largest value.
pub const MAX_VALUE: usize = 256 * 1024;
/// Smallest segment that holds the header, log, root and a useful heap.
pub const MIN_SEGMENT: u64 = 4 << 20;

/// Root fields (offsets within the root page).
pub mod root {
    /// Table `t` (0 or 1): the block holding its buckets (0: none).
    pub const fn table(t: u64) -> u64 {
        t * 24
    }
    /// Table `t`'s bucket count (a power of two, or 0).
    pub const fn size(t: u64) -> u64 {
        t * 24 + 8
    }
    /// Table `t`'s entry count.
    pub const fn used(t: u64) -> u64 {
        t * 24 + 16
    }
    /// The next bucket of table 0 to move to table 1; `NOT_REHASHING` when none.
    pub const REHASH: u64 = 48;
    /// The heap's first never-allocated byte.
    pub const BUMP: u64 = 56;
    /// Free-list head of block class `c`.
    pub const fn free(c: u32) -> u64 {
        64 + 8 * c as u64
    }
    /// Committed SETs since format.
    pub const SETS: u64 = 64 + 8 * 48;
    /// The segment lock's count of dead holders cleared, as of the last recovery by a
    /// writer: readers that find the lock's count ahead of it check the redo log.
    pub const RECOVERED: u64 = SETS + 8;
}

/// The rehash index when no rehash is running (Redis's `rehashidx == -1`).
pub const NOT_REHASHING: u64 = u64::MAX;

/// The static header, as format wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Segment bytes.
    pub size: u64,
    /// The redo log's first byte.
    pub log: u64,
    /// The root page.
    pub root: u64,
    /// The heap's first byte.
    pub heap: u64,
    /// Seed of the key hash (per store).
    pub seed: u64,
}

impl Header {
    /// The layout of a segment of `size` bytes.
    pub fn for_size(size: u64, seed: u64) -> Header {
        let log = HEADER_LEN;
        let root = log + LOG_LEN;
        Header {
            size,
            log,
            root,
            heap: root + 4096,
            seed,
        }
    }

    /// The header's 64 bytes (checksum at 12 over the rest).
    pub fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        for (i, v) in [self.size, self.log, self.root, self.heap, self.seed]
            .iter()
            .enumerate()
        {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        let crc = crc(&b);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a header read from a segment of `seg_size` bytes; `what`
    /// names the segment in errors.
    pub fn decode(b: &[u8], seg_size: u64, what: &str) -> Result<Header, KvError> {
        let bad = |offset: u64, field: &'static str, problem: String| KvError::BadFormat {
            what: what.to_string(),
            offset,
            field,
            problem,
        };
        if b.len() < 64 {
            return Err(bad(
                0,
                "size",
                format!("{} bytes hold no 64-byte header", b.len()),
            ));
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let magic = u64_at(0);
        if magic != MAGIC {
            return Err(bad(
                0,
                "magic",
                format!(
                    "{:?} is not \"PMLABKV1\": not a pmlab key-value store (another format, or a store whose creation never finished)",
                    String::from_utf8_lossy(&b[0..8])
                ),
            ));
        }
        let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(bad(
                8,
                "version",
                format!("{version}, this pmlab reads {VERSION}"),
            ));
        }
        let stored = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
        if stored != crc(b) {
            return Err(bad(
                12,
                "checksum",
                format!("stored {stored:#010x}, computed {:#010x}", crc(b)),
            ));
        }
        let h = Header {
            size: u64_at(16),
            log: u64_at(24),
            root: u64_at(32),
            heap: u64_at(40),
            seed: u64_at(48),
        };
        let expect = Header::for_size(h.size, h.seed);
        if h.size != seg_size {
            return Err(bad(
                16,
                "size",
                format!("{} bytes, the segment has {seg_size}", h.size),
            ));
        }
        if h != expect {
            return Err(bad(
                24,
                "layout",
                format!("{h:?} is not this version's layout {expect:?}"),
            ));
        }
        Ok(h)
    }
}

fn crc(b: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&b[0..12]);
    h.update(&b[16..64]);
    h.finalize()
}

/// The key hash: FNV-1a over the key, started from the store's seed. Every client must
/// compute the same hash, so it cannot be a per-process random hasher as std's is.
pub fn hash_key(seed: u64, key: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // A final mix so that the low bits (the bucket index) depend on every byte.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

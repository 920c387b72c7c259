//! Eager Commit's memory log (paper 001, §III-A, Fig. 2): a log head, then a circular
//! sequence of block groups, each written to memory atomically, each block tagged with
//! the transaction that wrote it so that groups of different transactions interleave.
//!
//! # What a "block" is: the open detail, and both readings
//!
//! The paper says a block group "consists of eight data blocks, seven for the log data
//! and one for the metadata", that "the size of the block group is 64 bytes, which can
//! be transmitted to memory in a single burst", and draws the metadata block as a 64-bit
//! sequence ID and seven 64-bit BLK-TAGs `CID(3) TID(1) TxID(8) TxCnt(16) ADDR(32)
//! RESV(4)`. Those tags alone fill 64 bytes, so the two statements disagree:
//!
//! - [`Reading::Line`] (the default): a block is a 64-byte cache line — what LOC's
//!   hardware tracks (its dirty-block table and every figure count cache blocks) and what
//!   the metadata's 64-byte size fits. A group is a metadata line (sequence ID + seven
//!   BLK-TAGs exactly as drawn) and up to seven data lines, 512 bytes, and it reaches
//!   memory atomically, as the paper states groups do (the memory controller lands the
//!   group's lines together: `Machine::port_write`). We put the metadata line first
//!   (the figure draws it last) so that a partly filled group is one contiguous write.
//! - [`Reading::Word`]: a block is an 8-byte word, so a group is one 64-byte line
//!   (seven data words and one metadata word) and atomic by nature. A 64-bit metadata
//!   word cannot hold seven BLK-TAGs, so it holds one tag for the whole group: `KIND(2)
//!   TxID(8) TxCnt(16) ADDR(32) LAP(6)`, the group's seven words being words 0-6 (or
//!   word 7) of the line at ADDR; a logged cache line takes two groups, and TxCnt counts
//!   groups. LAP (the lap of the circular log) replaces the sequence ID, for which there
//!   is no room.
//!
//! The reproduction runs both (`pmlab reproduce loc` reports EC-WAL and LOC-WAL under
//! each); they differ in log traffic (8/7 lines written per logged line against 2).
//!
//! Records (a transaction's count, a dependency pair, an abort, H-WAL's commit record)
//! are 64-bit words in a slot (Line) or group (Word) of their own:
//! `KIND(4) Tx(8) Ty(8) VALUE(16)`.
//!
//! Transaction IDs are 8 bits, as in the paper: the log head holds the full ID of the
//! oldest transaction the valid log may hold (`base_tx`), and an 8-bit ID is read as the
//! first full ID at or after it with those low bits. The writer keeps every transaction
//! of the valid log within 256 of the base (LOC's Tx State Table tracks 128).

use pmlab_spine::LINE;

/// What one block of a block group is (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Reading {
    /// A 64-byte cache line; a group is eight lines (metadata first).
    Line,
    /// An 8-byte word; a group is one line.
    Word,
}

impl Reading {
    /// The name in results.
    pub fn name(self) -> &'static str {
        match self {
            Reading::Line => "line",
            Reading::Word => "word",
        }
    }

    fn code(self) -> u64 {
        match self {
            Reading::Line => 1,
            Reading::Word => 2,
        }
    }
}

/// Magic of a log head ("pmlab LOC log").
const HEAD_MAGIC: u64 = 0x676f_6c43_4f4c_6d70;
/// Data slots (or words) of one block group.
pub const SLOTS: usize = 7;

/// Where the log lives and how it is cut into groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// First byte of the log area (line-aligned): the head line.
    pub base: u64,
    /// Groups in the circular region after the head.
    pub ngroups: u64,
    /// What a block is.
    pub reading: Reading,
}

/// The log head: where the valid log starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Head {
    /// Sequence number of the first valid group.
    pub start_seq: u64,
    /// Full ID of the oldest transaction the valid log may hold.
    pub base_tx: u64,
}

impl Layout {
    /// The log in `[base, base + len)`; `None` if it is not line-aligned or holds fewer
    /// than two groups.
    pub fn new(base: u64, len: u64, reading: Reading) -> Option<Layout> {
        let gb = Self::bytes_of(reading);
        if base % LINE != 0 || len < LINE + 2 * gb {
            return None;
        }
        Some(Layout {
            base,
            ngroups: (len - LINE) / gb,
            reading,
        })
    }

    fn bytes_of(reading: Reading) -> u64 {
        match reading {
            Reading::Line => (SLOTS as u64 + 1) * LINE,
            Reading::Word => LINE,
        }
    }

    /// Bytes of one group.
    pub fn group_bytes(&self) -> u64 {
        Self::bytes_of(self.reading)
    }

    /// Address of the group with sequence number `seq`.
    pub fn group_addr(&self, seq: u64) -> u64 {
        self.base + LINE + (seq % self.ngroups) * self.group_bytes()
    }

    /// Blocks one logged cache line takes.
    pub fn blocks_per_line(&self) -> u32 {
        match self.reading {
            Reading::Line => 1,
            Reading::Word => 2,
        }
    }

    /// The lap of the circular log a sequence number is in (Word reading's 6 bits).
    pub fn lap(&self, seq: u64) -> u64 {
        (seq / self.ngroups) & 63
    }

    /// A start sequence number past every group the log can hold now, on a fresh lap:
    /// what a recovered log restarts at, so no group of before reads as valid.
    pub fn fresh_start(&self, start: u64) -> u64 {
        (start / self.ngroups + 2) * self.ngroups
    }

    /// The head line's bytes.
    pub fn encode_head(&self, h: &Head) -> [u8; 64] {
        let words = [
            HEAD_MAGIC,
            self.reading.code(),
            self.ngroups,
            h.start_seq,
            h.base_tx,
            head_check(self, h),
        ];
        let mut b = [0u8; 64];
        for (i, w) in words.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// Reads a head line; why it is not one of this layout's.
    pub fn decode_head(&self, b: &[u8; 64]) -> Result<Head, String> {
        let w = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
        if w(0) != HEAD_MAGIC {
            return Err("no log head (bad magic)".into());
        }
        if w(1) != self.reading.code() || w(2) != self.ngroups {
            return Err(format!(
                "log head of another layout (reading {}, {} groups; expected {}, {})",
                w(1),
                w(2),
                self.reading.code(),
                self.ngroups
            ));
        }
        let h = Head {
            start_seq: w(3),
            base_tx: w(4),
        };
        if w(5) != head_check(self, &h) {
            return Err("log head checksum mismatch".into());
        }
        Ok(h)
    }
}

fn head_check(l: &Layout, h: &Head) -> u64 {
    let mut x = HEAD_MAGIC ^ l.ngroups.rotate_left(17) ^ l.reading.code();
    for v in [h.start_seq, h.base_tx] {
        x = (x ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    x
}

/// The full ID of 8-bit `low` relative to `base` (the first at or after it).
pub fn full_tx(base: u64, low: u8) -> u64 {
    base + u64::from(low.wrapping_sub(base as u8))
}

/// Kinds of a Line-reading BLK-TAG (in its RESV bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    /// Unused slot.
    Empty,
    /// A data line.
    Data,
    /// A line of records.
    Records,
    /// No slot line: the tag itself is the commit record of its transaction (S-WAL's,
    /// which software writes through the cache: a one-line group cannot be torn).
    Commit,
}

/// A Line-reading BLK-TAG: `CID(3) TID(1) TxID(8) TxCnt(16) ADDR(32) RESV(4)`, CID and
/// TID zero (one core, one thread), ADDR the line number, RESV the slot's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlkTag {
    /// What the slot holds.
    pub kind: SlotKind,
    /// Low 8 bits of the writer's transaction ID.
    pub tx: u8,
    /// The transaction's block count on its last block, else 0.
    pub cnt: u16,
    /// Home line number.
    pub line: u32,
}

impl BlkTag {
    /// The 64-bit tag.
    pub fn encode(&self) -> u64 {
        let kind = match self.kind {
            SlotKind::Empty => 0,
            SlotKind::Data => 1,
            SlotKind::Records => 2,
            SlotKind::Commit => 3,
        };
        (u64::from(self.tx) << 52)
            | (u64::from(self.cnt) << 36)
            | (u64::from(self.line) << 4)
            | kind
    }

    /// Reads a tag; unknown kinds are errors.
    pub fn decode(w: u64) -> Result<BlkTag, String> {
        let kind = match w & 0xf {
            0 => SlotKind::Empty,
            1 => SlotKind::Data,
            2 => SlotKind::Records,
            3 => SlotKind::Commit,
            k => return Err(format!("BLK-TAG kind {k}")),
        };
        if w >> 60 != 0 {
            return Err("BLK-TAG with a core or thread ID".into());
        }
        Ok(BlkTag {
            kind,
            tx: (w >> 52) as u8,
            cnt: (w >> 36) as u16,
            line: (w >> 4) as u32,
        })
    }
}

/// Kinds of a Word-reading group tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKind {
    /// Not a group (never written, or garbage).
    Empty,
    /// Words 0-6 of the line at ADDR.
    DataLow,
    /// Word 7 of the line at ADDR (in the group's first data word).
    DataHigh,
    /// Seven record words.
    Records,
}

/// A Word-reading group tag: `KIND(2) TxID(8) TxCnt(16) ADDR(32) LAP(6)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordTag {
    /// What the group holds.
    pub kind: GroupKind,
    /// Low 8 bits of the writer's transaction ID.
    pub tx: u8,
    /// Block count on the transaction's last group, else 0.
    pub cnt: u16,
    /// Home line number.
    pub line: u32,
    /// Lap of the circular log the group was written in.
    pub lap: u8,
}

impl WordTag {
    /// The 64-bit tag.
    pub fn encode(&self) -> u64 {
        let kind = match self.kind {
            GroupKind::Empty => 0,
            GroupKind::DataLow => 1,
            GroupKind::DataHigh => 2,
            GroupKind::Records => 3,
        };
        (kind << 62)
            | (u64::from(self.tx) << 54)
            | (u64::from(self.cnt) << 38)
            | (u64::from(self.line) << 6)
            | u64::from(self.lap & 63)
    }

    /// Reads a tag.
    pub fn decode(w: u64) -> WordTag {
        WordTag {
            kind: match w >> 62 {
                0 => GroupKind::Empty,
                1 => GroupKind::DataLow,
                2 => GroupKind::DataHigh,
                _ => GroupKind::Records,
            },
            tx: (w >> 54) as u8,
            cnt: (w >> 38) as u16,
            line: (w >> 6) as u32,
            lap: (w & 63) as u8,
        }
    }
}

/// A record of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// Dependency pair `<Tx, Ty, n>`: `tx` has `n` blocks coalesced into `ty`'s.
    Pair {
        /// The earlier transaction.
        tx: u64,
        /// The later one, whose blocks carry `tx`'s writes.
        ty: u64,
        /// Blocks.
        n: u16,
    },
    /// The block count of a transaction none of whose blocks could carry it.
    Count {
        /// The transaction.
        tx: u64,
        /// Its TxCnt.
        cnt: u16,
    },
    /// The transaction aborted after some of its blocks reached the log.
    Abort {
        /// The transaction.
        tx: u64,
    },
    /// H-WAL's commit record.
    Commit {
        /// The transaction.
        tx: u64,
    },
}

impl Record {
    /// The 64-bit word.
    pub fn encode(&self) -> u64 {
        let (kind, tx, ty, v) = match *self {
            Record::Pair { tx, ty, n } => (1u64, tx, ty, n),
            Record::Count { tx, cnt } => (2, tx, 0, cnt),
            Record::Abort { tx } => (3, tx, 0, 0),
            Record::Commit { tx } => (4, tx, 0, 0),
        };
        (kind << 60) | ((tx & 0xff) << 52) | ((ty & 0xff) << 44) | (u64::from(v) << 28)
    }

    /// Reads a word (`Ok(None)` for an empty one), full IDs relative to `base`.
    pub fn decode(w: u64, base: u64) -> Result<Option<Record>, String> {
        let tx = full_tx(base, (w >> 52) as u8);
        let ty = full_tx(base, (w >> 44) as u8);
        let v = (w >> 28) as u16;
        Ok(Some(match w >> 60 {
            0 => return Ok(None),
            1 => Record::Pair { tx, ty, n: v },
            2 => Record::Count { tx, cnt: v },
            3 => Record::Abort { tx },
            4 => Record::Commit { tx },
            k => return Err(format!("record kind {k}")),
        }))
    }
}

/// Reads little-endian word `i` of a line.
pub fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

/// Writes little-endian word `i` of a line.
pub fn set_word(b: &mut [u8], i: usize, v: u64) {
    b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_records_round_trip() {
        let t = BlkTag {
            kind: SlotKind::Data,
            tx: 200,
            cnt: 65535,
            line: u32::MAX,
        };
        assert_eq!(BlkTag::decode(t.encode()), Ok(t));
        assert!(BlkTag::decode(7).is_err());
        let w = WordTag {
            kind: GroupKind::DataHigh,
            tx: 3,
            cnt: 9,
            line: 123_456,
            lap: 63,
        };
        assert_eq!(WordTag::decode(w.encode()), w);
        let base = 250;
        for r in [
            Record::Pair {
                tx: 251,
                ty: 260,
                n: 3,
            },
            Record::Count { tx: 255, cnt: 7 },
            Record::Abort { tx: 256 },
            Record::Commit { tx: 300 },
        ] {
            assert_eq!(Record::decode(r.encode(), base), Ok(Some(r)));
        }
        assert_eq!(Record::decode(0, 1), Ok(None));
    }

    #[test]
    fn eight_bit_ids_read_relative_to_the_base() {
        assert_eq!(full_tx(250, 250), 250);
        assert_eq!(full_tx(250, 4), 260);
        assert_eq!(full_tx(0, 255), 255);
    }

    #[test]
    fn heads_check_their_layout() {
        let l = Layout::new(4096, 64 + 10 * 512, Reading::Line).unwrap();
        assert_eq!(l.ngroups, 10);
        assert_eq!(l.group_addr(13), 4096 + 64 + 3 * 512);
        let h = Head {
            start_seq: 77,
            base_tx: 5,
        };
        let b = l.encode_head(&h);
        assert_eq!(l.decode_head(&b), Ok(h));
        let w = Layout::new(4096, 64 + 10 * 512, Reading::Word).unwrap();
        assert!(w.decode_head(&b).is_err(), "another reading");
        let mut bad = b;
        bad[24] ^= 1;
        assert!(l.decode_head(&bad).is_err());
        assert!(l.decode_head(&[0; 64]).is_err());
        assert!(l.fresh_start(77) >= 77 + l.ngroups);
    }
}

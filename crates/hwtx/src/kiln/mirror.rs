//! The non-volatile LLC's persistent state, kept in the machine's durable image so that
//! a crash image holds it: Kiln's LLC is STT-RAM (Zhao et al., MICRO 2013), and what a
//! crash leaves there is what its recovery reads.
//!
//! The protocol's "log" area holds it: a head line (magic, the commit register, sizes,
//! a checksum), then one 80-byte record per LLC way — the home line, the writing
//! transaction and the 64 bytes of a dirty version (line `u64::MAX`: no dirty version)
//! — then as many records for the write-back buffer, where a version evicted from the
//! LLC waits, still non-volatile, until its home write completes. Each record and the
//! head are written whole (`Machine::nv_write`): an SRAM/STT-RAM array writes a line
//! with its tag at once.

use pmlab_spine::LINE;

/// Magic of the NV-LLC head ("pmlab Kiln").
const MAGIC: u64 = 0x6e6c_694b_6261_6c6d;
/// Bytes of one record.
pub const RECORD: u64 = 80;
/// The write-back buffer's records.
pub const VICTIMS: u64 = 32;
/// A record with no version.
pub const NONE: u64 = u64::MAX;

/// Where the NV-LLC's state lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mirror {
    /// First byte (the head line).
    pub base: u64,
    /// LLC ways.
    pub ways: u64,
}

/// One record: a dirty version of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    /// Home line number.
    pub line: u64,
    /// The transaction that wrote it.
    pub tx: u64,
    /// Its bytes.
    pub data: [u8; 64],
}

impl Mirror {
    /// The state of an LLC of `ways` ways in `[base, base + len)`, if it fits.
    pub fn new(base: u64, len: u64, ways: u64) -> Option<Mirror> {
        let m = Mirror { base, ways };
        (base % LINE == 0 && m.bytes() <= len).then_some(m)
    }

    /// Bytes the state takes.
    pub fn bytes(&self) -> u64 {
        LINE.saturating_add(self.ways.saturating_add(VICTIMS).saturating_mul(RECORD))
    }

    /// Address of way `w`'s record.
    pub fn way(&self, w: usize) -> u64 {
        self.base + LINE + w as u64 * RECORD
    }

    /// Address of write-back buffer slot `v`'s record.
    pub fn victim(&self, v: usize) -> u64 {
        self.way(self.ways as usize + v)
    }

    /// Every record's address.
    pub fn records(&self) -> impl Iterator<Item = u64> + '_ {
        (0..(self.ways + VICTIMS) as usize).map(|i| self.way(i))
    }

    /// The head line with commit register `reg`.
    pub fn head(&self, reg: u64) -> [u8; 64] {
        let words = [MAGIC, reg, self.ways, VICTIMS, check(self, reg)];
        let mut b = [0u8; 64];
        for (i, w) in words.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// The commit register of a head line, or why it is not this LLC's.
    pub fn register(&self, b: &[u8; 64]) -> Result<u64, String> {
        let w = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
        if w(0) != MAGIC {
            return Err("no NV-LLC head (bad magic)".into());
        }
        if w(2) != self.ways || w(3) != VICTIMS {
            return Err(format!(
                "NV-LLC of {} ways and {} victims; expected {}",
                w(2),
                w(3),
                self.ways
            ));
        }
        if w(4) != check(self, w(1)) {
            return Err("NV-LLC head checksum mismatch".into());
        }
        Ok(w(1))
    }
}

fn check(m: &Mirror, reg: u64) -> u64 {
    (MAGIC ^ m.ways.rotate_left(21) ^ reg).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A record's bytes (`None`: empty).
pub fn encode(v: Option<&Version>) -> [u8; RECORD as usize] {
    let mut b = [0u8; RECORD as usize];
    match v {
        None => b[..8].copy_from_slice(&NONE.to_le_bytes()),
        Some(v) => {
            b[..8].copy_from_slice(&v.line.to_le_bytes());
            b[8..16].copy_from_slice(&v.tx.to_le_bytes());
            b[16..].copy_from_slice(&v.data);
        }
    }
    b
}

/// Reads a record.
pub fn decode(b: &[u8; RECORD as usize]) -> Option<Version> {
    let line = u64::from_le_bytes(b[..8].try_into().expect("8"));
    (line != NONE).then(|| Version {
        line,
        tx: u64::from_le_bytes(b[8..16].try_into().expect("8")),
        data: b[16..].try_into().expect("64"),
    })
}

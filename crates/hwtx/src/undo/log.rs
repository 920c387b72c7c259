//! The hardware undo log's layout in its area, and the scan recovery makes.
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0 | 8 | `magic` `PMHWUNDO` |
//! | 8 | 8 | `version` (1) |
//! | 16 | 8 | `entries`: how many entry slots the area holds |
//! | 24 | 8 | `done`: the tag of the last transaction committed or rolled back |
//!
//! Entry `k` takes 128 bytes at `64 + 128 k`, two lines each carrying the entry's tag
//! (the running transaction's, `done + 1`): line A holds the tag, the line's address
//! and its first 48 old bytes, line B its last 16 old bytes and the tag again. The
//! entries of the running transaction are the run of slots from 0 whose two lines
//! both carry `done + 1`: a slot that one line of a later attempt reached, or that an
//! earlier transaction left, stops the run (tags grow with every transaction
//! finished, so no stale line carries the running one's).

use pmlab_model::Machine;
use pmlab_spine::{Addr, LINE, Memory};
use pmlab_tx::{Area, TxError};

/// The magic of a hardware undo log.
pub const MAGIC: u64 = u64::from_le_bytes(*b"PMHWUNDO");
/// The layout version.
pub const VERSION: u64 = 1;
/// Bytes of one entry slot.
pub const ENTRY: u64 = 128;
/// Where the `done` field is.
pub const DONE_AT: u64 = 24;

/// One logged line: its address and old contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The line's (virtual) address.
    pub addr: Addr,
    /// Its bytes before the transaction's first store to it.
    pub old: [u8; 64],
}

/// Entry slots an area of `len` bytes holds.
pub fn capacity(len: u64) -> u64 {
    len.saturating_sub(LINE) / ENTRY
}

/// The two lines of entry `e` under `tag`.
pub fn encode(tag: u64, e: &Entry) -> [u8; ENTRY as usize] {
    let mut b = [0u8; ENTRY as usize];
    b[0..8].copy_from_slice(&tag.to_le_bytes());
    b[8..16].copy_from_slice(&e.addr.to_le_bytes());
    b[16..64].copy_from_slice(&e.old[..48]);
    b[64..80].copy_from_slice(&e.old[48..]);
    b[80..88].copy_from_slice(&tag.to_le_bytes());
    b
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Entry slot `k` if both its lines carry `tag`.
pub fn decode(tag: u64, b: &[u8; ENTRY as usize]) -> Option<Entry> {
    if word(b, 0) != tag || word(b, 80) != tag {
        return None;
    }
    let mut old = [0u8; 64];
    old[..48].copy_from_slice(&b[16..64]);
    old[48..].copy_from_slice(&b[64..80]);
    Some(Entry {
        addr: word(b, 8),
        old,
    })
}

/// Writes a fresh header (durably) into `log`.
pub fn format(m: &mut Machine, log: Area) -> Result<(), TxError> {
    let mut h = [0u8; LINE as usize];
    h[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    h[8..16].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&capacity(log.len).to_le_bytes());
    m.phys().write(log.base, &h)?;
    m.phys().persist(log.base, LINE)?;
    Ok(())
}

fn bad(log: Area, offset: u64, field: &'static str, problem: String) -> TxError {
    TxError::BadHeader {
        structure: "hardware undo log",
        addr: log.base,
        offset,
        field,
        problem,
    }
}

/// Checks the header of `log`; the `done` tag.
pub fn open(m: &mut Machine, log: Area) -> Result<u64, TxError> {
    let mut h = [0u8; LINE as usize];
    m.phys().read(log.base, &mut h)?;
    if word(&h, 0) != MAGIC {
        let got = word(&h, 0);
        return Err(bad(
            log,
            0,
            "magic",
            format!("{got:#018x} is not a hardware undo log"),
        ));
    }
    if word(&h, 8) != VERSION {
        return Err(bad(
            log,
            8,
            "version",
            format!("{} is not {VERSION}", word(&h, 8)),
        ));
    }
    if word(&h, 16) != capacity(log.len) {
        let problem = format!(
            "{} entries recorded, but the {}-byte area holds {}",
            word(&h, 16),
            log.len,
            capacity(log.len)
        );
        return Err(bad(log, 16, "entries", problem));
    }
    Ok(word(&h, DONE_AT as usize))
}

/// The running transaction's entries (tag `done + 1`), in slot order; an entry that
/// no crash can leave (an address outside `data` or not line-aligned) is corruption.
pub fn live_entries(
    m: &mut Machine,
    log: Area,
    data: Area,
    done: u64,
) -> Result<Vec<Entry>, TxError> {
    let tag = done.wrapping_add(1);
    let mut out = Vec::new();
    let mut b = [0u8; ENTRY as usize];
    for k in 0..capacity(log.len) {
        let at = log.base + LINE + k * ENTRY;
        m.phys().read(at, &mut b)?;
        let Some(e) = decode(tag, &b) else { break };
        if e.addr % LINE != 0 || !data.contains(e.addr, LINE) {
            return Err(TxError::Corrupt {
                structure: "hardware undo log",
                addr: log.base,
                offset: at + 8 - log.base,
                field: "addr",
                problem: format!(
                    "a live entry for {:#x}, not a line of the data area [{:#x}, {:#x})",
                    e.addr,
                    data.base,
                    data.end()
                ),
            });
        }
        out.push(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_live_only_under_its_tag_in_both_lines() {
        let e = Entry {
            addr: 4096,
            old: std::array::from_fn(|i| i as u8),
        };
        let mut b = encode(7, &e);
        assert_eq!(decode(7, &b), Some(e.clone()));
        assert_eq!(decode(8, &b), None);
        // Line B from an earlier transaction: a torn entry is not live.
        b[80..88].copy_from_slice(&6u64.to_le_bytes());
        assert_eq!(decode(7, &b), None);
    }
}

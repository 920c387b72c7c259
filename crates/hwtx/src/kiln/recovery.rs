//! Kiln's recovery, over any memory: every committed version in the NV-LLC's state (its
//! ways and its write-back buffer) — written by a transaction at or before the commit
//! register — goes home, the newest of each line last; uncommitted ones are dropped;
//! then the state is emptied. Idempotent: the records are emptied only after the home
//! writes are durable, oldest first, so a crash while emptying leaves each line's
//! newest record or none.

use std::collections::BTreeMap;

use pmlab_spine::{FlushKind, LINE, Memory, SpineError};

use super::mirror::{self, Mirror, RECORD};

/// Why the NV-LLC's state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KilnRecoveryError {
    /// Memory refused an access.
    #[error(transparent)]
    Memory(#[from] SpineError),
    /// The head is not this NV-LLC's.
    #[error("NV-LLC state at {addr:#x}: {message}")]
    Corrupt {
        /// Where.
        addr: u64,
        /// What.
        message: String,
    },
}

/// What recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KilnRecovered {
    /// The commit register.
    pub register: u64,
    /// Committed versions written home (one per line).
    pub written: u64,
    /// Uncommitted versions dropped.
    pub dropped: u64,
}

/// Recovers the NV-LLC state kept in `[base, base + len)` on `m`.
pub fn recover<M: Memory + ?Sized>(
    m: &mut M,
    base: u64,
    len: u64,
) -> Result<KilnRecovered, KilnRecoveryError> {
    let mut head = [0u8; 64];
    m.read(base, &mut head)?;
    let corrupt = |message: String| KilnRecoveryError::Corrupt {
        addr: base,
        message,
    };
    let ways = u64::from_le_bytes(head[16..24].try_into().expect("8"));
    let mir = Mirror::new(base, len, ways)
        .ok_or_else(|| corrupt(format!("an NV-LLC of {ways} ways does not fit {len} bytes")))?;
    let reg = mir.register(&head).map_err(corrupt)?;
    let mut out = KilnRecovered {
        register: reg,
        ..KilnRecovered::default()
    };
    let mut newest: BTreeMap<u64, (u64, [u8; 64])> = BTreeMap::new();
    let mut held = Vec::new();
    for a in mir.records() {
        let mut b = [0u8; RECORD as usize];
        m.read(a, &mut b)?;
        let Some(v) = mirror::decode(&b) else {
            continue;
        };
        held.push((v.tx, a));
        if v.tx == 0 || v.tx > reg {
            out.dropped += 1;
            continue;
        }
        let e = newest.entry(v.line).or_insert((v.tx, v.data));
        if v.tx > e.0 {
            *e = (v.tx, v.data);
        }
    }
    for (&line, (_, data)) in &newest {
        m.write(line * LINE, data)?;
        m.flush(line * LINE, LINE, FlushKind::Clwb)?;
        out.written += 1;
    }
    m.fence();
    // Oldest first: until a line's newest record is emptied, it is still there for a
    // recovery run again after a crash, and no older one outlives it.
    // A record is emptied by its first word alone (which never straddles a line), so a
    // crash cannot leave half a record.
    held.sort_unstable();
    for (_, a) in held {
        m.write(a, &mirror::NONE.to_le_bytes())?;
        m.flush(a, 8, FlushKind::Clwb)?;
        m.fence();
    }
    Ok(out)
}

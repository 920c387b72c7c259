//! The crash oracle: recovers a crash image as the service does when it starts, checks
//! it with fsck, and says which committed state it holds.

use std::collections::HashMap;

use pmlab_spine::{Memory, VecMemory};

use super::snapshot::{self, ImageRead, Snapshot, first_difference};
use pmlab_fs::fsck::{Severity, fsck};
use pmlab_fs::layout::Superblock;
use pmlab_fs::redo::{self, FaultPlan, LogState};

/// Which state of the batch in flight a crash image recovered to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovered {
    /// The state before the batch: the batch is wholly absent.
    Before,
    /// The state after it: the batch is wholly present.
    After,
}

/// What recovering one image found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The state recovered.
    pub state: Recovered,
    /// Whether recovery replayed a committed transaction from the log (so a crash
    /// during recovery is worth exploring too).
    pub replayed: bool,
}

/// Judges the crash images of one batch: `before` and `after` are the only states
/// allowed. Identical images recur at many crash points; each is judged once.
pub struct Oracle<'a> {
    faults: FaultPlan,
    before: &'a Snapshot,
    after: &'a Snapshot,
    seen: HashMap<(u64, u64), Result<Verdict, String>>,
}

impl<'a> Oracle<'a> {
    /// An oracle for a batch taking the volume from `before` to `after`, whose log was
    /// written (and is read back) under `faults`.
    pub fn new(faults: FaultPlan, before: &'a Snapshot, after: &'a Snapshot) -> Self {
        Oracle {
            faults,
            before,
            after,
            seen: HashMap::new(),
        }
    }

    /// The verdict on `bytes`, or what is wrong with them.
    pub fn judge(&mut self, bytes: &[u8]) -> Result<Verdict, String> {
        let key = fingerprint(bytes);
        if let Some(v) = self.seen.get(&key) {
            return v.clone();
        }
        let v = self.judge_afresh(bytes);
        self.seen.insert(key, v.clone());
        v
    }

    /// Distinct images judged, and how many recovered to the state before and after.
    pub fn counts(&self) -> (usize, usize, usize) {
        let state = |s| {
            self.seen
                .values()
                .filter(|v| matches!(v, Ok(Verdict { state, .. }) if *state == s))
                .count()
        };
        (
            self.seen.len(),
            state(Recovered::Before),
            state(Recovered::After),
        )
    }

    fn judge_afresh(&self, bytes: &[u8]) -> Result<Verdict, String> {
        let mut mem = VecMemory::new(bytes.len());
        mem.write(0, bytes).map_err(|e| e.to_string())?;
        let sb = Superblock::read(&mut mem).map_err(|e| format!("superblock: {e}"))?;
        let log =
            redo::recover_with(&mut mem, &sb, self.faults).map_err(|e| format!("recovery: {e}"))?;
        let report = fsck(&mut mem).map_err(|e| format!("fsck refused the volume: {e}"))?;
        if let Some(f) = report
            .findings
            .iter()
            .find(|f| f.severity == Severity::Error)
        {
            let n = report.findings.len();
            return Err(format!("fsck after recovery: {f} ({n} findings)"));
        }
        let got =
            snapshot::read(&mut ImageRead(mem.bytes())).map_err(|e| format!("namespace: {e}"))?;
        let replayed = matches!(log, LogState::Committed(_));
        if got == *self.after {
            return Ok(Verdict {
                state: Recovered::After,
                replayed,
            });
        }
        if got == *self.before {
            return Ok(Verdict {
                state: Recovered::Before,
                replayed,
            });
        }
        Err(format!(
            "the batch is half visible: against the state before it {}; against the state after it {}",
            first_difference(&got, self.before).unwrap_or_default(),
            first_difference(&got, self.after).unwrap_or_default()
        ))
    }
}

/// A 128-bit fingerprint of an image: four independent multiplicative hashes of its
/// 64-bit words (word i feeds lane i mod 4, so the lanes run in parallel), mixed.
///
/// Not a CRC: CRC is linear, so two CRCs with different starting values collide
/// together on same-length inputs, and with thousands of distinct images per batch 32
/// bits do collide (a collision hands one image another's verdict; it happened).
fn fingerprint(bytes: &[u8]) -> (u64, u64) {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut lanes: [u64; 4] = [1, 2, 3, 4];
    let mut blocks = bytes.chunks_exact(32);
    for b in &mut blocks {
        for (k, lane) in lanes.iter_mut().enumerate() {
            let w = u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes"));
            *lane = (lane.rotate_left(23) ^ w).wrapping_mul(K);
        }
    }
    for (k, &b) in blocks.remainder().iter().enumerate() {
        lanes[k % 4] = (lanes[k % 4].rotate_left(23) ^ u64::from(b)).wrapping_mul(K);
    }
    let mix = |a: u64, b: u64| (a ^ b.rotate_left(31)).wrapping_mul(K) ^ (bytes.len() as u64);
    (mix(lanes[0], lanes[1]), mix(lanes[2], lanes[3]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_pairs_collide_where_the_fingerprint_does_not() {
        // CRC is affine over GF(2): for inputs of one length, the XOR of two CRCs with
        // different starting values is a constant, so the second CRC is a function of
        // the first and the pair is still a 32-bit fingerprint.
        let crc2 = |b: &[u8]| {
            let mut h = crc32fast::Hasher::new_with_initial(0x5eed_c0de);
            h.update(b);
            crc32fast::hash(b) ^ h.finalize()
        };
        let a = vec![0u8; 4096];
        let mut b = a.clone();
        b[100] = 1;
        b[3000] = 0x80;
        assert_eq!(crc2(&a), crc2(&b));
        // Every single-byte change moves the fingerprint.
        let base = fingerprint(&a);
        for i in (0..4096).step_by(7) {
            let mut x = a.clone();
            x[i] ^= 0x5a;
            assert_ne!(fingerprint(&x), base, "byte {i}");
        }
        assert_ne!(fingerprint(&a[..4095]), fingerprint(&a[..4094]));
    }
}

//! The checksum of log images (redo logs, undo records).
//!
//! Why not CRC-32: a log record often carries data that is itself sealed with a CRC-32
//! (a file system's metadata page ends with the CRC-32 of its body). CRC is affine over
//! GF(2), and a CRC-32 running over `data ‖ crc32(data)` leaves the same state whatever
//! `data` is (the CRC residue). A log checksum that is a CRC-32 of the records therefore
//! cannot tell one sealed payload from another: after a crash that left a *stale*
//! sealed record (an older transaction's bytes in the same slot) under a new header,
//! the log still verifies, and recovery replays old data as if it were new. The
//! multiply-xorshift mix below is not linear over GF(2), so no payload structure cancels
//! out; it is not cryptographic (torn writes are not adversaries) and costs two
//! multiplications per 8 bytes.
//!
//! Two versions: [`log_checksum`] runs one chain of mixes, so each word waits for the
//! multiplications of the one before; [`log_checksum_lanes`] (redo logs from
//! `PMREDO02` on) deals the words to four chains that the CPU runs side by side and
//! mixes the four into one at the end, the same non-linear mix throughout. Logs in the
//! older format keep being checked with the chain they were written with.

const K1: u64 = 0x9e37_79b9_7f4a_7c15;
const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;
const K3: u64 = 0x1656_67b1_9e37_79f9;

fn mix(h: u64, w: u64) -> u64 {
    ((h ^ w).wrapping_mul(K1)).rotate_left(29).wrapping_mul(K2)
}

/// The little-endian word of `rest` (fewer than 8 bytes), zero-padded.
fn tail_word(rest: &[u8]) -> u64 {
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    u64::from_le_bytes(last)
}

fn word(w: &[u8]) -> u64 {
    u64::from_le_bytes(w.try_into().expect("8-byte chunk"))
}

/// The final avalanche: every bit of `h` reaches the 32 bits kept.
fn finish(mut h: u64) -> u32 {
    h ^= h >> 33;
    h = h.wrapping_mul(K1);
    h ^= h >> 29;
    (h ^ (h >> 32)) as u32
}

/// The 32-bit checksum of the concatenation of `parts`, each part's length included
/// (so that moving bytes from one part to the next changes it): one serial chain.
pub(crate) fn log_checksum(parts: &[&[u8]]) -> u32 {
    let mut h = K3;
    for part in parts {
        h = mix(h, part.len() as u64);
        let mut words = part.chunks_exact(8);
        for w in &mut words {
            h = mix(h, word(w));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            h = mix(h, tail_word(rest));
        }
    }
    finish(h)
}

/// Chains of [`log_checksum_lanes`]: enough to keep the multiplier busy while each
/// chain waits out the latency of its own two multiplications.
const LANES: usize = 4;

/// Distinct starting states, so that equal words in different lanes leave different
/// states.
const LANE_SEEDS: [u64; LANES] = [K3, K3 ^ K1, K3 ^ K2, K3 ^ K1 ^ K2];

/// The 32-bit checksum of the concatenation of `parts`, each part's length included,
/// over four interleaved chains: within each part, word `i` goes to chain `i % 4` (a
/// zero-padded tail counts as a word), and a part's length to chain 0 before its
/// words. The chains are mixed into one in order at the end, so a word's position —
/// its chain and its place in that chain — counts, as in [`log_checksum`].
pub(crate) fn log_checksum_lanes(parts: &[&[u8]]) -> u32 {
    let mut h = LANE_SEEDS;
    for part in parts {
        h[0] = mix(h[0], part.len() as u64);
        let mut blocks = part.chunks_exact(8 * LANES);
        for b in &mut blocks {
            for (lane, w) in h.iter_mut().zip(b.chunks_exact(8)) {
                *lane = mix(*lane, word(w));
            }
        }
        mix_rest(&mut h, blocks.remainder());
    }
    finish(h[1..].iter().fold(h[0], |acc, &lane| mix(acc, lane)))
}

/// Mixes the last bytes of a part, fewer than a block, into the lanes: word `i` (the
/// last one zero-padded) into lane `i`. Each lane by a constant index, so that the
/// lanes stay in registers.
#[inline]
fn mix_rest(h: &mut [u64; LANES], rest: &[u8]) {
    let word_at = |i: usize| match rest.get(8 * i..) {
        Some(r) if r.len() >= 8 => Some(word(&r[..8])),
        Some(r) if !r.is_empty() => Some(tail_word(r)),
        _ => None,
    };
    for (i, lane) in h.iter_mut().enumerate() {
        match word_at(i) {
            Some(w) => *lane = mix(*lane, w),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checksum of parts.
    type Sum = fn(&[&[u8]]) -> u32;

    /// Both versions, for the properties each must have.
    const BOTH: [(&str, Sum); 2] = [
        ("one chain", log_checksum),
        ("four lanes", log_checksum_lanes),
    ];

    /// `data` followed by the little-endian CRC-32 of `data`: a sealed payload.
    fn sealed(fill: u8) -> Vec<u8> {
        let mut b: Vec<u8> = (0..4092u32).map(|i| (i as u8) ^ fill).collect();
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn sealed_payloads_are_told_apart() {
        let (a, b) = (sealed(1), sealed(2));
        let head = [7u8; 24];
        // The weakness this checksum exists to avoid: CRC-32 of header + sealed payload
        // is the same for both payloads.
        let crc = |p: &[u8]| {
            let mut h = crc32fast::Hasher::new();
            h.update(&head);
            h.update(p);
            h.finalize()
        };
        assert_eq!(crc(&a), crc(&b));
        for (name, sum) in BOTH {
            assert_ne!(sum(&[&head, &a]), sum(&[&head, &b]), "{name}");
        }
    }

    #[test]
    fn every_byte_and_the_split_between_parts_count() {
        let data: Vec<u8> = (0..100u8).collect();
        for (name, sum) in BOTH {
            let base = sum(&[&data[..24], &data[24..]]);
            for i in 0..data.len() {
                let mut d = data.clone();
                d[i] ^= 0x10;
                assert_ne!(sum(&[&d[..24], &d[24..]]), base, "{name}: byte {i}");
            }
            assert_ne!(sum(&[&data[..23], &data[23..]]), base, "{name}");
            // A zero tail is not the same as no tail.
            assert_ne!(sum(&[&[1u8, 0]]), sum(&[&[1u8]]), "{name}");
        }
    }

    #[test]
    fn the_lanes_are_not_interchangeable() {
        // Words swapped between two lanes, or between two places in one lane, change
        // the sum: each word's chain and its position in it count.
        let words = |ws: &[u64]| ws.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let base = log_checksum_lanes(&[&words(&[1, 2, 3, 4, 5, 6, 7, 8])]);
        for swapped in [
            [2, 1, 3, 4, 5, 6, 7, 8],
            [5, 2, 3, 4, 1, 6, 7, 8],
            [1, 2, 3, 4, 6, 5, 7, 8],
        ] {
            assert_ne!(log_checksum_lanes(&[&words(&swapped)]), base, "{swapped:?}");
        }
        // Equal words in every lane (a zeroed block) still count.
        let zeros = [0u8; 64];
        assert_ne!(
            log_checksum_lanes(&[&zeros[..32]]),
            log_checksum_lanes(&[&zeros[..32], &[]])
        );
        assert_ne!(
            log_checksum_lanes(&[&zeros]),
            log_checksum_lanes(&[&zeros[..56]])
        );
    }

    #[test]
    fn known_answers_pin_both_formats() {
        // The sums are part of the logs' formats on media: a change of either value is
        // a change of format (logs written as PMREDO01 must keep verifying).
        let data: Vec<u8> = (0..100u8).collect();
        assert_eq!(log_checksum(&[&data[..24], &data[24..]]), 0x9c8f_f471);
        assert_eq!(log_checksum_lanes(&[&data[..24], &data[24..]]), 0xf915_eb57);
        assert_eq!(
            log_checksum_lanes(&[&data[..24], &data[24..61]]),
            0xa6c7_889b
        );
        assert_eq!(log_checksum_lanes(&[]), 0x2011_ba27);
    }

    #[test]
    fn the_two_versions_differ() {
        // A log is checked with the version its magic names; the other must not pass.
        let data: Vec<u8> = (0..200u8).collect();
        assert_ne!(log_checksum(&[&data]), log_checksum_lanes(&[&data]));
    }
}

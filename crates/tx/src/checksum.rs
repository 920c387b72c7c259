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

const K1: u64 = 0x9e37_79b9_7f4a_7c15;
const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;
const K3: u64 = 0x1656_67b1_9e37_79f9;

fn mix(h: u64, w: u64) -> u64 {
    ((h ^ w).wrapping_mul(K1)).rotate_left(29).wrapping_mul(K2)
}

/// The 32-bit checksum of the concatenation of `parts`, each part's length included
/// (so that moving bytes from one part to the next changes it).
pub(crate) fn log_checksum(parts: &[&[u8]]) -> u32 {
    let mut h = K3;
    for part in parts {
        h = mix(h, part.len() as u64);
        let mut words = part.chunks_exact(8);
        for w in &mut words {
            h = mix(h, u64::from_le_bytes(w.try_into().expect("8-byte chunk")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            h = mix(h, u64::from_le_bytes(last));
        }
    }
    h ^= h >> 33;
    h = h.wrapping_mul(K1);
    h ^= h >> 29;
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_ne!(log_checksum(&[&head, &a]), log_checksum(&[&head, &b]));
    }

    #[test]
    fn every_byte_and_the_split_between_parts_count() {
        let data: Vec<u8> = (0..100u8).collect();
        let base = log_checksum(&[&data[..24], &data[24..]]);
        for i in 0..data.len() {
            let mut d = data.clone();
            d[i] ^= 0x10;
            assert_ne!(log_checksum(&[&d[..24], &d[24..]]), base, "byte {i}");
        }
        assert_ne!(log_checksum(&[&data[..23], &data[23..]]), base);
        // A zero tail is not the same as no tail.
        assert_ne!(log_checksum(&[&[1u8, 0]]), log_checksum(&[&[1u8]]));
    }
}

//! What a structure holds, as the oracle compares it: a multiset of `(u64, u64)` pairs
//! (SPS: index and value; a map: key and value; a graph: its edges) summarised by
//! order-independent hashes, so that two structures holding the same pairs in any
//! layout agree, and a crash image is compared with the state after each committed
//! prefix without keeping whole copies.

/// The summary of a structure's contents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Contents {
    /// Pairs held.
    pub count: u64,
    /// Two independent order-free hashes of the pairs (128 bits together).
    pub sums: (u64, u64),
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Contents {
    /// Adds one pair.
    pub fn add(&mut self, a: u64, b: u64) {
        self.count += 1;
        let h = mix(a ^ mix(b.wrapping_add(0x632b_e59b_d9b4_e019)));
        let g = mix(b ^ mix(a.wrapping_add(0x8cb9_2ba7_2f3d_8dd7)));
        self.sums.0 = self.sums.0.wrapping_add(h);
        self.sums.1 = self.sums.1.wrapping_add(g);
    }

    /// Adds a pair whose second half is a byte string (a row's value).
    pub fn add_bytes(&mut self, a: u64, bytes: &[u8]) {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            h = mix(h ^ u64::from_le_bytes(w));
        }
        self.add(a, h ^ bytes.len() as u64);
    }
}

impl std::fmt::Display for Contents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} pairs, {:016x}{:016x}",
            self.count, self.sums.0, self.sums.1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_free_but_pair_sensitive() {
        let mut a = Contents::default();
        let mut b = Contents::default();
        a.add(1, 2);
        a.add(3, 4);
        b.add(3, 4);
        b.add(1, 2);
        assert_eq!(a, b);
        let mut c = Contents::default();
        c.add(1, 4);
        c.add(3, 2);
        assert_ne!(a, c, "swapped halves must differ");
    }
}

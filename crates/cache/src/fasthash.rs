//! A small multiplicative hasher for block addresses: the keys are already well spread
//! integers, so SipHash's DoS resistance buys nothing and costs most of a lookup.

use std::hash::{BuildHasherDefault, Hasher};

/// Hashes one `u64` by a multiply and a fold (Fibonacci hashing).
#[derive(Default, Clone, Copy)]
pub(crate) struct BlockHasher(u64);

impl Hasher for BlockHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline(always)]
    fn write_u64(&mut self, n: u64) {
        let x = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 29);
    }
}

/// Builder for [`BlockHasher`].
pub(crate) type BuildBlockHasher = BuildHasherDefault<BlockHasher>;
/// Map keyed by block address.
pub(crate) type BlockMap<V> = std::collections::HashMap<u64, V, BuildBlockHasher>;
/// Set of block addresses.
pub(crate) type BlockSet = std::collections::HashSet<u64, BuildBlockHasher>;

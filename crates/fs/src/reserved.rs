//! Data pages the service has reserved to clients, per domain, as bitsets.
//!
//! A reserved page is free in the domain's bitmap on the media (the client's batch that
//! uses it has not arrived yet) but must not be handed to anyone else. The search for
//! free pages reads the bitmap a 64-bit word at a time and needs the reserved pages in
//! the same shape: with a set of page numbers, every free-looking page cost a hash
//! lookup, and a search for a KVFS object's extent that crossed a fragmented domain cost
//! tens of thousands of them.

use rustc_hash::FxHashMap;

/// Reserved pages of every domain.
#[derive(Debug, Default)]
pub struct Reserved {
    bits: FxHashMap<u16, Vec<u64>>,
}

impl Reserved {
    /// Marks page `p` of domain `d` reserved.
    pub fn insert(&mut self, d: u16, p: u64) {
        let w = (p / 64) as usize;
        let v = self.bits.entry(d).or_default();
        if v.len() <= w {
            v.resize(w + 1, 0);
        }
        v[w] |= 1 << (p % 64);
    }

    /// Unmarks page `p` of domain `d`.
    pub fn remove(&mut self, d: u16, p: u64) {
        if let Some(w) = self
            .bits
            .get_mut(&d)
            .and_then(|v| v.get_mut((p / 64) as usize))
        {
            *w &= !(1 << (p % 64));
        }
    }

    /// Whether page `p` of domain `d` is reserved.
    pub fn contains(&self, d: u16, p: u64) -> bool {
        self.word(d, p / 64) & (1 << (p % 64)) != 0
    }

    /// Pages `64 w .. 64 w + 64` of domain `d`, one bit each (set: reserved).
    pub fn word(&self, d: u16, w: u64) -> u64 {
        self.bits
            .get(&d)
            .and_then(|v| v.get(w as usize))
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_reserved_per_domain_and_read_by_word() {
        let mut r = Reserved::default();
        r.insert(1, 3);
        r.insert(1, 64);
        r.insert(2, 3);
        assert!(r.contains(1, 3) && r.contains(1, 64) && r.contains(2, 3));
        assert!(!r.contains(1, 4) && !r.contains(3, 3) && !r.contains(1, 1 << 40));
        assert_eq!(r.word(1, 0), 1 << 3);
        assert_eq!(r.word(1, 1), 1);
        r.remove(1, 3);
        r.remove(9, 3);
        assert!(!r.contains(1, 3) && r.contains(2, 3));
        assert_eq!(r.word(1, 0), 0);
    }
}

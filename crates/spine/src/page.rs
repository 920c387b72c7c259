//! Page sizes and address-space ids: the names every layer shares for "which space" and
//! "how large a page".

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// An address-space id: one process of a trace (Kessler & Hill's PID), one address
/// space of the OS model (its page tables), one VAS, and the tag of a tagged TLB entry.
/// Sixteen bits, as the trace format stores it; x86's PCID has twelve.
pub type Asid = u16;

/// A page size that is not a power of two in 512 B ..= 1 GiB.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("page size {0} is not a power of two in 512 B ..= 1 GiB")]
pub struct BadPageSize(pub u64);

/// A page size in bytes: a power of two from 512 B to 1 GiB (4 KiB, 16 KiB and 2 MiB are
/// the usual ones). In configuration files it is written `"4KiB"`, `"16KiB"`, `"2MiB"`
/// (any size [`crate::parse_size`] reads) or as a number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageSize(u64);

impl PageSize {
    /// 4 KiB, the x86 base page.
    pub const KIB_4: PageSize = PageSize(4 << 10);
    /// 16 KiB, Kessler & Hill's page size (and ARMv8's and Apple's).
    pub const KIB_16: PageSize = PageSize(16 << 10);
    /// 2 MiB, the x86 large page.
    pub const MIB_2: PageSize = PageSize(2 << 20);

    /// A page size of `bytes`, which must be a power of two in 512 B ..= 1 GiB.
    pub fn new(bytes: u64) -> Result<Self, BadPageSize> {
        if bytes.is_power_of_two() && (512..=1 << 30).contains(&bytes) {
            Ok(PageSize(bytes))
        } else {
            Err(BadPageSize(bytes))
        }
    }

    /// The size in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }

    /// log2 of the size: the number of page-offset bits of an address.
    pub fn shift(self) -> u32 {
        self.0.trailing_zeros()
    }
}

impl std::fmt::Display for PageSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.0;
        if b >= 1 << 30 {
            write!(f, "{}GiB", b >> 30)
        } else if b >= 1 << 20 {
            write!(f, "{}MiB", b >> 20)
        } else if b >= 1 << 10 {
            write!(f, "{}KiB", b >> 10)
        } else {
            write!(f, "{b}B")
        }
    }
}

impl std::str::FromStr for PageSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        PageSize::new(crate::parse_size(s)?).map_err(|e| e.to_string())
    }
}

impl Serialize for PageSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PageSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Text {
            Bytes(u64),
            Named(String),
        }
        match Text::deserialize(d)? {
            Text::Bytes(b) => PageSize::new(b).map_err(serde::de::Error::custom),
            Text::Named(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_sizes_are_refused() {
        for p in [PageSize::KIB_4, PageSize::KIB_16, PageSize::MIB_2] {
            assert_eq!(p.to_string().parse::<PageSize>(), Ok(p));
        }
        assert_eq!(PageSize::MIB_2.to_string(), "2MiB");
        assert_eq!(PageSize::MIB_2.shift(), 21);
        assert_eq!("4096".parse::<PageSize>(), Ok(PageSize::KIB_4));
        assert!(PageSize::new(3000).is_err());
        assert!(PageSize::new(256).is_err());
        assert!(PageSize::new(2 << 30).is_err());
        assert_eq!("4K".parse::<PageSize>(), Ok(PageSize::KIB_4));
        assert!("4QB".parse::<PageSize>().is_err());
        assert!("99999999999999999999GiB".parse::<PageSize>().is_err());
    }
}

//! Page sizes and the cache geometry that defines bins.

use crate::{OsError, Pfn};
pub use pmlab_spine::PageSize;

/// A real-indexed, set-associative cache as the page mapper sees it: its bins.
///
/// A bin (section 1.1) is the run of cache sets a page frame maps to; there are
/// `B = size / (assoc * page_size)` of them and frame `pfn` is in bin `pfn mod B` (the
/// bottom bits of the frame number select the bin, Figure 1). `B` must be a power of
/// two (at least 1) because bins are selected by address bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct CacheGeometry {
    size: u64,
    assoc: u32,
    page_size: PageSize,
    bins: u32,
}

impl CacheGeometry {
    /// A cache of `size` bytes and associativity `assoc`, for pages of `page_size`.
    pub fn new(size: u64, assoc: u32, page_size: PageSize) -> Result<Self, OsError> {
        if assoc == 0 {
            return Err(OsError::OutOfRange {
                field: "associativity",
                value: 0,
                expected: ">= 1",
            });
        }
        let way = u64::from(assoc) * page_size.bytes();
        if size == 0 || (size / way) * way != size {
            return Err(OsError::NotMultiple {
                field: "cache size",
                value: size,
                unit: way,
                unit_name: "associativity x page size",
            });
        }
        let bins = size / way;
        if !bins.is_power_of_two() {
            return Err(OsError::NotPowerOfTwo {
                field: "cache bins",
                value: bins,
            });
        }
        let bins = u32::try_from(bins).map_err(|_| OsError::OutOfRange {
            field: "cache bins",
            value: bins,
            expected: "< 2^32",
        })?;
        Ok(CacheGeometry {
            size,
            assoc,
            page_size,
            bins,
        })
    }

    /// The cache size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The associativity `A`.
    pub fn assoc(&self) -> u32 {
        self.assoc
    }

    /// The page size the bins are made of.
    pub fn page_size(&self) -> PageSize {
        self.page_size
    }

    /// The number of bins `B`.
    pub fn bins(&self) -> u32 {
        self.bins
    }

    /// The cache size in pages, the paper's `N` (`= A * B`).
    pub fn pages(&self) -> u64 {
        self.size / self.page_size.bytes()
    }

    /// The bin of frame `pfn`: its bottom `log2 B` bits.
    #[inline]
    pub fn bin_of(&self, pfn: Pfn) -> u32 {
        pfn & (self.bins - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_cache_has_64_bins() {
        let g = CacheGeometry::new(1 << 20, 1, PageSize::KIB_16).unwrap();
        assert_eq!(g.bins(), 64);
        assert_eq!(g.pages(), 64);
        let g4 = CacheGeometry::new(1 << 20, 4, PageSize::KIB_16).unwrap();
        assert_eq!(g4.bins(), 16);
        assert_eq!(g4.bin_of(17), 1);
    }

    #[test]
    fn bad_geometries_are_errors() {
        assert!(CacheGeometry::new(3 << 20, 1, PageSize::KIB_16).is_err());
        assert!(CacheGeometry::new(1 << 20, 0, PageSize::KIB_16).is_err());
        assert!(CacheGeometry::new(8 << 10, 1, PageSize::KIB_16).is_err());
        assert!(PageSize::new(3000).is_err());
        assert!(PageSize::new(256).is_err());
    }
}

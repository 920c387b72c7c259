//! A trace's summary: reference counts by kind and process, address range, and the
//! footprint in distinct 4 KiB pages per address space.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use crate::{Asid, DEFAULT_BATCH, Kind, Ref, RefSource, TraceError};

/// Page size used for the footprint.
pub const FOOTPRINT_PAGE: u64 = 4096;

/// Counts and extent of a trace.
#[derive(Clone, Debug, Default)]
pub struct TraceInfo {
    /// References in total.
    pub refs: u64,
    /// References by [`Kind`], indexed by its din code.
    pub by_kind: [u64; 4],
    /// References by process id.
    pub by_asid: BTreeMap<u16, u64>,
    /// Lowest byte address referenced (`u64::MAX` when empty).
    pub min_addr: u64,
    /// Highest byte address referenced (last byte of the widest reference).
    pub max_addr: u64,
    /// Bytes referenced in total (sum of sizes).
    pub bytes: u64,
    /// Distinct (process, 4 KiB page) pairs touched, counting every page a reference spans.
    pages: HashSet<(u16, u64)>,
    /// The last page added, to skip the set for runs on one page.
    last_page: Option<(u16, u64)>,
}

impl TraceInfo {
    /// An empty summary.
    pub fn new() -> Self {
        TraceInfo {
            min_addr: u64::MAX,
            ..Default::default()
        }
    }

    /// Reads `source` to its end and summarises it.
    pub fn gather(source: &mut dyn RefSource) -> Result<Self, TraceError> {
        let mut info = TraceInfo::new();
        let mut buf = Vec::with_capacity(DEFAULT_BATCH * 4);
        while source.next_batch(&mut buf)? > 0 {
            info.add(&buf);
        }
        Ok(info)
    }

    /// Adds `refs` to the summary.
    pub fn add(&mut self, refs: &[Ref]) {
        for r in refs {
            self.refs += 1;
            self.by_kind[r.kind as usize] += 1;
            *self.by_asid.entry(r.asid).or_insert(0) += 1;
            let last = r.addr.saturating_add(r.size.max(1) as u64 - 1);
            self.min_addr = self.min_addr.min(r.addr);
            self.max_addr = self.max_addr.max(last);
            self.bytes += r.size as u64;
            for page in r.addr / FOOTPRINT_PAGE..=last / FOOTPRINT_PAGE {
                let key = (r.asid, page);
                if self.last_page != Some(key) {
                    self.pages.insert(key);
                    self.last_page = Some(key);
                }
            }
        }
    }

    /// References of kind `kind`.
    pub fn count(&self, kind: Kind) -> u64 {
        self.by_kind[kind as usize]
    }

    /// Distinct (process, 4 KiB page) pairs touched.
    pub fn pages(&self) -> u64 {
        self.pages.len() as u64
    }

    /// Distinct pages touched by process `asid`.
    pub fn pages_of(&self, asid: Asid) -> u64 {
        self.pages.iter().filter(|(p, _)| *p == asid).count() as u64
    }

    /// Footprint in bytes: distinct pages times 4 KiB.
    pub fn footprint_bytes(&self) -> u64 {
        self.pages() * FOOTPRINT_PAGE
    }
}

impl fmt::Display for TraceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "references     {}", self.refs)?;
        for kind in Kind::ALL {
            let n = self.count(kind);
            let pct = if self.refs == 0 {
                0.0
            } else {
                100.0 * n as f64 / self.refs as f64
            };
            writeln!(f, "  {:<12} {n} ({pct:.1}%)", kind.name())?;
        }
        writeln!(f, "processes      {}", self.by_asid.len())?;
        for (&asid, &n) in &self.by_asid {
            writeln!(
                f,
                "  asid {asid:<8} {n} refs, {} pages ({} KiB)",
                self.pages_of(asid),
                self.pages_of(asid) * FOOTPRINT_PAGE / 1024
            )?;
        }
        if self.refs > 0 {
            writeln!(
                f,
                "address range  0x{:x} .. 0x{:x}",
                self.min_addr, self.max_addr
            )?;
        }
        writeln!(f, "bytes accessed {}", self.bytes)?;
        write!(
            f,
            "footprint      {} distinct 4 KiB pages ({:.2} MiB)",
            self.pages(),
            self.footprint_bytes() as f64 / (1024.0 * 1024.0)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_pages_per_address_space() {
        let mut info = TraceInfo::new();
        info.add(&[
            Ref {
                addr: 0x1000,
                size: 4,
                kind: Kind::Read,
                asid: 0,
            },
            Ref {
                addr: 0x1ffe,
                size: 4,
                kind: Kind::Write,
                asid: 0,
            }, // spans two pages
            Ref {
                addr: 0x1000,
                size: 4,
                kind: Kind::Instr,
                asid: 1,
            }, // another address space
        ]);
        assert_eq!(info.refs, 3);
        assert_eq!(info.pages(), 3);
        assert_eq!(info.pages_of(0), 2);
        assert_eq!(info.count(Kind::Write), 1);
        assert_eq!((info.min_addr, info.max_addr), (0x1000, 0x2001));
        assert_eq!(info.footprint_bytes(), 3 * 4096);
    }
}

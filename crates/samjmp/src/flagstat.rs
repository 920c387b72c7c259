//! `flagstat`: samtools' counters over every record, printed exactly as
//! `samtools flagstat` (1.16) prints them.

use std::fmt::Write as _;

use crate::access::Entry;
use crate::arena::{Addressing, Arena};
use crate::error::SamError;
use crate::layout::{FlagstatCounts, Rec};
use crate::publish::Slot;

const PAIRED: u16 = 0x1;
const PROPER: u16 = 0x2;
const UNMAP: u16 = 0x4;
const MUNMAP: u16 = 0x8;
const READ1: u16 = 0x40;
const READ2: u16 = 0x80;
const SECONDARY: u16 = 0x100;
const QCFAIL: u16 = 0x200;
const DUP: u16 = 0x400;
const SUPPLEMENTARY: u16 = 0x800;

/// Adds one record, as samtools' `flagstat_loop` does.
#[inline(always)]
pub fn count(s: &mut FlagstatCounts, c: &Rec) {
    let f = c.flag;
    let w = usize::from(f & QCFAIL != 0);
    s.total[w] += 1;
    if f & SECONDARY != 0 {
        s.secondary[w] += 1;
    } else if f & SUPPLEMENTARY != 0 {
        s.supplementary[w] += 1;
    } else {
        s.primary[w] += 1;
        if f & PAIRED != 0 {
            s.paired[w] += 1;
            if f & PROPER != 0 && f & UNMAP == 0 {
                s.properly_paired[w] += 1;
            }
            if f & READ1 != 0 {
                s.read1[w] += 1;
            }
            if f & READ2 != 0 {
                s.read2[w] += 1;
            }
            if f & MUNMAP != 0 && f & UNMAP == 0 {
                s.singletons[w] += 1;
            }
            if f & UNMAP == 0 && f & MUNMAP == 0 {
                s.both_mapped[w] += 1;
                if c.mtid != c.tid {
                    s.mate_other_chr[w] += 1;
                    if c.mapq >= 5 {
                        s.mate_other_chr_q5[w] += 1;
                    }
                }
            }
        }
        if f & UNMAP == 0 {
            s.primary_mapped[w] += 1;
        }
        if f & DUP != 0 {
            s.primary_duplicates[w] += 1;
        }
    }
    if f & UNMAP == 0 {
        s.mapped[w] += 1;
    }
    if f & DUP != 0 {
        s.duplicates[w] += 1;
    }
}

/// Counts every record (following each record pointer).
pub fn counts<A: Addressing>(arena: &Arena<A>) -> Result<FlagstatCounts, SamError> {
    let mut s = FlagstatCounts::default();
    for (i, &r) in arena.records()?.iter().enumerate() {
        let entry = Entry {
            table: "records",
            i,
        };
        count(&mut s, &arena.rec(entry, r)?);
    }
    Ok(s)
}

/// Counts every record and leaves the counters in the arena.
pub fn flagstat<A: Addressing>(arena: &mut Arena<A>) -> Result<FlagstatCounts, SamError> {
    let s = counts(arena)?;
    arena.put_published(Slot::Flagstat, std::slice::from_ref(&s))?;
    Ok(s)
}

/// samtools' `percent`: a `float` quotient times 100, printed `%.2f`, or `N/A`.
fn percent(n: u64, total: u64) -> String {
    if total == 0 {
        return "N/A".into();
    }
    let q = (n as f32 / total as f32) as f64 * 100.0;
    format!("{q:.2}%")
}

/// The text `samtools flagstat` prints for these counters.
pub fn render(s: &FlagstatCounts) -> String {
    let mut o = String::new();
    let mut line = |v: [u64; 2], what: &str| {
        let _ = writeln!(o, "{} + {} {what}", v[0], v[1]);
    };
    let pct = |v: [u64; 2], of: [u64; 2]| {
        format!("({} : {})", percent(v[0], of[0]), percent(v[1], of[1]))
    };
    line(s.total, "in total (QC-passed reads + QC-failed reads)");
    line(s.primary, "primary");
    line(s.secondary, "secondary");
    line(s.supplementary, "supplementary");
    line(s.duplicates, "duplicates");
    line(s.primary_duplicates, "primary duplicates");
    line(s.mapped, &format!("mapped {}", pct(s.mapped, s.total)));
    line(
        s.primary_mapped,
        &format!("primary mapped {}", pct(s.primary_mapped, s.primary)),
    );
    line(s.paired, "paired in sequencing");
    line(s.read1, "read1");
    line(s.read2, "read2");
    line(
        s.properly_paired,
        &format!("properly paired {}", pct(s.properly_paired, s.paired)),
    );
    line(s.both_mapped, "with itself and mate mapped");
    line(
        s.singletons,
        &format!("singletons {}", pct(s.singletons, s.paired)),
    );
    line(s.mate_other_chr, "with mate mapped to a different chr");
    line(
        s.mate_other_chr_q5,
        "with mate mapped to a different chr (mapQ>=5)",
    );
    o
}

#[cfg(test)]
mod tests {
    use super::percent;

    #[test]
    fn percent_rounds_like_printf() {
        // 1/32 = 3.125% exactly: glibc's printf rounds the tie to even.
        assert_eq!(percent(1, 32), "3.12%");
        assert_eq!(percent(3, 32), "9.38%");
        assert_eq!(percent(2, 3), "66.67%");
        assert_eq!(percent(0, 0), "N/A");
    }
}

//! Dinero IV's text report: per-cache tables laid out byte for byte as `dineroIV` prints
//! them, so that scripts reading Dinero IV's output read pmlab's.

use crate::stats::{CacheStats, KindCounts, NamedStats};
use std::fmt::Write;

/// Dinero IV's `NONZERO`: a zero divisor becomes 1 so that empty columns print 0.
fn nz(x: f64) -> f64 {
    if x == 0.0 { 1.0 } else { x }
}

/// Columns in Dinero IV's order: Total, Instrn, Data, Read, Write, Misc.
fn cols(k: &KindCounts) -> [f64; 6] {
    [k.total(), k.instr, k.data(), k.read, k.write, k.misc].map(|v| v as f64)
}

fn counts_row(out: &mut String, label: &str, k: &KindCounts) {
    out.push_str(label);
    for v in cols(k) {
        let _ = write!(out, "\t{v:12.0}");
    }
    out.push('\n');
}

fn ratio_row(out: &mut String, label: &str, num: [f64; 6], den: [f64; 6]) {
    out.push_str(label);
    for (n, d) in num.iter().zip(den) {
        let _ = write!(out, "\t{:12.4}", n / nz(d));
    }
    out.push('\n');
}

/// The table Dinero IV prints for one cache (its `do1stats`), ending with a blank line.
pub fn render_cache(name: &str, s: &CacheStats, ccc: bool) -> String {
    let mut out = String::new();
    out.push_str(name);
    out.push('\n');
    out.push_str(
        " Metrics\t\t      Total\t      Instrn\t       Data\t       Read\t      Write\t       Misc\n",
    );
    out.push_str(
        " -----------------\t      ------\t      ------\t      ------\t      ------\t      ------\t      ------\n",
    );
    let fetch = cols(&s.fetches);
    counts_row(&mut out, " Demand Fetches\t", &s.fetches);
    ratio_row(&mut out, "  Fraction of total", fetch, [fetch[0]; 6]);
    out.push('\n');
    let miss = cols(&s.misses);
    counts_row(&mut out, " Demand Misses\t", &s.misses);
    ratio_row(&mut out, "  Demand miss rate", miss, fetch);
    if ccc {
        counts_row(&mut out, "   Compulsory misses", &s.compulsory);
        counts_row(&mut out, "   Capacity misses", &s.capacity);
        counts_row(&mut out, "   Conflict misses", &s.conflict);
        ratio_row(
            &mut out,
            "   Compulsory fraction",
            cols(&s.compulsory),
            miss,
        );
        ratio_row(&mut out, "   Capacity fraction", cols(&s.capacity), miss);
        ratio_row(&mut out, "   Conflict fraction", cols(&s.conflict), miss);
    }
    out.push('\n');
    let total = fetch[0];
    let from = s.bytes_from_below as f64;
    let to = s.bytes_to_below as f64;
    let _ = writeln!(
        out,
        " Multi-block refs      {:12.0}",
        s.multi_block_refs as f64
    );
    let _ = writeln!(out, " Bytes From Memory\t{from:12.0}");
    let _ = writeln!(out, " ( / Demand Fetches)\t{:12.4}", from / nz(total));
    let _ = writeln!(out, " Bytes To Memory\t{to:12.0}");
    let _ = writeln!(
        out,
        " ( / Demand Writes)\t{:12.4}",
        to / nz(s.fetches.write as f64)
    );
    let _ = writeln!(out, " Total Bytes r/w Mem\t{:12.0}", from + to);
    let _ = writeln!(
        out,
        " ( / Demand Fetches)\t{:12.4}",
        (from + to) / nz(total)
    );
    out.push('\n');
    out
}

/// Adds two caches' counters (Dinero IV's `-stat-idcombine`).
pub fn combine(a: &CacheStats, b: &CacheStats) -> CacheStats {
    let add = |x: &KindCounts, y: &KindCounts| KindCounts {
        read: x.read + y.read,
        write: x.write + y.write,
        instr: x.instr + y.instr,
        misc: x.misc + y.misc,
    };
    CacheStats {
        fetches: add(&a.fetches, &b.fetches),
        misses: add(&a.misses, &b.misses),
        compulsory: add(&a.compulsory, &b.compulsory),
        capacity: add(&a.capacity, &b.capacity),
        conflict: add(&a.conflict, &b.conflict),
        multi_block_refs: a.multi_block_refs + b.multi_block_refs,
        bytes_from_below: a.bytes_from_below + b.bytes_from_below,
        bytes_to_below: a.bytes_to_below + b.bytes_to_below,
        writebacks: a.writebacks + b.writebacks,
        flush_writebacks: a.flush_writebacks + b.flush_writebacks,
        flush_invalidations: a.flush_invalidations + b.flush_invalidations,
    }
}

/// Dinero IV's `dostats`: every cache's table, level by level; with `idcombine`, a
/// split level's two caches are reported together as `lN-I/Dcaches`.
pub fn render_all(stats: &[NamedStats], idcombine: bool) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < stats.len() {
        let s = &stats[i];
        let pair = stats.get(i + 1).filter(|t| t.level == s.level);
        match pair {
            Some(t) if idcombine => {
                let name = format!("l{}-I/Dcaches", s.level);
                out.push_str(&render_cache(
                    &name,
                    &combine(&s.stats, &t.stats),
                    s.ccc || t.ccc,
                ));
                i += 2;
            }
            _ => {
                out.push_str(&render_cache(&s.name, &s.stats, s.ccc));
                i += 1;
            }
        }
    }
    out
}

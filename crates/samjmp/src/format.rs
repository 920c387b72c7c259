//! A stored record as the SAM line `samtools view` prints.

use std::io::Write;

use crate::arena::{Addressing, Arena};
use crate::layout::Rec;

const CIGAR_OPS: &[u8; 9] = b"MIDNSHP=X";

/// htslib's `seq_nt16_table` folded with `seq_nt16_str`: what a base becomes after a
/// round trip through BAM's 4-bit encoding (case folded, unknown letters `N`).
fn nt16(b: u8) -> u8 {
    match b.to_ascii_uppercase() {
        c @ (b'=' | b'A' | b'C' | b'M' | b'G' | b'R' | b'S' | b'V' | b'T' | b'W' | b'Y' | b'H'
        | b'K' | b'D' | b'B' | b'N') => c,
        b'U' => b'T',
        _ => b'N',
    }
}

/// Appends record `c`'s SAM line (with newline) to `out`.
pub fn sam_line<A: Addressing>(arena: &Arena<A>, names: &[&[u8]], c: &Rec, out: &mut Vec<u8>) {
    let rname = |t: i32| -> &[u8] {
        if t < 0 {
            b"*"
        } else {
            names.get(t as usize).copied().unwrap_or(b"*")
        }
    };
    out.extend_from_slice(arena.name(c));
    let _ = write!(out, "\t{}\t", c.flag);
    out.extend_from_slice(rname(c.tid));
    let _ = write!(out, "\t{}\t{}\t", c.pos + 1, c.mapq);
    let cig = arena.cigar(c);
    if cig.is_empty() {
        out.push(b'*');
    }
    for &op in cig {
        let _ = write!(out, "{}", op >> 4);
        out.push(CIGAR_OPS[(op & 0xf) as usize % 9]);
    }
    out.push(b'\t');
    if c.mtid < 0 {
        out.push(b'*');
    } else if c.mtid == c.tid {
        out.push(b'=');
    } else {
        out.extend_from_slice(rname(c.mtid));
    }
    let _ = write!(out, "\t{}\t{}\t", c.mpos + 1, c.tlen);
    if c.l_seq == 0 {
        out.push(b'*');
    }
    out.extend(arena.bytes(c.seq, c.l_seq as u64).iter().map(|&b| nt16(b)));
    out.push(b'\t');
    if c.l_qual == 0 {
        out.push(b'*');
    }
    out.extend_from_slice(arena.bytes(c.qual, c.l_qual as u64));
    if c.aux_len > 0 {
        out.push(b'\t');
        out.extend_from_slice(arena.bytes(c.aux, c.aux_len as u64));
    }
    out.push(b'\n');
}

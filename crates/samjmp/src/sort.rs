//! `sort`: the orders `samtools sort` (1.16) writes, left in the arena as arrays of
//! record pointers.
//!
//! By coordinate samtools radix-sorts on (reference index, with unmapped `-1` after
//! every reference; position + 1; reverse strand), a stable sort, so ties keep input
//! order. By name (`-n`) it merge-sorts, also stable, on `strnum_cmp` of the names
//! (digit runs compared as numbers) and then on the READ1/READ2 bits.

use std::cmp::Ordering;

use crate::access::Entry;
use crate::arena::{Addressing, Arena};
use crate::crash::{Broken, broken};
use crate::error::SamError;
use crate::layout::{Rec, Ref};
use crate::publish::Slot;

/// The coordinate key of a record (`nref` stands for unmapped).
fn coord_key(c: &Rec, nref: u64) -> u128 {
    let tid = if c.tid < 0 { nref } else { c.tid as u64 };
    let pos = ((c.pos.wrapping_add(1)) as u64) << 1 | u64::from(c.flag & 0x10 != 0);
    (u128::from(tid) << 64) | u128::from(pos)
}

/// samtools' `strnum_cmp`: bytes compared as such, except that runs of digits are
/// compared as numbers (leading zeros skipped; with equal values, more leading zeros
/// sort first, from its test of the offsets reached).
pub fn strnum_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let (mut i, mut j) = (0, 0);
    let at = |s: &[u8], k: usize| s.get(k).copied().unwrap_or(0);
    let digit = |c: u8| c.is_ascii_digit();
    while i < a.len() && j < b.len() {
        if digit(a[i]) && digit(b[j]) {
            while at(a, i) == b'0' {
                i += 1;
            }
            while at(b, j) == b'0' {
                j += 1;
            }
            while digit(at(a, i)) && digit(at(b, j)) && at(a, i) == at(b, j) {
                i += 1;
                j += 1;
            }
            let (ca, cb) = (at(a, i), at(b, j));
            if digit(ca) && digit(cb) {
                let mut k = 0;
                while digit(at(a, i + k)) && digit(at(b, j + k)) {
                    k += 1;
                }
                return if digit(at(a, i + k)) {
                    Ordering::Greater
                } else if digit(at(b, j + k)) {
                    Ordering::Less
                } else {
                    ca.cmp(&cb)
                };
            } else if digit(ca) {
                return Ordering::Greater;
            } else if digit(cb) {
                return Ordering::Less;
            } else if i != j {
                // As samtools: the offsets reached (more leading zeros: first).
                return if i < j {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
            }
        } else {
            if a[i] != b[j] {
                return a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (i < a.len()).cmp(&(j < b.len()))
}

/// The order `samtools sort` gives (by name if `by_name`, else by coordinate).
pub fn sorted<A: Addressing>(arena: &Arena<A>, by_name: bool) -> Result<Vec<Ref>, SamError> {
    let records = arena.records()?;
    let entry = |i| Entry {
        table: "records",
        i,
    };
    if by_name {
        // The names and READ1/READ2 bits gathered once (pointers followed once per
        // record, not per comparison); a stable merge sort as samtools'.
        let mut keyed = Vec::with_capacity(records.len());
        for (i, &r) in records.iter().enumerate() {
            let c = arena.rec(entry(i), r)?;
            keyed.push((arena.name(&c), c.flag & 0xc0, r));
        }
        if broken(Broken::NameBytes) {
            keyed.sort_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(&b.1)));
        } else {
            keyed.sort_by(|a, b| strnum_cmp(a.0, b.0).then(a.1.cmp(&b.1)));
        }
        Ok(keyed.into_iter().map(|(_, _, r)| r).collect())
    } else {
        let nref = arena.root().n_refs;
        let mut keyed = Vec::with_capacity(records.len());
        for (i, &r) in records.iter().enumerate() {
            keyed.push((coord_key(&arena.rec(entry(i), r)?, nref), r));
        }
        if broken(Broken::UnstableSort) {
            keyed.sort_unstable_by_key(|&(k, _)| k);
        } else {
            // Stable: equal keys keep input order, as samtools' radix sort does.
            keyed.sort_by_key(|&(k, _)| k);
        }
        Ok(keyed.into_iter().map(|(_, r)| r).collect())
    }
}

/// Sorts the records and publishes the new order in the root; the previous order
/// stays valid until then. By coordinate, the records are also copied into one block
/// in the new order (see [`relocate`]).
pub fn sort<A: Addressing>(arena: &mut Arena<A>, by_name: bool) -> Result<(), SamError> {
    let order = sorted(arena, by_name)?;
    let (slot, order) = if by_name {
        (Slot::ByName, order)
    } else {
        (Slot::ByCoord, relocate(arena, &order)?)
    };
    arena.put_published(slot, &order)?;
    Ok(())
}

/// Bytes of a record's block: the `Rec`, its CIGAR and its variable parts, 8-aligned.
fn block_len(c: &Rec) -> u64 {
    let var = c.name_len as u64 + c.l_seq as u64 + c.l_qual as u64 + c.aux_len as u64;
    (std::mem::size_of::<Rec>() as u64 + 4 * c.n_cigar as u64 + var).next_multiple_of(8)
}

/// Copies the records of `order` into one new block, in that order, and returns the
/// references to the copies.
///
/// Input order is not coordinate order, so a region query that follows the order's
/// pointers to the originals touches a page per record; over the copies, the records
/// of a region lie together, as in a sorted BAM, and a query touches a few pages.
/// (`samtools sort` writes a new file for the same reason.) The originals stay: the
/// input-order table (and `sort -n`) names them. If the arena has no room for a copy,
/// the order names the originals.
pub fn relocate<A: Addressing>(arena: &mut Arena<A>, order: &[Ref]) -> Result<Vec<Ref>, SamError> {
    let entry = |i| Entry {
        table: "by_coord",
        i,
    };
    // The block's size does not depend on the order: summed in input order, which
    // reads the records front to back rather than in coordinate order's jumps.
    let mut total = 0u64;
    for (i, &r) in arena.records()?.iter().enumerate() {
        let e = Entry {
            table: "records",
            i,
        };
        total += block_len(&arena.rec(e, r)?);
    }
    let at = match arena.alloc(total, 8) {
        Ok(at) => at,
        Err(SamError::Full { .. }) => return Ok(order.to_vec()),
        Err(e) => return Err(e),
    };
    let a = arena.addressing();
    if std::env::var_os("PMLAB_SAM_NO_POPULATE").is_none() {
        populate_write(a.ptr(at), total);
    }
    let mut out = Vec::with_capacity(order.len());
    let mut next = at;
    for (i, &r) in order.iter().enumerate() {
        let c = arena.rec(entry(i), r)?;
        let mut copy = c;
        let mut p = next + std::mem::size_of::<Rec>() as u64;
        let parts: [(&mut Ref, u64); 5] = [
            (&mut copy.cigar, 4 * c.n_cigar as u64),
            (&mut copy.name, c.name_len as u64),
            (&mut copy.seq, c.l_seq as u64),
            (&mut copy.qual, c.l_qual as u64),
            (&mut copy.aux, c.aux_len as u64),
        ];
        for (field, len) in parts {
            // SAFETY: `rec` checked that the part lies inside the arena; the block
            // just allocated has room for every part of every record, apart from it.
            unsafe { std::ptr::copy_nonoverlapping(a.ptr(*field), a.ptr(p), len as usize) };
            *field = p;
            p += len;
        }
        // SAFETY: `next` is 8-aligned (blocks are multiples of 8) inside the block.
        unsafe { a.ptr(next).cast::<Rec>().write(copy) };
        out.push(next);
        next += block_len(&c);
        if i % 4096 == 4095 {
            crate::crash::point();
        }
    }
    let off = a.ptr(at) as u64 - arena.base() as u64;
    arena.persist_offsets(off, total)?;
    Ok(out)
}

/// Maps the pages of a new block writable in one system call (`MADV_POPULATE_WRITE`,
/// Linux 5.14) rather than one page fault per page as the copy first touches them; a
/// kernel without it leaves the faults to happen (the advice is only a hint here).
fn populate_write(p: *mut u8, len: u64) {
    let page = 4096u64;
    let start = (p as u64) & !(page - 1);
    let end = (p as u64 + len).next_multiple_of(page);
    // SAFETY: the range lies within the arena's read-write mapping (the block was
    // just allocated in it); populating changes no contents.
    unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            (end - start) as usize,
            libc::MADV_POPULATE_WRITE,
        )
    };
}

/// Whether two records hold the same alignment (every field and part alike).
pub fn same_record<A: Addressing>(arena: &Arena<A>, x: &Rec, y: &Rec) -> bool {
    let scalars = |c: &Rec| {
        (
            c.pos, c.end, c.mpos, c.tid, c.mtid, c.tlen, c.flag, c.mapq, c.l_seq, c.l_qual,
            c.aux_len,
        )
    };
    let parts = |c: &Rec| {
        (
            arena.name(c),
            arena.cigar(c),
            arena.bytes(c.seq, c.l_seq as u64),
            arena.bytes(c.qual, c.l_qual as u64),
            arena.bytes(c.aux, c.aux_len as u64),
        )
    };
    scalars(x) == scalars(y) && parts(x) == parts(y)
}

#[cfg(test)]
mod tests {
    use super::strnum_cmp;
    use std::cmp::Ordering::*;

    #[test]
    fn strnum_orders_digit_runs_as_numbers() {
        assert_eq!(strnum_cmp(b"r2", b"r10"), Less);
        assert_eq!(strnum_cmp(b"r10", b"r2"), Greater);
        assert_eq!(strnum_cmp(b"a", b"b"), Less);
        assert_eq!(strnum_cmp(b"r1", b"r1"), Equal);
        assert_eq!(strnum_cmp(b"r01", b"r1"), Less); // samtools: more leading zeros first
        assert_eq!(strnum_cmp(b"r1x", b"r1"), Greater);
        assert_eq!(strnum_cmp(b"r1:5", b"r1:12"), Less);
        assert_eq!(strnum_cmp(b"x9y", b"x10"), Less);
    }
}

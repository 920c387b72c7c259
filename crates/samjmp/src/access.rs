//! Reading the stored structure: records, their parts, the tables the root names.
//!
//! A segment or region file is input like any other: another process (or a damaged
//! file) may have put anything in it. So every reference, length and count read from
//! it is checked to lie inside the arena (and be aligned for its type) before it is
//! followed, and a record is copied out before its fields are checked, so that what
//! was checked is what is used. A bad one is an error naming the item (`record 12`,
//! `by_coord entry 7`, `index of reference 2`) and the field; never a fault.
//!
//! Writers hold the segment's exclusive lock and readers its shared lock, so in a
//! well-behaved registry nothing changes under a reader; byte strings handed out
//! (names, sequences) are read in place, and a hostile writer that ignores the lock can
//! make them change while read, but never make a read leave the arena.

use std::fmt::Display;

use crate::arena::{Addressing, Arena};
use crate::error::SamError;
use crate::layout::{IndexHead, MAX_END, MAX_POS, Rec, Ref, RefIndex, RefSeq};

/// Where a record reference was found: for errors.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The table (`records`, `by_coord`, `by_name`, `last_view`).
    pub table: &'static str,
    /// The position in it (0-based).
    pub i: usize,
}

impl Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.table == "records" {
            write!(f, "record {}", self.i + 1)
        } else {
            write!(f, "{} entry {}", self.table, self.i)
        }
    }
}

impl<A: Addressing> Arena<A> {
    /// An error about `item`'s `field`.
    pub fn corrupt(&self, item: impl Display, field: &'static str, problem: String) -> SamError {
        SamError::Corrupt {
            what: self.label().to_string(),
            item: item.to_string(),
            field,
            problem,
        }
    }

    /// `n` values of `T` at `r`, checked to lie inside the arena.
    pub fn table<T>(
        &self,
        item: impl Display,
        field: &'static str,
        r: Ref,
        n: u64,
    ) -> Result<&[T], SamError> {
        if n == 0 {
            return Ok(&[]);
        }
        let size = std::mem::size_of::<T>() as u64;
        let align = std::mem::align_of::<T>() as u64;
        let fits = n.checked_mul(size).filter(|&b| self.holds(r, b, align));
        if fits.is_none() {
            return Err(self.corrupt(
                item,
                field,
                format!("{n} entries of {size} bytes at {r:#x} do not lie inside it"),
            ));
        }
        // SAFETY: checked just above to lie inside the mapped arena, aligned.
        Ok(unsafe { self.slice::<T>(r, n) })
    }

    /// One `T` at `r`, checked and copied out.
    pub fn value<T: Copy>(
        &self,
        item: impl Display,
        field: &'static str,
        r: Ref,
    ) -> Result<T, SamError> {
        Ok(self.table::<T>(item, field, r, 1)?[0])
    }

    /// Checks the tables the root names (called when a structure is opened).
    pub fn check_root(&self) -> Result<(), SamError> {
        let r = *self.root();
        self.table::<Ref>("root", "records", r.records, r.n_records)?;
        self.table::<RefSeq>("root", "refs", r.refs, r.n_refs)?;
        self.table::<u8>("root", "header", r.header, r.header_len)?;
        for (field, at) in [("by_coord", r.by_coord), ("by_name", r.by_name)] {
            if at != 0 {
                self.table::<Ref>("root", field, at, r.n_records)?;
            }
        }
        if r.index != 0 {
            self.value::<IndexHead>("root", "index", r.index)?;
        }
        if r.flagstat != 0 {
            self.table::<[u64; 32]>("root", "flagstat", r.flagstat, 1)?;
        }
        self.selection()?;
        Ok(())
    }

    /// The records in input order.
    pub fn records(&self) -> Result<&[Ref], SamError> {
        let r = self.root();
        self.table("root", "records", r.records, r.n_records)
    }

    /// The record that `entry` names, copied out and checked: its parts lie inside
    /// the arena, its reference indices name references, its positions are in range.
    #[inline]
    pub fn rec(&self, entry: Entry, r: Ref) -> Result<Rec, SamError> {
        let size = std::mem::size_of::<Rec>() as u64;
        if !self.holds(r, size, 8) {
            return Err(self.corrupt(entry, "reference", format!("{r:#x} is not a record in it")));
        }
        // SAFETY: checked just above; `Rec` is plain data, copied out.
        let c = unsafe { *self.get::<Rec>(r) };
        self.check_rec(entry, &c)?;
        Ok(c)
    }

    #[inline]
    fn check_rec(&self, entry: Entry, c: &Rec) -> Result<(), SamError> {
        let parts: [(&'static str, Ref, u64, u64); 5] = [
            ("QNAME", c.name, c.name_len as u64, 1),
            ("CIGAR", c.cigar, 4 * c.n_cigar as u64, 4),
            ("SEQ", c.seq, c.l_seq as u64, 1),
            ("QUAL", c.qual, c.l_qual as u64, 1),
            ("aux", c.aux, c.aux_len as u64, 1),
        ];
        for (field, at, len, align) in parts {
            if len > 0 && !self.holds(at, len, align) {
                return Err(self.corrupt(
                    entry,
                    field,
                    format!("{len} bytes at {at:#x} do not lie inside it"),
                ));
            }
        }
        let n_refs = self.root().n_refs as i64;
        for (field, t) in [("RNAME", c.tid), ("RNEXT", c.mtid)] {
            if t < -1 || t as i64 >= n_refs {
                return Err(self.corrupt(entry, field, format!("reference index {t} of {n_refs}")));
            }
        }
        if !((-1..=MAX_POS).contains(&c.pos) && c.pos < c.end && c.end <= MAX_END) {
            return Err(self.corrupt(
                entry,
                "POS",
                format!("position {} to {} out of range", c.pos, c.end),
            ));
        }
        Ok(())
    }

    /// `len` bytes at `r` (a part of a record that [`Arena::rec`] checked).
    #[inline(always)]
    pub fn bytes(&self, r: Ref, len: u64) -> &[u8] {
        // SAFETY: (reference, length) pairs come from checked records or tables.
        unsafe { self.slice::<u8>(r, len) }
    }

    /// A checked record's QNAME.
    #[inline(always)]
    pub fn name(&self, rec: &Rec) -> &[u8] {
        self.bytes(rec.name, rec.name_len as u64)
    }

    /// A checked record's CIGAR (BAM encoding).
    pub fn cigar(&self, rec: &Rec) -> &[u32] {
        // SAFETY: `rec` was checked by `Arena::rec`: its CIGAR lies inside, aligned.
        unsafe { self.slice::<u32>(rec.cigar, rec.n_cigar as u64) }
    }

    /// The reference sequences.
    pub fn ref_seqs(&self) -> Result<&[RefSeq], SamError> {
        let r = self.root();
        self.table("root", "refs", r.refs, r.n_refs)
    }

    /// Reference names, by index.
    pub fn ref_names(&self) -> Result<Vec<&[u8]>, SamError> {
        let seqs = self.ref_seqs()?;
        let mut out = Vec::with_capacity(seqs.len());
        for (i, s) in seqs.iter().enumerate() {
            out.push(self.table::<u8>(
                format_args!("reference {i}"),
                "name",
                s.name,
                s.name_len,
            )?);
        }
        Ok(out)
    }

    /// The SAM header text.
    pub fn header_text(&self) -> Result<&[u8], SamError> {
        let r = self.root();
        self.table("root", "header", r.header, r.header_len)
    }

    /// An order left by `sort` (coordinate or name), if there is one.
    pub fn order(&self, by_name: bool) -> Result<Option<&[Ref]>, SamError> {
        let r = self.root();
        let (field, at) = if by_name {
            ("by_name", r.by_name)
        } else {
            ("by_coord", r.by_coord)
        };
        if at == 0 {
            return Ok(None);
        }
        self.table("root", field, at, r.n_records).map(Some)
    }

    /// The records the last `view` selected, if one ran.
    pub fn selection(&self) -> Result<Option<&[Ref]>, SamError> {
        let r = self.root();
        if r.last_view == 0 {
            return Ok(None);
        }
        let m: u64 = self.value("root", "last_view", r.last_view)?;
        if m > r.n_records {
            return Err(self.corrupt(
                "root",
                "last_view",
                format!("{m} records selected of {}", r.n_records),
            ));
        }
        let all = self.table::<Ref>("root", "last_view", r.last_view, 1 + m)?;
        Ok(Some(&all[1..]))
    }

    /// The index head, checked against the root.
    pub fn index_head(&self) -> Result<Option<IndexHead>, SamError> {
        let r = *self.root();
        if r.index == 0 {
            return Ok(None);
        }
        let h: IndexHead = self.value("root", "index", r.index)?;
        if h.n_refs != r.n_refs {
            return Err(self.corrupt(
                "index",
                "n_refs",
                format!("{} references, the root has {}", h.n_refs, r.n_refs),
            ));
        }
        Ok(Some(h))
    }

    /// Reference `tid`'s entry of index `h` and its windows, checked: its range lies
    /// within the records, and so does every window's start.
    pub fn ref_index(&self, h: &IndexHead, tid: usize) -> Result<(RefIndex, &[u64]), SamError> {
        let item = format_args!("index of reference {tid}").to_string();
        let all = self.table::<RefIndex>(&item, "refs", h.refs, h.n_refs)?;
        let ri = *all
            .get(tid)
            .ok_or_else(|| self.corrupt(&item, "refs", format!("{} entries", all.len())))?;
        let n = self.root().n_records;
        if ri.first > ri.end || ri.end > n {
            return Err(self.corrupt(
                &item,
                "first/end",
                format!("records {}..{} of {n}", ri.first, ri.end),
            ));
        }
        let w = self.table::<u64>(&item, "windows", ri.windows, ri.n_windows)?;
        if let Some((i, &x)) = w.iter().enumerate().find(|&(_, &x)| x > ri.end) {
            return Err(self.corrupt(
                &item,
                "windows",
                format!("window {i} starts at record {x}, past {}", ri.end),
            ));
        }
        Ok((ri, w))
    }
}

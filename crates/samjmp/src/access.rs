//! Reading the stored structure: records, their parts, the reference table.

use crate::arena::{Addressing, Arena};
use crate::layout::{Rec, Ref, RefSeq};

impl<A: Addressing> Arena<A> {
    /// The records in input order.
    pub fn records(&self) -> &[Ref] {
        let r = self.root();
        // SAFETY: `records` names `n_records` references (checked by `validate`).
        unsafe { self.slice(r.records, r.n_records) }
    }

    /// A record.
    #[inline(always)]
    pub fn rec(&self, r: Ref) -> &Rec {
        // SAFETY: record references point at `Rec`s written by the loader.
        unsafe { self.get::<Rec>(r) }
    }

    /// `len` bytes at `r`.
    #[inline(always)]
    pub fn bytes(&self, r: Ref, len: u64) -> &[u8] {
        // SAFETY: stored (reference, length) pairs name bytes in the arena.
        unsafe { self.slice::<u8>(r, len) }
    }

    /// A record's QNAME.
    #[inline(always)]
    pub fn name(&self, rec: &Rec) -> &[u8] {
        self.bytes(rec.name, rec.name_len as u64)
    }

    /// A record's CIGAR (BAM encoding).
    pub fn cigar(&self, rec: &Rec) -> &[u32] {
        // SAFETY: the loader wrote `n_cigar` operations at `cigar`.
        unsafe { self.slice::<u32>(rec.cigar, rec.n_cigar as u64) }
    }

    /// The reference sequences.
    pub fn ref_seqs(&self) -> &[RefSeq] {
        let r = self.root();
        // SAFETY: `refs` names `n_refs` entries.
        unsafe { self.slice(r.refs, r.n_refs) }
    }

    /// Reference names, by index.
    pub fn ref_names(&self) -> Vec<&[u8]> {
        self.ref_seqs()
            .iter()
            .map(|s| self.bytes(s.name, s.name_len))
            .collect()
    }

    /// The SAM header text.
    pub fn header_text(&self) -> &[u8] {
        let r = self.root();
        self.bytes(r.header, r.header_len)
    }

    /// An order left by `sort` (coordinate or name), if there is one.
    pub fn order(&self, by_name: bool) -> Option<&[Ref]> {
        let r = self.root();
        let at = if by_name { r.by_name } else { r.by_coord };
        // SAFETY: a published order names `n_records` references.
        (at != 0).then(|| unsafe { self.slice(at, r.n_records) })
    }
}

//! The in-memory structure, as it lies in a segment or a region file.
//!
//! Everything is `#[repr(C)]` and 8-byte aligned so that one layout serves both
//! versions: in a VAS segment a [`Ref`] is a real virtual address (the segment sits at
//! the same fixed address in every process), in the mmap version's region file it is a
//! byte offset from the start of the mapping. Reference 0 is null in both (offset 0
//! is the root, never pointed to).
//!
//! ```text
//! Root ──records──▶ [Ref; n] ──▶ Rec ──name──▶ bytes
//!   │                              ├─cigar─▶ [u32] (BAM encoding: len << 4 | op)
//!   │                              ├─seq, qual, aux ─▶ bytes (SAM text)
//!   ├─refs──▶ [RefSeq] ──name──▶ bytes
//!   ├─by_coord, by_name ──▶ [Ref; n]      (left by `sort`)
//!   ├─index ──▶ IndexHead ──▶ [RefIndex] ──windows──▶ [u64]   (left by `index`)
//!   ├─flagstat ──▶ FlagstatCounts          (left by `flagstat`)
//!   └─last_view ──▶ [m, Ref; m]            (left by `view`)
//! ```

/// A stored reference: an address (VAS) or an offset (mmap); 0 is null.
pub type Ref = u64;

/// First bytes of a loaded structure.
pub const MAGIC: [u8; 8] = *b"PMLSAM02";

/// The largest 0-based position a record may have (SAM's POS is at most 2^31 - 1).
pub const MAX_POS: i64 = (1 << 31) - 1;

/// The largest end position (`pos` plus the reference bases the CIGAR covers) a
/// record may have: bounds the index's window table per reference.
pub const MAX_END: i64 = 1 << 33;

/// The root, at the start of the segment or region file.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Root {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// 1 once the load finished; a structure whose load did not finish is refused.
    pub complete: u64,
    /// Bytes of the arena (segment or file).
    pub size: u64,
    /// Bytes handed out so far (bump allocation).
    pub used: u64,
    /// The SAM header text.
    pub header: Ref,
    /// Its length.
    pub header_len: u64,
    /// Reference sequences.
    pub n_refs: u64,
    /// -> `[RefSeq; n_refs]`.
    pub refs: Ref,
    /// Records.
    pub n_records: u64,
    /// -> `[Ref; n_records]` in input order.
    pub records: Ref,
    /// -> `[Ref; n_records]` in `samtools sort` order, or null.
    pub by_coord: Ref,
    /// -> `[Ref; n_records]` in `samtools sort -n` order, or null.
    pub by_name: Ref,
    /// -> [`IndexHead`], or null.
    pub index: Ref,
    /// -> [`FlagstatCounts`], or null.
    pub flagstat: Ref,
    /// -> `[u64; 1 + m]`: `m`, then the `m` records the last `view` selected (one
    /// block, published by one store, so that the count and the list never tear).
    pub last_view: Ref,
    /// Unused (zero).
    pub reserved: u64,
}

/// One reference sequence (`@SQ`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RefSeq {
    /// -> its name.
    pub name: Ref,
    /// Name length.
    pub name_len: u64,
    /// Its length (`LN`).
    pub len: u64,
}

/// One alignment record, its variable parts behind pointers.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    /// -> QNAME bytes (`*` when missing, as samtools keeps it).
    pub name: Ref,
    /// -> `[u32; n_cigar]`.
    pub cigar: Ref,
    /// -> SEQ bytes as written (empty for `*`).
    pub seq: Ref,
    /// -> QUAL bytes as written (empty for `*`).
    pub qual: Ref,
    /// -> the optional fields' SAM text (tab-separated), or empty.
    pub aux: Ref,
    /// 0-based leftmost position, -1 if none.
    pub pos: i64,
    /// `bam_endpos`: one past the last reference base covered (pos + 1 if unmapped
    /// or the CIGAR covers none), as htslib computes it for region queries.
    pub end: i64,
    /// 0-based mate position, -1 if none.
    pub mpos: i64,
    /// Reference index, -1 for `*`.
    pub tid: i32,
    /// Mate reference index, -1 for `*`.
    pub mtid: i32,
    /// TLEN.
    pub tlen: i32,
    /// QNAME length.
    pub name_len: u32,
    /// CIGAR operations.
    pub n_cigar: u32,
    /// SEQ length.
    pub l_seq: u32,
    /// QUAL length.
    pub l_qual: u32,
    /// Optional fields' length.
    pub aux_len: u32,
    /// FLAG.
    pub flag: u16,
    /// MAPQ.
    pub mapq: u8,
    /// Padding to 8 bytes.
    pub pad: [u8; 5],
}

/// Per reference: where its records are in `by_coord` and its linear index.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RefIndex {
    /// First position in `by_coord` of a record on this reference.
    pub first: u64,
    /// One past the last.
    pub end: u64,
    /// 16 kbp windows.
    pub n_windows: u64,
    /// -> `[u64; n_windows]`: the first position in `by_coord` of a record that
    /// overlaps the window or any later one (BAI's linear index, made exact).
    pub windows: Ref,
}

/// Head of the index.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IndexHead {
    /// The `by_coord` array it indexes.
    pub by_coord: Ref,
    /// References.
    pub n_refs: u64,
    /// -> `[RefIndex; n_refs]`.
    pub refs: Ref,
}

/// Log2 of the linear index's window (16 kbp, as BAI).
pub const WINDOW_SHIFT: u32 = 14;

/// `samtools flagstat`'s counters, `[QC-passed, QC-failed]` each.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FlagstatCounts {
    /// in total
    pub total: [u64; 2],
    /// primary
    pub primary: [u64; 2],
    /// secondary
    pub secondary: [u64; 2],
    /// supplementary
    pub supplementary: [u64; 2],
    /// duplicates
    pub duplicates: [u64; 2],
    /// primary duplicates
    pub primary_duplicates: [u64; 2],
    /// mapped
    pub mapped: [u64; 2],
    /// primary mapped
    pub primary_mapped: [u64; 2],
    /// paired in sequencing
    pub paired: [u64; 2],
    /// read1
    pub read1: [u64; 2],
    /// read2
    pub read2: [u64; 2],
    /// properly paired
    pub properly_paired: [u64; 2],
    /// with itself and mate mapped
    pub both_mapped: [u64; 2],
    /// singletons
    pub singletons: [u64; 2],
    /// with mate mapped to a different chr
    pub mate_other_chr: [u64; 2],
    /// with mate mapped to a different chr (mapQ>=5)
    pub mate_other_chr_q5: [u64; 2],
}

//! Memory-reference traces: the record type every simulator in pmlab consumes, and
//! readers and writers for the formats pmlab accepts.
//!
//! Readers hand out references in batches ([`RefSource::next_batch`]) so that the
//! per-reference cost of the simulators' hot loops is not dominated by dynamic dispatch.
//!
//! # Formats
//!
//! | [`Format`] | reads | writes | description |
//! |---|---|---|---|
//! | `DinExtended` (`D`) | yes | yes | Dinero IV `-informat D`: `TYPE ADDR SIZE`, TYPE `r`/`w`/`i`/`m`, hex |
//! | `DinTraditional` (`d`) | yes | no | Dinero III/IV `-informat d`: `LABEL ADDR [junk]` |
//! | `Lackey` | yes | no | valgrind `--tool=lackey --trace-mem=yes` output |
//! | `Binary` | yes | yes | pmlab's compact binary format (16-byte records) |
//!
//! The exact grammar of each, and the binary layout, are in `crates/trace/FORMAT.md`
//! (also rendered as the [`formats`] module). In brief, the binary format is a 16-byte
//! header (`PMLTRACE`, version u16 = 1, record length u16 = 16, flags u32 = 0) and then
//! 16-byte little-endian records: addr u64, size u32, asid u16, kind u8 (din code),
//! reserved u8 = 0.
//! Any input may be xz- or zstd-compressed; compression and the binary format are
//! recognised by their magic bytes, the text formats by the shape of their first line
//! ([`detect_format`]). Open a trace with [`open_trace`] (a path, `-` for standard
//! input) or [`trace_from_reader`]; write one with [`create_trace_writer`].
//!
//! Several per-process traces are merged into one multiprogrammed trace by
//! [`Interleave`]; [`TraceInfo`] summarises a trace; [`record`] captures a real
//! program's trace with valgrind lackey.

#![deny(missing_docs)]

pub mod formats {
    #![doc = include_str!("../FORMAT.md")]
}

pub use decompress::{XZ_MEMLIMIT, ZSTD_WINDOW_LOG_MAX};
pub use pmlab_spine::Asid;

mod binary;
mod decompress;
mod detect;
mod din;
mod dinfast;
mod hex;
mod info;
mod interleave;
mod lackey;
mod mapped;
mod output;
pub mod record;
mod textbuf;

pub use binary::{
    BINARY_HEADER_LEN, BINARY_MAGIC, BINARY_RECORD_LEN, BINARY_VERSION, BinaryReader, BinaryWriter,
};
pub use detect::{
    Compression, Format, detect_compression, detect_format, open_trace, trace_from_reader,
};
pub use din::{DinReader, DinWriter};
pub use info::{FOOTPRINT_PAGE, TraceInfo};
pub use interleave::{Interleave, ProcessEnd, SwitchUnit};
pub use lackey::LackeyReader;
pub use mapped::MappedBinaryReader;
pub use output::{RefSink, TraceWriter, create_trace_writer};

/// Default number of references a batch holds when the caller's buffer has no capacity.
pub const DEFAULT_BATCH: usize = 4096;

/// What a reference does, with Dinero IV's numeric codes (din format's first field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    /// A data read (din `0` / `r`).
    Read = 0,
    /// A data write (din `1` / `w`).
    Write = 1,
    /// An instruction fetch (din `2` / `i`).
    Instr = 2,
    /// A miscellaneous reference (din `3` / `m`), counted by Dinero IV under "Misc".
    Misc = 3,
}

impl Kind {
    /// All kinds, in din-code order.
    pub const ALL: [Kind; 4] = [Kind::Read, Kind::Write, Kind::Instr, Kind::Misc];

    /// The kind with din code `code` (0..=3), if any.
    pub fn from_code(code: u8) -> Option<Kind> {
        match code {
            0 => Some(Kind::Read),
            1 => Some(Kind::Write),
            2 => Some(Kind::Instr),
            3 => Some(Kind::Misc),
            _ => None,
        }
    }

    /// The extended-din access letter (`r`, `w`, `i`, `m`).
    pub fn letter(self) -> u8 {
        match self {
            Kind::Read => b'r',
            Kind::Write => b'w',
            Kind::Instr => b'i',
            Kind::Misc => b'm',
        }
    }

    /// A lower-case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Instr => "instr",
            Kind::Misc => "misc",
        }
    }
}

/// One memory reference.
///
/// Laid out as a record of the binary format (`#[repr(C)]`, fields in record order:
/// addr at 0, size at 8, asid at 12, kind at 14, one byte of padding), so that on a
/// little-endian machine validated records of a mapped trace are read in place
/// ([`MappedBinaryReader`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Ref {
    /// Byte address (virtual, unless the trace says otherwise).
    pub addr: u64,
    /// Size in bytes (at least 1).
    pub size: u32,
    /// The process (address space) that issued it; 0 for single-process traces.
    pub asid: Asid,
    /// What the reference does.
    pub kind: Kind,
}

/// A source of references, read in batches.
pub trait RefSource {
    /// Clears `buf` and fills it with up to `buf.capacity()` (at least one) next
    /// references; returns how many were read, 0 at the end of the trace.
    fn next_batch(&mut self, buf: &mut Vec<Ref>) -> Result<usize, TraceError>;

    /// The next references (up to `scratch.capacity()`, at least one; none at the end
    /// of the trace), either read into `scratch` as [`Self::next_batch`] does or, for a
    /// source that already holds them in memory in [`Ref`]'s layout, borrowed in place
    /// without a copy. The fastest way to consume a source.
    fn next_refs<'a>(&'a mut self, scratch: &'a mut Vec<Ref>) -> Result<&'a [Ref], TraceError> {
        self.next_batch(scratch)?;
        Ok(scratch)
    }
}

impl<S: RefSource + ?Sized> RefSource for Box<S> {
    fn next_batch(&mut self, buf: &mut Vec<Ref>) -> Result<usize, TraceError> {
        (**self).next_batch(buf)
    }

    fn next_refs<'a>(&'a mut self, scratch: &'a mut Vec<Ref>) -> Result<&'a [Ref], TraceError> {
        (**self).next_refs(scratch)
    }
}

/// Reads a whole source into memory (for tests and small traces).
pub fn read_all(source: &mut dyn RefSource) -> Result<Vec<Ref>, TraceError> {
    let mut all = Vec::new();
    let mut buf = Vec::with_capacity(DEFAULT_BATCH);
    while source.next_batch(&mut buf)? > 0 {
        all.extend_from_slice(&buf);
    }
    Ok(all)
}

/// A source over references already in memory.
#[derive(Clone, Debug, Default)]
pub struct VecSource {
    refs: Vec<Ref>,
    next: usize,
}

impl VecSource {
    /// A source that yields `refs` in order.
    pub fn new(refs: Vec<Ref>) -> Self {
        VecSource { refs, next: 0 }
    }
}

impl RefSource for VecSource {
    fn next_batch(&mut self, buf: &mut Vec<Ref>) -> Result<usize, TraceError> {
        buf.clear();
        let want = buf.capacity().max(1);
        let end = (self.next + want).min(self.refs.len());
        buf.extend_from_slice(&self.refs[self.next..end]);
        self.next = end;
        Ok(buf.len())
    }
}

/// A malformed or unreadable trace: what is wrong and where.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A text line that does not parse.
    #[error("{source_name}:{line}: {field}: {message}")]
    Syntax {
        /// File name, or `<stdin>`.
        source_name: String,
        /// 1-based line number.
        line: u64,
        /// The field that is wrong (e.g. "address", "access type").
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A binary record that does not decode.
    #[error("{source_name}: byte offset {offset}: {field}: {message}")]
    Binary {
        /// File name, or `<stdin>`.
        source_name: String,
        /// Byte offset of the bad record or field.
        offset: u64,
        /// The field that is wrong.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A trace whose format or compression cannot be recognised or is not supported
    /// for the requested operation.
    #[error("{source_name}: {message}")]
    Format {
        /// File name, or `<stdin>`.
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// An I/O error while reading.
    #[error("{source_name}: {error}")]
    Io {
        /// File name, or `<stdin>`.
        source_name: String,
        /// The underlying error.
        error: std::io::Error,
    },
}

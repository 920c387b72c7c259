//! Memory-reference traces: the record type every simulator in pmlab consumes, and
//! readers and writers for the formats pmlab accepts (see the `formats` documentation).
//!
//! Readers hand out references in batches ([`RefSource::next_batch`]) so that the
//! per-reference cost of the simulators' hot loops is not dominated by dynamic dispatch.

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

/// One memory reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ref {
    /// Byte address (virtual, unless the trace says otherwise).
    pub addr: u64,
    /// Size in bytes (at least 1).
    pub size: u32,
    /// What the reference does.
    pub kind: Kind,
    /// The process (address space) that issued it; 0 for single-process traces.
    pub pid: u16,
}

/// A source of references, read in batches.
pub trait RefSource {
    /// Clears `buf` and fills it with up to `buf.capacity()` (at least one) next
    /// references; returns how many were read, 0 at the end of the trace.
    fn next_batch(&mut self, buf: &mut Vec<Ref>) -> Result<usize, TraceError>;
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
    /// An I/O error while reading.
    #[error("{source_name}: {error}")]
    Io {
        /// File name, or `<stdin>`.
        source_name: String,
        /// The underlying error.
        error: std::io::Error,
    },
}

//! Errors, each with where it happened.

use std::path::PathBuf;

/// Where in an input a record lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Line of a SAM file (1-based, header lines counted).
    Line(u64),
    /// Record of a BAM file (1-based).
    Record(u64),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Line(n) => write!(f, "line {n}"),
            Place::Record(n) => write!(f, "record {n}"),
        }
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum SamError {
    /// A malformed record: its place and field.
    #[error("{}: {place}: field {field}: {problem}", file.display())]
    Record {
        /// The input.
        file: PathBuf,
        /// Line (SAM) or record number (BAM).
        place: Place,
        /// The SAM field (`QNAME`, `FLAG`, ..., `TAG`).
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A malformed header.
    #[error("{}: header: {problem}", file.display())]
    Header {
        /// The input.
        file: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A BAM file that ends early or whose compression is damaged.
    #[error("{}: truncated or damaged BAM after {records} records: {problem}", file.display())]
    Bam {
        /// The input.
        file: PathBuf,
        /// Records read before.
        records: u64,
        /// noodles' message.
        problem: String,
    },
    /// The arena has no room left.
    #[error("out of room: {wanted} bytes wanted, the arena has {size}")]
    Full {
        /// Arena bytes.
        size: u64,
        /// Bytes that would have been needed.
        wanted: u64,
    },
    /// A segment or region file that does not hold (complete) loaded alignments.
    #[error("{what}: {problem}")]
    Format {
        /// Which segment or file.
        what: String,
        /// Why it is refused.
        problem: String,
    },
    /// A structure whose contents are damaged: the item (`record 12`, `root`, ...)
    /// and its field that point outside it or hold an impossible value.
    #[error("{what}: {item}: field {field}: {problem}")]
    Corrupt {
        /// Which segment or file.
        what: String,
        /// The item.
        item: String,
        /// Its field.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// An operation needs the result of another one first.
    #[error("{0}")]
    Needs(String),
    /// A region string `samtools view` would not accept.
    #[error("region {region:?}: {problem}")]
    Region {
        /// As given.
        region: String,
        /// Why not.
        problem: String,
    },
    /// A file operation failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// The operation.
        what: &'static str,
        /// On what.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// An address-space operation failed.
    #[error(transparent)]
    Vas(#[from] pmlab_vas::VasError),
}

impl SamError {
    /// An I/O failure on `path`.
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SamError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}

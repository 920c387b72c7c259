//! The store's errors, each naming what it is about.

use pmlab_tx::TxError;
use pmlab_vas::VasError;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// The segment is not a store of this format.
    #[error("{what}: byte {offset} ({field}): {problem}")]
    BadFormat {
        /// The segment (its registry file).
        what: String,
        /// Byte offset in the segment.
        offset: u64,
        /// The field.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The structure in the segment is inconsistent (the checker's findings).
    #[error("{what}: byte {offset}: {problem}")]
    Corrupt {
        /// The segment.
        what: String,
        /// Byte offset of the offending block or field.
        offset: u64,
        /// What is wrong.
        problem: String,
    },
    /// The caller may not write the store: the kernel refused a writable mapping.
    #[error("store {store}: write access denied ({path}): this user may only read it")]
    WriteDenied {
        /// The store's name.
        store: String,
        /// The segment file.
        path: String,
    },
    /// A key or value over the limits.
    #[error("{field}: {problem}")]
    Invalid {
        /// The argument.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The heap is full.
    #[error("store {store} is full: no room for a block of {bytes} bytes")]
    Full {
        /// The store's name.
        store: String,
        /// Bytes asked for.
        bytes: u64,
    },
    /// A write was attempted through a read-only client.
    #[error("store {0}: opened read-only; open it for writing to SET")]
    ReadOnly(String),
    /// A writer died in the middle of a SET and no writer has recovered the store yet;
    /// a read-only client cannot.
    #[error(
        "store {0}: a writer died mid-update; open it for writing once (`pmlab kv recover`) before reading"
    )]
    NeedsRecovery(String),
    /// The address-space layer refused.
    #[error(transparent)]
    Vas(#[from] VasError),
    /// The transaction layer refused.
    #[error("transaction: {0}")]
    Tx(#[from] TxError),
}

impl KvError {
    /// A corruption finding at `offset` of segment `what`.
    pub fn corrupt(what: &str, offset: u64, problem: impl Into<String>) -> KvError {
        KvError::Corrupt {
            what: what.to_string(),
            offset,
            problem: problem.into(),
        }
    }
}

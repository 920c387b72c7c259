//! Errors of the transaction and allocator layer.

use pmlab_spine::{Addr, SpineError};

/// Why a log, transaction or allocator operation failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TxError {
    /// The memory refused an access.
    #[error(transparent)]
    Spine(#[from] SpineError),
    /// A persistent structure's header is not what it should be.
    #[error("{structure} at {addr:#x}: field `{field}` at byte offset {offset}: {problem}")]
    BadHeader {
        /// Which structure (`redo log`, `undo log`, `allocator`).
        structure: &'static str,
        /// Base address of the structure.
        addr: Addr,
        /// Byte offset of the field from `addr`.
        offset: u64,
        /// Field name.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The area given to a structure cannot hold it.
    #[error("{structure} at {addr:#x}: {problem}")]
    BadArea {
        /// Which structure.
        structure: &'static str,
        /// Base address requested.
        addr: Addr,
        /// What is wrong.
        problem: String,
    },
    /// The transaction's log does not fit in the log area.
    #[error("{kind} log full: {needed} bytes needed, {capacity} available")]
    LogFull {
        /// `redo` or `undo`.
        kind: &'static str,
        /// Bytes the log would need.
        needed: u64,
        /// Bytes the log area holds.
        capacity: u64,
    },
    /// No free extent of the requested size.
    #[error("allocator: no free extent of {units} units ({bytes} bytes)")]
    OutOfSpace {
        /// Units requested.
        units: u64,
        /// Bytes requested.
        bytes: u64,
    },
    /// A pointer handed to the allocator is not the start of an allocated extent.
    #[error(
        "allocator: slot {slot:#x} holds {ptr:#x}, which is not the start of an allocated extent"
    )]
    BadPointer {
        /// The slot that held the pointer.
        slot: Addr,
        /// The pointer.
        ptr: Addr,
    },
}

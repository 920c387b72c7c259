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
    /// `begin` while a transaction is running (transactions do not nest).
    #[error("a transaction is already running (transactions do not nest)")]
    InTransaction,
    /// An operation that needs a running transaction outside one.
    #[error("`{op}` outside a transaction")]
    NoTransaction {
        /// The operation (`write`, `commit`, `abort`, `declare`).
        op: &'static str,
    },
    /// The protocol was attached to memory that may have crashed and has not
    /// recovered yet.
    #[error("the protocol must recover before it runs transactions")]
    NeedsRecovery,
    /// A transactional access outside the area the protocol guards.
    #[error("{op} of {len} bytes at {addr:#x} lies outside the data area [{lo:#x}, {hi:#x})")]
    OutsideData {
        /// `write` or `read`.
        op: &'static str,
        /// First byte.
        addr: Addr,
        /// Bytes.
        len: u64,
        /// First byte of the data area.
        lo: Addr,
        /// One past its last byte.
        hi: Addr,
    },
    /// Persistent metadata that no crash of the protocol can leave: corruption.
    /// Nothing was written.
    #[error(
        "{structure} at {addr:#x}: corrupt: field `{field}` at byte offset {offset}: {problem}"
    )]
    Corrupt {
        /// Which structure.
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
}

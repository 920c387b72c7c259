//! Errors of the workloads: running them, and what their checkers find.

use pmlab_spine::Addr;
use pmlab_tx::TxError;

/// Why a workload could not be formatted, opened or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// The transaction protocol refused an operation.
    #[error(transparent)]
    Tx(#[from] TxError),
    /// The workload header is not what it should be.
    #[error("workload header at {addr:#x}: field `{field}` at byte offset {offset}: {problem}")]
    BadHeader {
        /// The header's address.
        addr: Addr,
        /// Byte offset of the field.
        offset: u64,
        /// The field.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The data area cannot hold the structure asked for.
    #[error(
        "{workload}: the data area of {have} bytes cannot hold {elements} elements: {needed} bytes are needed"
    )]
    TooSmall {
        /// The workload.
        workload: &'static str,
        /// Elements asked for.
        elements: u64,
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        have: u64,
    },
    /// A parameter that makes no sense.
    #[error("{workload}: {problem}")]
    BadParams {
        /// The workload.
        workload: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The structure's node pool is exhausted.
    #[error("{workload}: all {capacity} nodes of {node} bytes are in use")]
    Full {
        /// The workload.
        workload: &'static str,
        /// Nodes in the pool.
        capacity: u64,
        /// Bytes per node.
        node: u64,
    },
    /// The checker found the structure broken (the operation found it out first).
    #[error(transparent)]
    Broken(#[from] CheckError),
}

/// An invariant a checker found broken, with where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{workload}: at {addr:#x}: {problem}")]
pub struct CheckError {
    /// The workload.
    pub workload: &'static str,
    /// The address of the offending node, entry or field.
    pub addr: Addr,
    /// What is wrong.
    pub problem: String,
}

impl CheckError {
    /// A broken invariant of `workload` at `addr`.
    pub fn new(workload: &'static str, addr: Addr, problem: impl Into<String>) -> CheckError {
        CheckError {
            workload,
            addr,
            problem: problem.into(),
        }
    }
}

/// A read during a check failed: the structure points outside memory.
pub(crate) fn read_failed(workload: &'static str, addr: Addr, e: TxError) -> CheckError {
    CheckError::new(workload, addr, format!("cannot read: {e}"))
}

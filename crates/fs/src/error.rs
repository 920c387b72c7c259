//! Error types of the file system.

use thiserror::Error;

pub use crate::place::Location;

/// Errors of the file system library.
#[derive(Debug, Error)]
pub enum FsError {
    /// The memory substrate refused an access.
    #[error("memory: {0}")]
    Memory(#[from] pmlab_spine::SpineError),
    /// A structure on the media is damaged.
    #[error("corrupt {what} at {at}: {why}")]
    Corrupt {
        /// The structure (superblock, inode, directory page...).
        what: &'static str,
        /// Where it lies.
        at: Location,
        /// What is wrong.
        why: String,
    },
    /// The volume is not an Aerie volume of a version this code understands.
    #[error("not a pmlab Aerie volume: {0}")]
    Foreign(String),
    /// An operating-system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done (and on which path).
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A path or name is not acceptable.
    #[error("invalid name {name:?}: {why}")]
    BadName {
        /// The offending name.
        name: String,
        /// Why it is refused.
        why: &'static str,
    },
    /// A path does not exist.
    #[error("no such file or directory: {0}")]
    NotFound(String),
    /// A name already exists.
    #[error("already exists: {0}")]
    Exists(String),
    /// A path component is not a directory, or a directory was given where a file was expected.
    #[error("wrong object kind: {0}")]
    WrongKind(String),
    /// A directory to remove is not empty.
    #[error("directory not empty: {0}")]
    NotEmpty(String),
    /// Permission denied.
    #[error("permission denied: {0}")]
    Denied(String),
    /// The volume or a domain has no room left.
    #[error("no space: {0}")]
    NoSpace(String),
    /// The service rejected a batch or a request.
    #[error("service refused: {0}")]
    Refused(String),
    /// libFS's own check of an operation, the service's rules applied to its view
    /// before the operation is recorded, failed: nothing was recorded or sent.
    #[error("operation refused by libFS's check: {0}")]
    Invalid(String),
    /// The wire protocol was violated.
    #[error("protocol: {0}")]
    Protocol(String),
    /// Operations the application was told had succeeded were lost: the service
    /// refused a batch holding them, or the connection went before it applied them.
    /// Reported (like the kernel's writeback errors, EIO) by the next fsync and close of
    /// every file open at the time, and by the next sync of the mount.
    #[error("I/O error (EIO): acknowledged operations were lost: {0}")]
    Lost(String),
    /// A file handle is not open, or the operation does not fit it.
    #[error("bad handle: {0}")]
    BadHandle(String),
}

impl FsError {
    /// Wraps an I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        FsError::Io {
            what: what.into(),
            source,
        }
    }
}

/// Result type of the file system library.
pub type Result<T> = std::result::Result<T, FsError>;

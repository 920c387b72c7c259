//! Errors of the SpaceJMP API, each naming what it is about.

use std::path::PathBuf;

/// Why a SpaceJMP operation failed.
#[derive(Debug, thiserror::Error)]
pub enum VasError {
    /// No VAS, segment or handle by that name or id.
    #[error("no {kind} {name}")]
    NotFound {
        /// `VAS`, `segment`, `handle`.
        kind: &'static str,
        /// Its name or id.
        name: String,
    },
    /// The name is taken.
    #[error("{kind} {name} already exists")]
    Exists {
        /// `VAS` or `segment`.
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// The address range is taken by another segment or an existing mapping.
    #[error("address range [{base:#x}, {end:#x}) is taken by {by}")]
    AddressTaken {
        /// First byte.
        base: u64,
        /// One past the last byte.
        end: u64,
        /// What holds it.
        by: String,
    },
    /// The kernel refused: the caller may not read or write this object.
    #[error("{what}: permission denied ({path})")]
    PermissionDenied {
        /// What was attempted.
        what: String,
        /// The object's file.
        path: PathBuf,
    },
    /// A file that is not what the registry expects (another format, or corrupt).
    #[error("{path}: {location}: {problem}")]
    BadFormat {
        /// The file.
        path: PathBuf,
        /// Byte offset, line or field.
        location: String,
        /// What is wrong.
        problem: String,
    },
    /// A bad argument.
    #[error("{field}: {problem}")]
    Invalid {
        /// The argument.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// An operation refused in the current state (e.g. removing a segment a VAS lists).
    #[error("{0}")]
    Refused(String),
    /// A system call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// The call.
        op: &'static str,
        /// The object.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The model refused (out of frames, not enough VA bits, overlap).
    #[error(transparent)]
    Model(#[from] pmlab_os::vas::VasModelError),
}

impl VasError {
    /// An I/O error; `EACCES`/`EPERM` become [`VasError::PermissionDenied`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        if matches!(source.kind(), std::io::ErrorKind::PermissionDenied)
            || source.raw_os_error() == Some(libc::EPERM)
        {
            return VasError::PermissionDenied {
                what: op.to_string(),
                path,
            };
        }
        VasError::Io { op, path, source }
    }

    /// A malformed file.
    pub fn format(
        path: impl Into<PathBuf>,
        location: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        VasError::BadFormat {
            path: path.into(),
            location: location.into(),
            problem: problem.into(),
        }
    }
}

//! Errors of the native substrate: every one names the region and, for a bad header,
//! the byte offset and the field that is wrong.

use std::fmt;
use std::path::PathBuf;

/// Where a region's bytes live; used to name the region in errors and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegionSource {
    /// A file (on tmpfs, a DAX file system, or an ordinary disk) or a DAX character device.
    Path(PathBuf),
    /// An anonymous memory file created by `memfd_create` with this name.
    Memfd(String),
    /// A file descriptor handed to us (for example received over a Unix socket).
    Fd(i32),
}

impl fmt::Display for RegionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegionSource::Path(p) => write!(f, "{}", p.display()),
            RegionSource::Memfd(n) => write!(f, "memfd:{n}"),
            RegionSource::Fd(fd) => write!(f, "fd {fd}"),
        }
    }
}

/// Why a region could not be created, opened or used.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// A system call failed.
    #[error("region {source_name}: {op} failed: {error}")]
    Io {
        /// The region.
        source_name: RegionSource,
        /// What was being done (`open`, `mmap`, `ftruncate`, ...).
        op: &'static str,
        /// The operating system's error.
        #[source]
        error: std::io::Error,
    },
    /// The requested or found size cannot hold a region.
    #[error("region {source_name}: size {size} bytes is invalid: {problem}")]
    BadSize {
        /// The region.
        source_name: RegionSource,
        /// The offending size in bytes.
        size: u64,
        /// What is wrong with it.
        problem: String,
    },
    /// The header is foreign or corrupted; `offset` and `field` say where.
    #[error("region {source_name}: header field `{field}` at byte offset {offset}: {problem}")]
    Header {
        /// The region.
        source_name: RegionSource,
        /// Byte offset of the field inside the region.
        offset: u64,
        /// Name of the header field.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A persist mode was requested that this CPU or this backing cannot execute.
    #[error("region {source_name}: persist mode {mode} is not available: {problem}")]
    Unsupported {
        /// The region.
        source_name: RegionSource,
        /// The requested mode.
        mode: crate::PersistMode,
        /// Why it is not available.
        problem: String,
    },
}

impl RegionError {
    pub(crate) fn io(
        source_name: &RegionSource,
        op: &'static str,
        error: impl Into<std::io::Error>,
    ) -> Self {
        RegionError::Io {
            source_name: source_name.clone(),
            op,
            error: error.into(),
        }
    }
}

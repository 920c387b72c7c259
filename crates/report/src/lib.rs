//! Results as people and programs read them: aligned text tables, JSON and CSV files,
//! SVG plots, and the small statistics (mean, median, Student t confidence intervals)
//! that the papers report.

mod plot;
mod stats;
mod table;

pub use plot::{BarPlot, LinePlot, ScatterPlot, Series};
pub use stats::{Summary, summarize};
pub use table::Table;

use std::path::{Path, PathBuf};

/// An output file that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ReportError {
    /// The file being written.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

impl ReportError {
    pub(crate) fn new(path: &Path, message: impl ToString) -> Self {
        Self {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}

/// Writes `value` as pretty JSON to `path`, creating parent directories.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), ReportError> {
    create_parent(path)?;
    let text = serde_json::to_string_pretty(value).map_err(|e| ReportError::new(path, e))?;
    std::fs::write(path, text + "\n").map_err(|e| ReportError::new(path, e))
}

pub(crate) fn create_parent(path: &Path) -> Result<(), ReportError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| ReportError::new(dir, e))?;
    }
    Ok(())
}

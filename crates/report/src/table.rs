//! A table of strings with a title, rendered as aligned text, CSV or JSON.

use crate::{ReportError, create_parent};
use serde::Serialize;
use std::fmt;
use std::path::Path;

/// A titled table: a header row and data rows of preformatted cells.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Table {
    /// Shown above the table.
    pub title: String,
    /// Column names.
    pub header: Vec<String>,
    /// Data rows; each has as many cells as `header`.
    pub rows: Vec<Vec<String>>,
    /// Lines printed under the table (sources, caveats).
    pub notes: Vec<String>,
}

impl Table {
    /// An empty table with a title and column names.
    pub fn new(title: impl Into<String>, header: &[&str]) -> Self {
        Self {
            title: title.into(),
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Appends a row.
    ///
    /// # Panics
    /// If the row's width differs from the header's: that is a bug in the caller.
    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(
            cells.len(),
            self.header.len(),
            "row width must match header of {:?}",
            self.title
        );
        self.rows.push(cells);
    }

    /// Appends a note printed under the table.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// Writes the header and rows as CSV.
    pub fn write_csv(&self, path: &Path) -> Result<(), ReportError> {
        create_parent(path)?;
        let mut w = csv::Writer::from_path(path).map_err(|e| ReportError::new(path, e))?;
        w.write_record(&self.header)
            .map_err(|e| ReportError::new(path, e))?;
        for r in &self.rows {
            w.write_record(r).map_err(|e| ReportError::new(path, e))?;
        }
        w.flush().map_err(|e| ReportError::new(path, e))
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        writeln!(f, "{}", self.title)?;
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String]| -> fmt::Result {
            let parts: Vec<String> = cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, w))| {
                    if i == 0 {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect();
            writeln!(f, "  {}", parts.join("  ").trim_end())
        };
        line(f, &self.header)?;
        let total: usize = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
        writeln!(f, "  {}", "-".repeat(total))?;
        for r in &self.rows {
            line(f, r)?;
        }
        for n in &self.notes {
            writeln!(f, "  {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_and_csv() {
        let mut t = Table::new("T", &["name", "value"]);
        t.row(vec!["a".into(), "1.5".into()]);
        t.row(vec!["longer".into(), "10".into()]);
        let s = t.to_string();
        assert!(s.contains("  a         1.5\n"), "{s}");
        assert!(s.contains("  longer     10\n"), "{s}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x/t.csv");
        t.write_csv(&p).unwrap();
        assert_eq!(
            std::fs::read_to_string(p).unwrap(),
            "name,value\na,1.5\nlonger,10\n"
        );
    }
}

//! Configuration errors of the OS model.

/// A configuration the OS model cannot run, naming the offending field and value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OsError {
    /// A size that must be a power of two is not.
    #[error("{field}: {value} is not a power of two")]
    NotPowerOfTwo {
        /// The configuration field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// A field is outside the range the model supports.
    #[error("{field}: {value} is out of range ({expected})")]
    OutOfRange {
        /// The configuration field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What is accepted.
        expected: &'static str,
    },
    /// A size that must be a multiple of another is not.
    #[error("{field}: {value} is not a multiple of {unit} ({unit_name})")]
    NotMultiple {
        /// The configuration field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The unit it must be a multiple of.
        unit: u64,
        /// What the unit is.
        unit_name: &'static str,
    },
}

//! Errors of the machine model.

use thiserror::Error;

/// A configuration that does not parse or does not describe a buildable machine.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The TOML text does not parse or does not match the schema; the message carries
    /// the line and column `toml` reports.
    #[error("{source_name}: {message}")]
    Toml {
        /// File name (or another label for the text).
        source_name: String,
        /// What is wrong and where.
        message: String,
    },
    /// A field holds a value the machine cannot be built with.
    #[error("{source_name}: field `{field}`: {message}")]
    Field {
        /// File name, or `<config>` for a configuration built in code.
        source_name: String,
        /// Dotted path of the field, e.g. `caches[1].assoc`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

impl ConfigError {
    /// A bad field in a configuration built in code.
    pub(crate) fn field(field: &str, message: String) -> Self {
        Self::Field {
            source_name: "<config>".into(),
            field: field.into(),
            message,
        }
    }

    /// The same error, attributed to the file `name`.
    pub(crate) fn in_source(self, name: &str) -> Self {
        match self {
            Self::Field { field, message, .. } => Self::Field {
                source_name: name.into(),
                field,
                message,
            },
            Self::Toml { message, .. } => Self::Toml {
                source_name: name.into(),
                message,
            },
        }
    }
}

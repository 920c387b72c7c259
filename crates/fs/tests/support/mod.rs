//! Helpers shared by the file system's integration tests.

pub mod child;

//! Helpers shared by the file system's integration tests.

#![allow(dead_code)]

pub mod child;
pub mod raw;
pub mod users;

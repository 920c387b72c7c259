//! Helpers shared by the file system's integration tests (child processes come from
//! `pmlab_testkit::child`).

#![allow(dead_code)]

pub mod raw;
pub mod shm;
pub mod users;

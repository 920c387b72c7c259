//! Write-ahead logging: the memory log of Eager Commit (block groups, both readings of
//! a "block"), its writer, its recovery, and S-WAL, the software protocol that writes
//! it through the caches.

pub mod format;
pub mod recovery;
pub mod swal;
pub mod writer;

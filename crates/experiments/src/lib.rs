//! Paper reproductions. Each module builds a paper's workloads and configurations, runs
//! them on pmlab's substrates, and lays the results beside the paper's own figures.

pub mod aerie;
pub mod kessler_hill;
pub mod loc;
pub mod osp;
pub mod spacejmp;

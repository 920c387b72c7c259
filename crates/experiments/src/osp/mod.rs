//! Paper 000, OSP (Ni, Zhao, Bittman, Miller, "Reducing NVM Writes with Optimized
//! Shadow Paging"): CPU flushes of optimized shadow paging against a hardware undo log
//! on the paper's seven workloads (Figure 4a), OSP's flushes by source (Figure 4b),
//! TLB miss ratios (Table 1), crash exploration of both protocols and their broken
//! variants, and the paper's future work (asynchronous consolidation).

pub mod crash;
pub mod harness;
pub mod paper;

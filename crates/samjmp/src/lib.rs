//! pmlab-samjmp: SpaceJMP's SAMtools case study (paper 002, §5.4).
//!
//! Alignments (SAM or BAM, read through noodles) are loaded once into a pointer-rich
//! structure ([`layout`]) kept in a segment of a persistent virtual address space;
//! `flagstat`, `sort` (by coordinate and by name), `index` and `view REGION` then run
//! as separate processes that switch into the VAS, work on the structure in place and
//! leave their results there for the next process: no serialization. The same code,
//! built over offsets instead of pointers ([`arena::Offsets`]), is the paper's `mmap`
//! version over a region file (Figure 12). Orders and counts are those of samtools
//! 1.16, and the tests check them against the real `samtools`.
//!
//! [`generate`] makes a seeded data set (xoshiro256++) of realistic paired reads.

pub mod access;
pub mod arena;
pub mod check;
pub mod crash;
mod error;
pub mod flagstat;
pub mod format;
pub mod generate;
pub mod index;
pub mod ingest;
pub mod layout;
pub mod ops;
pub mod publish;
pub mod sort;
pub mod store;

pub use error::{Place, SamError};

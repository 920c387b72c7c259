//! pmlab-workloads: the transactional workloads of papers 000 (OSP) and 001 (LOC),
//! written once against the durable-transaction interface ([`pmlab_tx::Protocol`]), so
//! that every protocol — pmlab-tx's software logs today, the machine model's hardware
//! protocols next — runs the same code.
//!
//! | workload | paper | what one transaction does |
//! |---|---|---|
//! | [`Kind::Sps`] | 000, 001 | swaps two random entries of an array of 8-byte integers |
//! | [`Kind::HashTable`] | 000, 001 | inserts or deletes one 8-byte key (and value) in a chained hash table |
//! | [`Kind::RbTree`] | 000, 001 | inserts or deletes one key in a red-black tree |
//! | [`Kind::BTree`] | 000 | inserts or deletes one key in a B-tree (keys and values in every node) |
//! | [`Kind::BpTree`] | 001 | several inserts/deletes in a B+-tree of 4 KiB nodes of 200 (8-byte key, 4-byte value) pairs |
//! | [`Kind::Sdg`] | 001 | inserts or deletes one edge of a large undirected graph (adjacency lists) |
//! | [`Kind::Db`] | 001 | several row inserts/updates/deletes in a table kept in a B+-tree of 4 KiB pages (standing in for SQLite) |
//!
//! Each structure lives in a data area that starts with a [`header`] (magic, name,
//! the element count it was made for) and allocates its nodes from a transactional
//! node pool ([`slab`]). Each has a checker ([`Workload::check`]) of its invariants —
//! order, balance, links, counts, and that every node is either in use or free, once
//! — which returns a summary of what it holds ([`Contents`]) for the crash oracle.
//!
//! Operations pick elements uniformly or by Zipf with YCSB's θ = 0.99 ([`keys`]); every
//! random choice comes from xoshiro256++ (`rand_xoshiro::Xoshiro256PlusPlus`) seeded
//! from the run's seed ([`Ops`]). The map workloads toggle: a key present is deleted,
//! a key absent is inserted, over a key space of twice the elements, half of which
//! (the even ranks) are inserted when the structure is made — so the structure stays
//! near its size.
//!
//! ```
//! use pmlab_spine::VecMemory;
//! use pmlab_tx::{Area, RedoProtocol};
//! use pmlab_workloads::{Dist, Kind, Ops, Params, Workload};
//!
//! let params = Params { elements: 100, dist: Dist::Zipf, ops_per_tx: 1 };
//! let need = Workload::footprint(Kind::RbTree, &params);
//! let (log, data) = (Area::new(0, 64 * 1024), Area::new(64 * 1024, need));
//! let mut p = RedoProtocol::format(VecMemory::new((data.end()) as usize), log, data)?;
//! let mut w = Workload::format(&mut p, Kind::RbTree, &params, data)?;
//! let mut ops = Ops::new(7, &w, &params);
//! for _ in 0..50 {
//!     w.run_tx(&mut p, &mut ops)?; // one insert or delete, one transaction
//! }
//! let contents = w.check(&mut p)?; // red-black rules, order, links, no leak
//! assert!(contents.count > 50);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod bplus;
mod bptree;
mod btree;
mod contents;
mod db;
mod error;
mod hashtable;
pub mod header;
pub mod keys;
mod map;
mod rbtree;
mod sdg;
pub mod slab;
mod sps;
mod workload;

pub use bplus::NodeReads;
pub use contents::Contents;
pub use error::{CheckError, WorkloadError};
pub use keys::{Dist, Picker, ZIPF_THETA, key_of};
pub use workload::{Kind, Ops, Params, Workload};

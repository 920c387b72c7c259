//! pmlab-tx: software durable transactions and a crash-consistent persistent
//! allocator, written once against the spine ([`pmlab_spine::Memory`]) so that they
//! run counted and crash-tested on the machine model and timed on native regions.
//!
//! - [`RedoLog`] / [`RedoTx`]: buffered writes, one checksummed log persist, then
//!   in-place apply: **2 fences** per transaction.
//! - [`UndoLog`] / [`UndoTx`]: PMDK-style undo logging: **k + 2 fences** for k
//!   snapshotted ranges (3 for PMDK's small transaction).
//! - [`Allocator`]: units with two state bits each and a one-line intent record; an
//!   allocation and the pointer slot that owns it change atomically (3 fences) — or,
//!   inside a transaction ([`Allocator::alloc_in`], [`Allocator::free_in`], through
//!   [`TxMemory`]), atomically with everything else the transaction writes.
//! - [`crashtest`]: a memory with honest per-line durability that enumerates crash
//!   images at every persist point; each structure has a checker, and the tests hold
//!   every image against an oracle. [`Protocol`] carries the deliberately broken
//!   variants those tests must catch.
//!
//! ```
//! use pmlab_spine::{Memory, VecMemory};
//! use pmlab_tx::{Allocator, RedoLog};
//!
//! let mut mem = VecMemory::new(64 * 1024);
//! let mut log = RedoLog::format(&mut mem, 0, 4096)?;
//! let mut heap = Allocator::format(&mut mem, 8192, 32 * 1024, 64)?;
//! let root = 4096; // a persistent slot that owns the new object
//!
//! let mut tx = log.begin(&mut mem);
//! let obj = heap.alloc_in(&mut tx, 24, root)?;
//! tx.write_u64(obj, 7)?;
//! tx.commit()?; // 2 fences, whatever the transaction wrote
//! let ptr = mem.read_u64(root)?;
//! assert_eq!(mem.read_u64(ptr)?, 7);
//!
//! // After a crash: reopen both; recovery replays or discards the last transaction.
//! let (_log, _) = RedoLog::open(&mut mem, 0, 4096)?;
//! let (_heap, _) = Allocator::open(&mut mem, 8192)?;
//! Allocator::check(&mut mem, 8192, &[root])?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! These are the software baselines the hardware protocols of the machine model are
//! compared with.

mod alloc;
mod checksum;
mod codec;
pub mod crashtest;
mod error;
mod lines;
mod protocol;
mod redo;
mod txmem;
mod undo;

pub use alloc::{
    ALLOC_MAGIC, AllocCheckError, AllocReport, Allocator, Intent, UnitState, decode_intent,
    encode_intent,
};
pub use error::TxError;
pub use protocol::{Fault, Protocol};
pub use redo::{
    REDO_HEADER, REDO_MAGIC, RedoDecodeError, RedoImage, RedoLog, RedoRecord, RedoRecovery, RedoTx,
    decode_redo, decode_redo_with, encode_redo, redo_body_len, redo_record_len,
};
pub use txmem::TxMemory;
pub use undo::{
    UNDO_HEADER, UNDO_MAGIC, UndoDecodeError, UndoLog, UndoRecord, UndoRecovery, UndoTx,
    decode_undo, encode_undo, undo_record_len,
};

//! pmlab-tx: the durable-transaction interface, pmlab's software transaction protocols
//! and a crash-consistent persistent allocator, written once against the spine
//! ([`pmlab_spine::Memory`]) so that they run counted and crash-tested on the machine
//! model and timed on native regions.
//!
//! - [`Protocol`]: the interface every transaction protocol implements — `begin`,
//!   transactional `read`/`write`, `commit` (returning a [`TxId`]), `abort`, `recover`,
//!   plus `flush`/`durable` for protocols that acknowledge durability later than commit
//!   (LOC). The software protocols here implement it; the hardware protocols of the
//!   machine model will (see [`protocol`] for where they plug in). [`conformance`]
//!   checks the contract for any implementation.
//! - [`RedoProtocol`]: pmlab's software write-ahead (redo) log behind the interface:
//!   buffered writes, one checksummed log persist, then in-place apply: **2 fences**
//!   per transaction, none for an abort.
//! - [`UndoProtocol`]: PMDK-style undo logging behind the interface: **k + 2 fences**
//!   for k snapshot steps (3 for a transaction that declares its ranges up front).
//! - [`RedoLog`] / [`RedoTx`], [`UndoLog`] / [`UndoTx`]: the logs themselves, for
//!   callers that hold a memory and commit records directly (the file system's service
//!   commits its metadata through [`RedoLog`]).
//! - [`Allocator`]: units with two state bits each and a one-line intent record; an
//!   allocation and the pointer slot that owns it change atomically (3 fences) — or,
//!   inside a transaction ([`Allocator::alloc_in`], [`Allocator::free_in`], through
//!   [`TxMemory`]), atomically with everything else the transaction writes.
//! - [`PoolLayout`]: a pool's header, log area and data area in one memory.
//! - [`FaultPlan`] / [`Fault`]: the deliberately broken variants the crash tests (on the
//!   machine model's explorer, `pmlab_model::Recording`) must catch.
//!
//! ```
//! use pmlab_spine::VecMemory;
//! use pmlab_tx::{Area, Protocol, RedoProtocol};
//!
//! let (log, data) = (Area::new(0, 4096), Area::new(4096, 4096));
//! let mut p = RedoProtocol::format(VecMemory::new(8192), log, data)?;
//! p.begin()?;
//! p.write_u64(4096, 7)?;
//! assert_eq!(p.read_u64(4096)?, 7); // the transaction sees its own write
//! let id = p.commit()?; // 2 fences: log, then in place
//! assert_eq!((id, p.durable()), (1, 1)); // synchronous: durable on return
//!
//! // After a crash (here: a clean stop), attach again and recover.
//! let mut p = RedoProtocol::attach(p.into_memory(), log, data)?;
//! p.recover()?;
//! assert_eq!(p.read_u64(4096)?, 7);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The allocator inside a transaction of the logs' own API:
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
pub mod conformance;
mod error;
mod fault;
mod lines;
mod logset;
mod pool;
pub mod protocol;
mod ranges;
mod redo;
mod redo_protocol;
mod txmem;
mod undo;
mod undo_protocol;

pub use alloc::{
    ALLOC_MAGIC, AllocCheckError, AllocReport, Allocator, Intent, UnitState, decode_intent,
    encode_intent,
};
pub use error::TxError;
pub use fault::{Fault, FaultPlan};
pub use pool::{POOL_HEADER, POOL_MAGIC, POOL_VERSION, PoolLayout};
pub use protocol::{Area, Protocol, Recovery, TxId, TxStats};
pub use redo::{
    REDO_HEADER, REDO_MAGIC, REDO_MAGIC_V1, RedoDecodeError, RedoImage, RedoLog, RedoRecord,
    RedoRecovery, RedoTx, decode_redo, decode_redo_with, encode_redo, is_redo_magic, redo_body_len,
    redo_record_len,
};
pub use redo_protocol::RedoProtocol;
pub use txmem::{Batch, Staged, TxMemory};
pub use undo::{
    UNDO_HEADER, UNDO_MAGIC, UndoDecodeError, UndoLog, UndoRecord, UndoRecovery, UndoTx,
    decode_undo, encode_undo, undo_record_len,
};
pub use undo_protocol::UndoProtocol;

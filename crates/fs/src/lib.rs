//! Aerie: a file system for storage-class memory built as a user-mode library (libFS)
//! over memory the client maps directly, and a small trusted service (TFS) that
//! validates and applies the metadata journals clients ship to it (Volos et al.,
//! "Storage-Class Memory Needs Flexible Interfaces").
//!
//! Layers, bottom to top:
//! - [`media`], [`layout`], [`inode`], [`dir`], [`radix`], [`domain`]: the on-media
//!   structures, written against the spine's `Memory` so they run on the machine model
//!   too;
//! - [`txn`], [`redo`], [`apply`]: the service's transactions — a pure function from
//!   (metadata, batch, client rights) to page images, committed through a redo log;
//! - [`journal`]: the records libFS ships;
//! - [`fsck`], [`mkfs`]: building and checking volumes.

pub mod apply;
pub mod client;
pub mod dir;
pub mod domain;
pub mod error;
pub mod fsck;
pub mod inode;
pub mod journal;
pub mod kvfs;
pub mod layout;
pub mod lease;
pub mod map;
pub mod media;
pub mod mkfs;
pub mod overlay;
pub mod proto;
pub mod pxfs;
pub mod radix;
pub mod redo;
pub mod service;
pub mod txn;
pub mod view;
pub mod volume;

pub use error::{FsError, Result};

//! Aerie: a file system for storage-class memory built as a user-mode library (libFS)
//! over memory the client maps directly, and a small trusted service (TFS) that
//! validates and applies the metadata journals clients ship to it (Volos et al.,
//! "Storage-Class Memory Needs Flexible Interfaces").
//!
//! Layers, bottom to top:
//! - [`media`], [`layout`], [`inode`], [`dir`], [`radix`], [`domain`]: the on-media
//!   structures (checksummed pages; superblock, domain table, bitmaps, inode table,
//!   directories as hash tables, files as radix trees of pages), written against the
//!   spine's `Memory` so they run on the machine model too;
//! - [`view`], [`txn`], [`redo`], [`apply`]: the service's transactions — a pure function
//!   from (metadata, batch, client rights) to sealed page images, committed through
//!   pmlab-tx's redo log laid over the volume's log pages (2 fences per commit);
//! - [`journal`]: the checksummed records libFS ships;
//! - [`mkfs`], [`fsck`]: building and checking volumes;
//! - [`map`], [`volume`]: volumes on this machine (a directory holding the metadata
//!   space and one data space per permission domain) and their mappings;
//! - [`proto`], [`lease`], [`service`]: the trusted service over a Unix socket;
//! - [`client`], [`overlay`], [`guard`]: libFS; [`pxfs`] and [`kvfs`]: the two interfaces.
//!
//! Its checking and benchmark drivers (kill stress, the crash test on the machine model,
//! Table 2's operations) live beside it, in `pmlab-fscheck`.
//!
//! Protection comes from the kernel: clients receive the metadata space as a read-only
//! descriptor and each domain's data space read-only or read-write as its permission
//! bits allow (a client that may only write a domain gets no mapping and writes through
//! the service), so a client holds no writable mapping of anything it may not write,
//! and no readable one of data it may not read. The service runs under a uid of its
//! own, the only one that can open the volume's files.

pub mod apply;
pub mod cache;
pub mod client;
pub mod dir;
pub mod domain;
pub mod error;
pub mod fsck;
pub mod guard;
pub mod inode;
pub mod journal;
pub mod kvfs;
pub mod layout;
pub mod lease;
pub mod map;
pub mod media;
pub mod mkfs;
pub mod overlay;
pub mod pagebuf;
pub mod place;
pub mod pool;
pub mod proto;
pub mod pxfs;
pub mod radix;
pub mod redo;
pub mod reserved;
pub mod service;
pub mod txn;
pub mod view;
pub mod volume;

pub use error::{FsError, Result};

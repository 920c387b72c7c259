//! pmlab-kvjmp: Redis_JMP (SpaceJMP, El Hajj et al., ASPLOS 2016, §5.3) — a key-value
//! store with no server process. Its whole state — Redis's dict (two hash tables with
//! incremental rehashing), the string values and the allocator — lives in one lockable
//! segment of `pmlab-vas`. Client processes attach the store's address spaces
//! (read-only for GETs, read-write for SETs when the kernel lets them), switch in,
//! execute the command themselves with a small private scratch heap, and switch home.
//!
//! Beyond the paper, the store is durable and survives killed clients: every SET is one
//! redo-logged transaction of `pmlab-tx` in the segment, and a writer SIGKILLed while
//! holding the exclusive lock leaves a lock the next client takes over (pmlab-vas's
//! locks are robust) and a log the next writer replays. [`check`] is its checker.
//!
//! ```no_run
//! use pmlab_kvjmp::KvStore;
//! use pmlab_vas::Mode;
//!
//! # fn main() -> Result<(), pmlab_kvjmp::KvError> {
//! let dir = std::path::Path::new("/dev/shm/my-registry");
//! let mut w = KvStore::create(dir, "cache", 64 << 20, Mode(0o644), 1)?;
//! w.set(b"key:1", b"xxxx")?; // switch in (exclusive), one transaction, switch home
//! drop(w);
//! let mut r = KvStore::open(dir, "cache", false)?; // found again by name
//! assert_eq!(r.get(b"key:1")?, Some(b"xxxx".to_vec())); // shared lock
//! # Ok(()) }
//! ```

pub mod bench;
pub mod check;
pub mod dict;
mod error;
pub mod heap;
pub mod layout;
pub mod persist;
pub mod recover;
pub mod resp;
pub mod scratch;
pub mod segmem;
pub mod store;
pub mod stress;
pub mod view;

pub use error::KvError;
pub use persist::Persist;
pub use store::{Faults, KvStore};

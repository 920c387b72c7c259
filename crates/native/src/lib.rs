//! pmlab-native: the native substrate — storage-class memory regions on this machine.
//!
//! A region is a file (on tmpfs, a DAX file system or an ordinary disk), a memfd, or a
//! device-DAX character device, mapped shared into the address space. Its first page
//! holds a checksummed [`Header`] (magic, layout version, sizes); opening validates it
//! and refuses a foreign or corrupted region with an error naming the byte offset and
//! field. The data area behind it is reached through [`pmlab_spine::Memory`] (so the
//! code written for the machine model runs here unchanged) or through slices for fast
//! paths.
//!
//! Persistence uses the best instruction CPUID reports ([`CpuPersistFeatures`]):
//! `clwb`, else `clflushopt`, else `clflush`, each ordered by `sfence`; for files on an
//! ordinary file system, `msync`. Flushed lines and fences are counted.
//!
//! [`scm_model`] makes this machine's DRAM write like the PCM of Aerie's evaluation
//! (150 ns after each written-back line, 4 GB/s), process-wide and off by default.
//!
//! ```
//! use pmlab_native::{ReadOnlyRegion, Region};
//! use pmlab_spine::Memory;
//!
//! let mut region = Region::create_memfd("example", 1 << 20)?; // or create_file / open
//! region.write_u64(0, 42)?;
//! region.persist(0, 8)?; // clwb (or clflushopt/clflush/msync) + sfence
//! println!("{} via {}", region.medium().name(), region.persist_mode());
//!
//! // A client gets a read-only descriptor and maps it PROT_READ.
//! region.seal_future_writes()?;
//! let client = ReadOnlyRegion::from_fd(region.read_only_fd()?)?;
//! assert_eq!(client.read_u64(0)?, 42);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Aerie (paper 004) reduces the kernel to "multiplexing physical memory via the SCM
//! manager": here the kernel's mmap is that manager, a region is the unit it hands out,
//! and [`ReadOnlyRegion`] is how a file-system client is given data it may read but not
//! write.

mod error;
mod header;
mod mapped_range;
mod mapping;
mod persist;
mod region;
pub mod scm_model;
mod stream;

pub use error::{RegionError, RegionSource};
pub use header::{DATA_OFFSET, HEADER_LEN, Header, LAYOUT_VERSION, MAGIC, MIN_REGION_SIZE};
pub use mapped_range::MappedRange;
pub use mapping::Medium;
pub use persist::{CpuPersistFeatures, PersistMode};
pub use region::{ReadOnlyRegion, Region, RegionInfo, default_persist_mode};
pub use stream::stream_available;

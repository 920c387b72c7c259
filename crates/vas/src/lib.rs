//! pmlab-vas: SpaceJMP (El Hajj et al., ASPLOS 2016) — virtual address spaces and
//! lockable segments as first-class objects, with one API ([`SpaceJmp`], Figure 3) and
//! two backends:
//!
//! * [`native::NativeSpaces`]: real software on Linux. Segments are files in a
//!   registry directory mapped at fixed, globally unique addresses; VASes are registry
//!   entries listing segments; locks are robust process-shared reader-writer locks;
//!   permissions are the kernel's; `vas_switch` uses protection keys where the CPU has
//!   them and `mprotect` otherwise.
//! * [`model::ModelSpaces`]: the machine model, where each attached VAS has its own
//!   radix page table (`pmlab_os::vas`), a switch is a system call and a CR3 load with
//!   or without a TLB tag, and every page-table entry written is counted.
//!
//! [`brand`] enforces §3.3's pointer-safety rules with Rust's types (and at run time in
//! its checked mode).
//!
//! ```no_run
//! use pmlab_vas::{Access, AttachTo, Mode, SpaceJmp, native::NativeSpaces};
//!
//! # fn main() -> Result<(), pmlab_vas::VasError> {
//! // Figure 4 of the paper.
//! let mut s = NativeSpaces::open(std::path::Path::new("/dev/shm/my-registry"))?;
//! let vid = s.vas_create("v0", Mode(0o660))?;
//! let sid = s.seg_alloc("s0", None, 1 << 20, Mode(0o660))?;
//! s.seg_attach(AttachTo::Vas(vid), sid, Access::ReadWrite)?;
//! let vid = s.vas_find("v0")?;
//! let vh = s.vas_attach(vid)?;
//! s.vas_switch(vh)?; // takes s0's lock exclusively
//! let p = s.segment_base(sid).unwrap().cast::<u64>();
//! unsafe { *p = 42 };
//! s.vas_switch_home()?; // releases it
//! # Ok(()) }
//! ```

pub mod api;
pub mod brand;
mod error;
pub mod model;
pub mod native;

pub use api::{
    Access, AttachTo, Mode, SegCtl, SegId, SegInfo, SpaceJmp, SwitchReport, VasCtl, VasHandle,
    VasId, VasInfo, check_name,
};
pub use error::VasError;

//! Checking and benchmark drivers of the Aerie file system (`pmlab-fs`), kept beside it
//! so that the file system itself depends only on the spine, the native substrate and
//! pmlab-tx:
//!
//! - [`stress`]: `pmlab fs stress`, SIGKILL of the service and its clients at random
//!   moments, recovery, fsck, and an fsync oracle after every kill;
//! - [`crashtest`]: `pmlab fs crashtest`, the service's validate-apply-commit path run on
//!   the machine model and explored crash point by crash point against an oracle;
//! - [`bench`](mod@bench): `pmlab fs bench` and the reproduction's Table 2, one file interface over
//!   PXFS and a kernel directory.

pub mod bench;
pub mod crashtest;
pub mod stress;

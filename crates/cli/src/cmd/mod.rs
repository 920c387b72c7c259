//! One module per subcommand; each exposes `Args` (clap) and `run`.

pub mod bench;
pub mod dinero;
pub mod fs;
pub mod kv;
pub mod kv_bench;
pub mod kv_stress;
pub mod placement;
pub mod reproduce;
pub mod sam;
pub mod sam_bench;
pub mod scm;
pub mod trace;
pub mod tx;
pub mod vas;
pub mod vas_stress;

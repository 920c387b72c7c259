//! pmlab-testkit: what the test suites share (a dev-dependency only, never part of a
//! program):
//!
//! - [`child`]: child processes of a test without a test entry of their own;
//! - [`alloc`]: a counting global allocator, so that a fuzz test can bound the memory a
//!   reader of hostile input allocates;
//! - [`fuzz_config`]: the proptest configuration of the fuzz suites, whose case count
//!   the `PROPTEST_CASES` environment variable sets (CI runs the default; the long mode
//!   the README names runs 100,000 per reader). Inputs are drawn by proptest's ChaCha
//!   generator from a fixed seed, so a run is repeatable; `PMLAB_FUZZ_SEED` changes it.

pub mod alloc;
pub mod child;

use proptest::test_runner::{Config, RngSeed};

/// Cases per property when `PROPTEST_CASES` is not set.
pub const DEFAULT_CASES: u32 = 256;
/// The seed of the fuzz suites' inputs when `PMLAB_FUZZ_SEED` is not set.
pub const DEFAULT_SEED: u64 = 0x5eed;

fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The fuzz suites' proptest configuration: `PROPTEST_CASES` cases (default
/// [`DEFAULT_CASES`]) drawn from the fixed seed `PMLAB_FUZZ_SEED` (default
/// [`DEFAULT_SEED`]), and no failure files written into the source tree (a failing
/// case's input is printed instead).
pub fn fuzz_config() -> Config {
    Config {
        cases: env_number("PROPTEST_CASES").unwrap_or(DEFAULT_CASES),
        rng_seed: RngSeed::Fixed(env_number("PMLAB_FUZZ_SEED").unwrap_or(DEFAULT_SEED)),
        failure_persistence: None,
        ..Config::default()
    }
}

//! Child processes of a test, without a test entry of their own: a test re-executes its
//! own binary, running only itself (`--exact NAME`) with a role in the environment, and
//! its first statement, [`branch`], sends the child down the role's path and exits. The
//! harness reports one entry per real check; a child that fails panics, and its exit
//! status (101) tells the parent.

use std::process::Command;

/// The environment variable that carries a child's role.
const ROLE_ENV: &str = "PMLAB_TEST_CHILD_ROLE";

/// In a child started by [`command`], runs `body` with the role and exits (status 0, or
/// the panic's 101); in the parent, returns at once.
pub fn branch(body: impl FnOnce(&str)) {
    if let Ok(role) = std::env::var(ROLE_ENV) {
        body(&role);
        std::process::exit(0);
    }
}

/// A command that runs test `test` of this binary as a child in `role`; the caller adds
/// its own environment, credentials and pipes.
pub fn command(test: &str, role: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().expect("the test binary's path"));
    c.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, role);
    c
}

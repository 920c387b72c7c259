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

/// A copy of the running test binary that every user may execute, for children that
/// run under another uid: the binary itself may sit below a directory only its owner can
/// enter (a clone in a `0700` temporary or home directory), where `execve` as another
/// user fails with `EACCES`. The copy (a hard link where the file system allows) lives
/// in a temporary directory open to all, removed when this value is dropped.
pub struct ForeignExecutable {
    dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl ForeignExecutable {
    /// Links or copies the running binary into a new world-searchable directory.
    pub fn new() -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        let exe = std::env::current_exe()?;
        let dir = tempfile::Builder::new().prefix("pmlab-child-").tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let path = dir.path().join(exe.file_name().unwrap_or("test".as_ref()));
        if std::fs::hard_link(&exe, &path).is_err() {
            std::fs::copy(&exe, &path)?;
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(ForeignExecutable { dir, path })
    }

    /// Like [`command`], but running the world-executable copy as `uid`:`gid`, in a
    /// working directory that user may enter.
    pub fn command_as(&self, test: &str, role: &str, uid: u32, gid: u32) -> Command {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new(&self.path);
        c.args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env(ROLE_ENV, role)
            .current_dir(self.dir.path())
            .uid(uid)
            .gid(gid);
        c
    }
}

//! Clients of several users: a service in a directory every user can reach, and child
//! processes (this test re-executed, see [`pmlab_testkit::child`]) running as other uids,
//! talked to line by line over their standard input and output.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, ExitStatus, Stdio};
use std::time::Duration;

use pmlab_fs::layout::Params;
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::service::{self, Config, Handle};

/// Whether the test can switch uids (it runs as root); prints why it is skipped if not.
pub fn root_or_skip(test: &str) -> bool {
    let uid = nix::unistd::geteuid().as_raw();
    if uid != 0 {
        println!(
            "skipped {test}: it runs clients as other users, which needs root (running as uid {uid})"
        );
        return false;
    }
    true
}

/// A small volume's geometry.
pub fn params() -> Params {
    Params {
        meta_pages: 2048,
        inodes: 31 * 64,
        log_pages: 200,
        max_domains: 8,
        domain_pages: 4096,
        kv_object_pages: 2,
        volume_id: 12,
    }
}

/// A volume served from this process on a socket every user may connect to.
pub struct Rig {
    pub tmp: tempfile::TempDir,
    pub vol: PathBuf,
    pub sock: PathBuf,
    pub svc: Option<Handle>,
}

impl Rig {
    /// A fresh volume (root directory `root_mode`, owned by root) and its service.
    pub fn new(root_mode: u32, cfg: Config) -> Rig {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let vol = tmp.path().join("vol");
        let sock = tmp.path().join("sock");
        let owner = RootOwner {
            uid: 0,
            gid: 0,
            mode: root_mode,
        };
        pmlab_fs::volume::create(&vol, &params(), owner).unwrap();
        let svc = service::spawn(&vol, &sock, cfg).unwrap();
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
        Rig {
            tmp,
            vol,
            sock,
            svc: Some(svc),
        }
    }

    /// The default service settings with a short lease timeout.
    pub fn quick(root_mode: u32) -> Rig {
        Rig::new(
            root_mode,
            Config::with_lease_timeout(Duration::from_millis(500)),
        )
    }

    /// Stops the service and checks the volume with fsck.
    pub fn stop_and_check(mut self) {
        if let Some(s) = self.svc.take() {
            s.stop().unwrap();
        }
        let r = pmlab_fs::fsck::fsck_volume(&self.vol).unwrap();
        assert!(r.clean(), "{:#?}", r.findings);
    }
}

/// A child process in a role, as another user.
pub struct Kid {
    child: Child,
    /// The world-executable copy of the test binary the child runs (kept until it ends).
    _exe: pmlab_testkit::child::ForeignExecutable,
    out: BufReader<ChildStdout>,
    inp: ChildStdin,
    /// Everything it printed so far.
    pub log: String,
}

impl Kid {
    /// Starts test `test` of this binary in `role` as `uid`/`gid`, with the socket path
    /// in `PMLAB_FS_SOCK`.
    pub fn spawn(test: &str, role: &str, uid: u32, gid: u32, sock: &Path) -> Kid {
        // Run from a copy every user may execute: the test binary itself may sit below
        // a directory only its owner can enter.
        let exe = pmlab_testkit::child::ForeignExecutable::new().unwrap();
        let mut child = exe
            .command_as(test, role, uid, gid)
            .env("PMLAB_FS_SOCK", sock)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let inp = child.stdin.take().unwrap();
        Kid {
            child,
            _exe: exe,
            out,
            inp,
            log: String::new(),
        }
    }

    /// Reads lines until one starts with `MARK <mark>`; returns the rest of that line.
    pub fn expect(&mut self, mark: &str) -> String {
        let want = format!("MARK {mark}");
        loop {
            let mut line = String::new();
            if self.out.read_line(&mut line).unwrap() == 0 {
                let st = self.child.wait().unwrap();
                panic!(
                    "the child ended ({st:?}) before {want:?}; it printed:\n{}",
                    self.log
                );
            }
            self.log.push_str(&line);
            // The harness's "test NAME ... " has no newline: a mark may follow it.
            if let Some(at) = line.find(&want) {
                return line[at + want.len()..].trim().to_string();
            }
        }
    }

    /// Sends the child one line.
    pub fn say(&mut self, line: &str) {
        writeln!(self.inp, "{line}").unwrap();
        self.inp.flush().unwrap();
    }

    /// Waits for the child to end; returns its status and everything it printed.
    pub fn finish(mut self) -> (ExitStatus, String) {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.out, &mut rest);
        self.log.push_str(&rest);
        (self.child.wait().unwrap(), self.log)
    }
}

/// In a child: the socket path the parent passed.
pub fn sock() -> PathBuf {
    PathBuf::from(std::env::var("PMLAB_FS_SOCK").unwrap())
}

/// In a child: waits for the parent's next line and returns it.
pub fn wait_line() -> String {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    line.trim().to_string()
}

/// In a child: prints a mark the parent waits for.
pub fn mark(m: &str) {
    println!("MARK {m}");
    std::io::stdout().flush().unwrap();
}

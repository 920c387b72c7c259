//! Volumes on tmpfs, served from this process.

use pmlab_fs::layout::Params;
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::service;

/// A scratch directory on tmpfs: volumes there stand for SCM, mapped with CPU
/// write-backs, where libFS copies outside its state (on a disk file system the
/// mapping is written back with `msync` and every copy stays under the state).
pub fn shm() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").expect("/dev/shm is a tmpfs on Linux")
}

/// A fresh volume of geometry `params` in a scratch directory on tmpfs, owned by this
/// user, served on its `sock`.
pub fn serve(params: &Params) -> (tempfile::TempDir, service::Handle) {
    let tmp = shm();
    let (vol, sock) = (tmp.path().join("vol"), tmp.path().join("sock"));
    pmlab_fs::volume::create(&vol, params, RootOwner::current_user(0o777)).unwrap();
    let svc = service::spawn(&vol, &sock, service::Config::default()).unwrap();
    (tmp, svc)
}

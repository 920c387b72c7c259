//! Two clients, each alone in its own directory, create a file and rename it over
//! another, over and over. Every rename must find the file just created.
//!
//! The clients keep revoking each other's leases (a shared lease on the root, taken to
//! walk a path, conflicts with the other's exclusive lease on its directory), so each
//! client gives leases back many times a second, shipping its journal each time. libFS
//! once dropped its overlay of unapplied changes and unlocked its state before the
//! service had applied such a shipped batch: a lookup in that window read the mapping
//! without the batch and did not find the file just created ("no such file or
//! directory", what the stress oracle reported with more than one client). With the
//! overlay dropped early this test fails within a few dozen iterations; 600 leave a
//! wide margin.

use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::pxfs::Pxfs;
use pmlab_fs::service;

#[test]
fn two_clients_find_the_files_they_just_created() {
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    let sock = tmp.path().join("sock");
    pmlab_fs::volume::create(&vol, &Default::default(), RootOwner::current_user(0o777)).unwrap();
    let svc = service::spawn(&vol, &sock, service::Config::default()).unwrap();
    let clients: Vec<_> = (0..2)
        .map(|c| {
            let sock = sock.clone();
            std::thread::spawn(move || -> Result<(), String> {
                let fs = Pxfs::mount(&sock).map_err(|e| e.to_string())?;
                let dir = format!("/c{c}");
                fs.mkdir(&dir, 0o755).map_err(|e| e.to_string())?;
                let tmp = format!("{dir}/t");
                for i in 0..600 {
                    let step = || -> pmlab_fs::Result<()> {
                        let fd = fs.create(&tmp, 0o644)?;
                        fs.write(fd, b"abc")?;
                        fs.close(fd)?;
                        fs.rename(&tmp, &format!("{dir}/n{}", i % 5))
                    };
                    step().map_err(|e| format!("client {c}, iteration {i}: {e}"))?;
                }
                Ok(())
            })
        })
        .collect();
    let results: Vec<_> = clients.into_iter().map(|h| h.join().unwrap()).collect();
    svc.stop().unwrap();
    for r in results {
        r.unwrap();
    }
}

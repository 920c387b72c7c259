//! A client must not read a file through index pages it cached for another file, one
//! that was since removed and whose index pages the service gave to a new file.
//!
//! libFS caches the radix (index) pages of files it reads, by page number. Removing a
//! file frees its index pages in the metadata bitmap only: the pages themselves are not
//! rewritten, so a removal changes nothing the cache would notice. The service places
//! a new file's index pages itself (next-fit, from its own cursor), often not where the
//! client's local check of the same batch put them, so dropping the pages the client
//! changed itself after a ship does not reach them either. Once the service's cursor
//! comes round again, a new file of the same client may get an index page the client
//! still has cached for a file it removed, and a read then follows the old file's
//! page map: the bytes of old, freed (and possibly reused) data pages, with the new
//! file's size. This was `pmlab fs stress` reading back other bytes than it wrote.
//!
//! While another client's lookups keep revoking this client's leases (directory
//! leases held on the way down), each revocation empties the cache and hides the
//! fault; with leases fine enough that two clients in their own directories do not
//! revoke each other, only the cache's own bookkeeping protects the reads.
//!
//! Two clients of one service take turns from one thread (the sequence, and so where
//! every page lands, is the same on every run): client A writes a two-page file, syncs,
//! reads it back and removes it; client B creates and removes a few files, which moves
//! the service's cursor ahead of A's. The volume's pool is small, so the cursor wraps
//! every few dozen rounds.

use pmlab_fs::layout::{Params, Superblock};
use pmlab_fs::mkfs::RootOwner;
use pmlab_fs::pxfs::{OpenFlags, Pxfs};
use pmlab_fs::service;

const PAGE: usize = 4096;
/// Without the fix the read goes wrong in round 53; the rest is margin.
const ROUNDS: usize = 120;
/// Client B creates and removes 1 to this many files per round: the service's cursor
/// moves on by A's pages and B's, A's local check's by A's alone, so the service comes
/// back to a page A cached before A's own allocations reach it; the varying count
/// makes it land on every page in turn.
const B_FILES: usize = 4;

fn contents(round: usize) -> Vec<u8> {
    // Two pages (the file needs an index page), each byte naming the round.
    (0..2 * PAGE)
        .map(|i| (round as u8).wrapping_mul(31) ^ (i / PAGE) as u8)
        .collect()
}

fn write_file(fs: &Pxfs, path: &str, data: &[u8]) -> pmlab_fs::Result<()> {
    let fd = fs.create(path, 0o644)?;
    fs.write(fd, data)?;
    fs.close(fd)?;
    fs.sync()
}

fn read_file(fs: &Pxfs, path: &str, len: usize) -> pmlab_fs::Result<Vec<u8>> {
    let fd = fs.open(path, OpenFlags::default())?;
    let mut buf = vec![0u8; len];
    let n = fs.read(fd, &mut buf)?;
    fs.close(fd)?;
    buf.truncate(n);
    Ok(buf)
}

/// A volume whose metadata pool holds 96 pages beyond the fixed areas.
fn small_pool() -> Params {
    let mut p = Params {
        inodes: 256,
        ..Params::default()
    };
    let fixed = Superblock::plan(&Params {
        meta_pages: 1 << 20,
        ..p
    })
    .unwrap()
    .pool_first;
    p.meta_pages = fixed + 96;
    p
}

#[test]
fn a_new_file_is_not_read_through_a_removed_files_cached_index_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let vol = tmp.path().join("vol");
    let sock = tmp.path().join("sock");
    pmlab_fs::volume::create(&vol, &small_pool(), RootOwner::current_user(0o777)).unwrap();
    let svc = service::spawn(&vol, &sock, service::Config::default()).unwrap();
    let (a, b) = (Pxfs::mount(&sock).unwrap(), Pxfs::mount(&sock).unwrap());
    a.mkdir("/a", 0o755).unwrap();
    b.mkdir("/b", 0o755).unwrap();
    let mut bad = None;
    for round in 0..ROUNDS {
        let want = contents(round);
        write_file(&a, "/a/f", &want).unwrap();
        let got = read_file(&a, "/a/f", want.len()).unwrap();
        if got != want {
            bad = Some(round);
            break;
        }
        a.unlink("/a/f").unwrap();
        a.sync().unwrap();
        for g in 0..1 + round % B_FILES {
            write_file(&b, &format!("/b/g{g}"), &contents(round + 7 * g)).unwrap();
        }
        for g in 0..1 + round % B_FILES {
            b.unlink(&format!("/b/g{g}")).unwrap();
        }
        b.sync().unwrap();
    }
    drop((a, b));
    svc.stop().unwrap();
    assert_eq!(
        bad, None,
        "client A read back other bytes than it wrote to /a/f in this round"
    );
}

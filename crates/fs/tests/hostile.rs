//! A hostile client of another user against the service's rights: naming another
//! user's file (link, rename), and what it may hold (reservations, domains, leases,
//! pins). Clients of other users are this test re-executed as those users
//! ([`pmlab_testkit::child`]); a hostile one speaks the wire protocol by hand
//! ([`support::raw`]), doing what libFS never would.

mod support;
use pmlab_testkit::child;
use support::raw::Raw;
use support::users::{Kid, Rig, mark, root_or_skip, sock, wait_line};

use pmlab_fs::journal::{Op, encode_batch};
use pmlab_fs::proto::{Reply, Request};
use pmlab_fs::pxfs::{OpenFlags, Pxfs};

const OWNER: u32 = 1000;
const INTRUDER: u32 = 1001;
const NOBODY: u32 = 65534;

fn read_all(fs: &Pxfs, path: &str) -> Vec<u8> {
    let fd = fs.open(path, OpenFlags::default()).unwrap();
    let mut b = vec![0u8; 64];
    let n = fs.read(fd, &mut b).unwrap();
    fs.close(fd).unwrap();
    b.truncate(n);
    b
}

fn append(fs: &Pxfs, path: &str, data: &[u8]) -> pmlab_fs::pxfs::Fd {
    let fd = fs
        .open(
            path,
            OpenFlags {
                write: true,
                append: true,
                ..Default::default()
            },
        )
        .unwrap();
    fs.write(fd, data).unwrap();
    fd
}

const LINK_TEST: &str = "another_user_can_neither_name_nor_move_a_file_under_its_owner";

/// The owner: two files in its directory, written and fsynced, and opened again for
/// appending; when told, it writes again through the open files (acknowledged, not yet
/// shipped: its lease on the directory covers them, and it asks the service for
/// nothing), and when told again, fsyncs them, which must not fail.
fn owner(fs: &Pxfs) {
    fs.mkdir("/a/o", 0o755).unwrap();
    for (p, mode) in [("/a/o/private", 0o600), ("/a/o/shared", 0o666)] {
        let fd = fs.create(p, mode).unwrap();
        fs.write(fd, b"v1").unwrap();
        fs.fsync(fd).unwrap();
        fs.close(fd).unwrap();
    }
    let private = fs.stat("/a/o/private").unwrap().ino;
    let shared = fs.stat("/a/o/shared").unwrap().ino;
    // A create in the directory takes its lease back (the stats above walked it with a
    // shared one): the writes below are then covered by the directory's lease alone.
    let fd = fs.create("/a/o/anchor", 0o600).unwrap();
    fs.close(fd).unwrap();
    let f1 = append(fs, "/a/o/private", b"");
    let f2 = append(fs, "/a/o/shared", b"");
    mark(&format!("ready {private} {shared}"));
    assert_eq!(wait_line(), "write");
    fs.write(f1, b" v2").unwrap();
    fs.write(f2, b" v2").unwrap();
    mark("written");
    assert_eq!(wait_line(), "go");
    for (f, what) in [(f1, "private"), (f2, "shared")] {
        match fs.fsync(f) {
            Ok(()) => mark(&format!("fsync-ok {what}")),
            Err(e) => mark(&format!("fsync-failed {what} {e}")),
        }
        fs.close(f).unwrap();
    }
}

/// The intruder, by hand: with a lease on its own directory only, it names the owner's
/// shared file there; then, as libFS would, it takes a lease covering the owner's files
/// (on their parent's parent, which anyone may write) and tries again, naming and
/// moving it, and naming the private file.
fn intruder(inos: &str) {
    let v: Vec<u64> = inos.split(' ').map(|x| x.parse().unwrap()).collect();
    let (private, shared, b, a) = (v[0], v[1], v[2], v[3]);
    let mut r = Raw::connect(&sock());
    let got = r.call(
        Request::Acquire {
            key: b,
            exclusive: true,
        },
        &[],
    );
    assert!(matches!(got, Reply::Granted { .. }), "{got:?}");
    mark("holding");
    assert_eq!(wait_line(), "go");
    let try_ship =
        |r: &mut Raw, what: &str, ops: &[Op]| match r.call(Request::Ship, &encode_batch(ops)) {
            Reply::Ok | Reply::Shipped { .. } => mark(&format!("{what} accepted")),
            Reply::Err(_, e) => mark(&format!("{what} refused {e}")),
            other => panic!("{other:?}"),
        };
    let link = |name: &str, ino| Op::Link {
        parent: b,
        name: name.into(),
        ino,
    };
    let rename = |from: &str, to: &str, ino| Op::Rename {
        from_parent: b,
        from_name: from.into(),
        to_parent: b,
        to_name: to.into(),
        ino,
        replace: 0,
    };
    // A name alone changes the object (its link count, its ctime) under the owner's
    // exclusive lease: refused, in a batch of its own.
    try_ship(&mut r, "link-shared-unleased", &[link("s", shared)]);
    // The rule a correct client keeps: a lease covering the objects first.
    let got = r.call(
        Request::Acquire {
            key: a,
            exclusive: true,
        },
        &[],
    );
    assert!(matches!(got, Reply::Granted { .. }), "{got:?}");
    try_ship(&mut r, "link-private", &[link("p", private)]);
    try_ship(
        &mut r,
        "link-shared-leased",
        &[link("t", shared), rename("t", "t2", shared)],
    );
}

#[test]
fn another_user_can_neither_name_nor_move_a_file_under_its_owner() {
    child::branch(|role| match role.split_once(' ') {
        Some(("intruder", inos)) => intruder(inos),
        _ => owner(&Pxfs::mount(&sock()).unwrap()),
    });
    if !root_or_skip(LINK_TEST) {
        return;
    }
    let rig = Rig::quick(0o755);
    // The owner's parent directory, and the intruder's own directory beside it.
    let (a, b) = {
        let fs = Pxfs::mount(&rig.sock).unwrap();
        fs.mkdir("/a", 0o777).unwrap();
        fs.mkdir("/b", 0o777).unwrap();
        fs.sync().unwrap();
        (fs.stat("/a").unwrap().ino, fs.stat("/b").unwrap().ino)
    };
    let mut own = Kid::spawn(LINK_TEST, "owner", OWNER, OWNER, &rig.sock);
    let inos = format!("{} {b} {a}", own.expect("ready"));
    // The intruder takes its own directory's lease first (which takes back the owner's
    // lease on the root, taken to walk its path), then the owner writes.
    let mut int = Kid::spawn(
        LINK_TEST,
        &format!("intruder {inos}"),
        INTRUDER,
        INTRUDER,
        &rig.sock,
    );
    int.expect("holding");
    own.say("write");
    own.expect("written");
    int.say("go");
    let (st, log) = int.finish();
    assert!(st.success(), "{log}");
    own.say("go");
    let (st, olog) = own.finish();
    assert!(st.success(), "{olog}");
    // First the consequence: no write that returned success may be lost.
    assert!(
        olog.contains("MARK fsync-ok private") && olog.contains("MARK fsync-ok shared"),
        "the owner's acknowledged writes were lost: {olog}\nwhile the intruder did: {log}"
    );
    assert!(
        log.contains("MARK link-private refused") && log.contains("may not link"),
        "a user linked another user's private file: {log}"
    );
    assert!(
        log.contains("MARK link-shared-unleased refused") && log.contains("no lease covering"),
        "a client named a file under another client's lease without a lease covering it: {log}"
    );
    assert!(log.contains("MARK link-shared-leased accepted"), "{log}");
    let fs = Pxfs::mount(&rig.sock).unwrap();
    assert_eq!(read_all(&fs, "/a/o/private"), b"v1 v2");
    assert_eq!(read_all(&fs, "/b/t2"), b"v1 v2");
    assert!(fs.stat("/b/p").is_err() && fs.stat("/b/s").is_err());
    assert_eq!(fs.stat("/b/t2").unwrap().nlink, 2);
    drop(fs);
    rig.stop_and_check();
}

/// A client too slow to give a revoked lease back loses its leases and its unshipped
/// operations (the service cannot wait on it for ever); the writes it had acknowledged
/// are then reported as EIO by the next fsync and close of every file open at the
/// time, like the kernel's writeback errors, not silently dropped.
#[test]
fn a_lost_acknowledged_write_is_eio_at_the_next_fsync_and_close() {
    let rig = Rig::new(
        0o777,
        pmlab_fs::service::Config::with_lease_timeout(std::time::Duration::from_millis(200)),
    );
    let a = Pxfs::mount(&rig.sock).unwrap();
    let f = a.create("/f", 0o666).unwrap();
    a.write(f, b"will be lost").unwrap();
    let g = a.open("/f", OpenFlags::default()).unwrap();
    {
        // The client is stuck (its state locked) while another client needs /f: the
        // revocation goes unanswered past the lease timeout.
        let _stuck = a.client().state();
        let b = Pxfs::mount(&rig.sock).unwrap();
        // The create may have reached the service (libFS sends what it records at once
        // when nothing is in flight); the write, recorded while it was in flight, did
        // not.
        let seen = b.stat("/f").map(|s| s.size);
        assert!(
            matches!(seen, Err(_) | Ok(0)),
            "the unshipped write reached the service: {seen:?}"
        );
    }
    let e = a.fsync(f).unwrap_err();
    assert!(matches!(e, pmlab_fs::FsError::Lost(_)), "fsync: {e}");
    let e = a.close(g).unwrap_err();
    assert!(
        matches!(e, pmlab_fs::FsError::Lost(_)),
        "close of another file open then: {e}"
    );
    // Each open file reports the loss once, as the kernel's errseq does (closing it
    // may still fail: the connection is gone).
    let r = a.close(f);
    assert!(!matches!(r, Err(pmlab_fs::FsError::Lost(_))), "{r:?}");
    drop(a);
    rig.stop_and_check();
}

const LIMIT_TEST: &str = "a_hoarding_client_takes_its_share_only_and_gives_everything_back";

/// A client that asks for everything it can: all inodes, a domain of every mode, all
/// pages, an exclusive lease on the root, a lease on and a pin of another user's
/// private file.
fn hoarder(private: u64) {
    let mut r = Raw::connect(&sock());
    let say = |what: &str, rep: Reply| match rep {
        Reply::Reserved { inodes, pages } => {
            mark(&format!("{what} {} {}", inodes.len(), pages.len()))
        }
        Reply::Granted { .. } | Reply::Ok => mark(&format!("{what} granted")),
        Reply::Domain { domain, .. } => mark(&format!("{what} domain {domain}")),
        Reply::Err(_, e) => mark(&format!("{what} refused {e}")),
        other => panic!("{other:?}"),
    };
    let all = |domain| Request::Reserve {
        inodes: if domain == u16::MAX { u32::MAX } else { 0 },
        domain,
        pages: if domain == u16::MAX { 0 } else { u32::MAX },
        extent: 1,
    };
    say("inodes", r.call(all(u16::MAX), &[]));
    let mut domains = Vec::new();
    for m in 0..16u32 {
        let req = Request::Domain {
            uid: NOBODY,
            gid: NOBODY,
            mode: 0o600 | m,
        };
        match r.call(req, &[]) {
            Reply::Domain { domain, .. } => domains.push(domain),
            Reply::Err(_, e) => {
                mark(&format!("domain-refused {e}"));
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    mark(&format!("domains {}", domains.len()));
    say("pages", r.call(all(domains[0]), &[]));
    let root = Request::Acquire {
        key: 1,
        exclusive: true,
    };
    say("root-lease", r.call(root, &[]));
    let other = Request::Acquire {
        key: private,
        exclusive: false,
    };
    say("private-lease", r.call(other, &[]));
    say(
        "pin",
        r.call(
            Request::Opened {
                inos: vec![private],
            },
            &[],
        ),
    );
    mark("holding");
    wait_line();
}

#[test]
fn a_hoarding_client_takes_its_share_only_and_gives_everything_back() {
    child::branch(|role| hoarder(role.parse().unwrap()));
    if !root_or_skip(LIMIT_TEST) {
        return;
    }
    let rig = Rig::quick(0o755);
    let fs = Pxfs::mount(&rig.sock).unwrap();
    let fd = fs.create("/private", 0o600).unwrap();
    fs.write(fd, b"root's").unwrap();
    fs.close(fd).unwrap();
    fs.sync().unwrap();
    let private = fs.stat("/private").unwrap().ino;
    // The service gives back what the root client holds on its own files' directory
    // only if asked; the hoarder's requests must not wait behind it.
    drop(fs);
    let mut h = Kid::spawn(LIMIT_TEST, &private.to_string(), NOBODY, NOBODY, &rig.sock);
    let inodes: u64 = h
        .expect("inodes")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let total = support::users::params().inodes;
    assert!(
        inodes > 0 && inodes <= total / 8,
        "one client reserved {inodes} of {total} inodes"
    );
    let domains: usize = h.expect("domains").parse().unwrap();
    assert!(
        domains <= 2,
        "one user filled {domains} domains with no file in them:\n{}",
        h.log
    );
    let pages: u64 = h
        .expect("pages")
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let dp = support::users::params().domain_pages;
    assert!(
        pages > 0 && pages <= dp / 8,
        "one client reserved {pages} of {dp} pages"
    );
    let root = h.expect("root-lease");
    assert!(
        root.starts_with("refused") && root.contains("may not hold"),
        "{root}"
    );
    let lease = h.expect("private-lease");
    assert!(
        lease.starts_with("refused"),
        "a lease on another user's private file: {lease}"
    );
    let pin = h.expect("pin");
    assert!(
        pin.starts_with("refused"),
        "a pin of another user's private file: {pin}"
    );
    h.expect("holding");
    // While it holds all it could get, everyone else still works: new files of new
    // modes (new domains), and the private file goes when its owner removes it.
    let fs = Pxfs::mount(&rig.sock).unwrap();
    for k in 0..40u32 {
        let mode = [0o640, 0o644, 0o660, 0o664, 0o600][k as usize % 5];
        let fd = fs.create(&format!("/f{k}"), mode).unwrap();
        fs.write(fd, &[k as u8; 5000]).unwrap();
        fs.close(fd).unwrap();
    }
    fs.unlink("/private").unwrap();
    fs.sync().unwrap();
    let kind = fs
        .client()
        .state()
        .with_view(|v| pmlab_fs::view::PageSource::inode(v, private))
        .unwrap()
        .kind;
    assert_eq!(
        kind,
        pmlab_fs::inode::Kind::Free,
        "the pinned file outlived its last name"
    );
    h.say("bye");
    let (st, log) = h.finish();
    assert!(st.success(), "{log}");
    // Gone with the client: its reservations (another client gets a full share), its
    // domains (nothing of uid nobody left in the table).
    let mut r = Raw::connect(&rig.sock);
    let got = r.call(
        Request::Reserve {
            inodes: u32::MAX,
            domain: 0,
            pages: 0,
            extent: 1,
        },
        &[],
    );
    let Reply::Reserved { inodes: again, .. } = got else {
        panic!("{got:?}")
    };
    assert_eq!(
        again.len() as u64,
        inodes,
        "the departed client's reservations were not given back"
    );
    drop(r);
    let table = fs
        .client()
        .state()
        .with_view(|v| pmlab_fs::domain::read_table(v))
        .unwrap();
    assert!(
        table.iter().flatten().all(|d| d.uid != NOBODY),
        "the departed client's empty domains stayed: {table:?}"
    );
    drop(fs);
    rig.stop_and_check();
}

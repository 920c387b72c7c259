//! The on-media structures and the service's validate/apply logic on a plain
//! `VecMemory`: no processes, no mappings.

use std::collections::HashSet;

use pmlab_fs::apply::{Authority, apply_batch, domain_for, reclaim_orphan};
use pmlab_fs::dir;
use pmlab_fs::domain::Domain;
use pmlab_fs::fsck::{Severity, fsck};
use pmlab_fs::inode::Kind;
use pmlab_fs::journal::Op;
use pmlab_fs::layout::{Params, ROOT_INO, Superblock};
use pmlab_fs::media::PAGE;
use pmlab_fs::mkfs::{RootOwner, mkfs};
use pmlab_fs::radix;
use pmlab_fs::redo;
use pmlab_fs::view::{MediaView, PageSource};
use pmlab_spine::{Memory, VecMemory};

fn small() -> Params {
    Params {
        meta_pages: 1024,
        inodes: 31 * 64,
        log_pages: 200,
        max_domains: 4,
        domain_pages: 2048,
        kv_object_pages: 2,
        volume_id: 7,
    }
}

fn fresh() -> (VecMemory, Superblock) {
    let mut m = VecMemory::new((small().meta_pages * PAGE) as usize);
    let sb = mkfs(
        &mut m,
        &small(),
        RootOwner {
            uid: 0,
            gid: 0,
            mode: 0o755,
        },
    )
    .unwrap();
    (m, sb)
}

#[derive(Default)]
struct Grant {
    uid: u32,
    gid: u32,
    leases: HashSet<u64>,
    inodes: HashSet<u64>,
    pages: HashSet<(u16, u64)>,
    open: HashSet<u64>,
}

impl Authority for Grant {
    fn cred(&self) -> (u32, u32) {
        (self.uid, self.gid)
    }
    fn holds_lease(&self, ino: u64) -> bool {
        self.leases.contains(&ino)
    }
    fn inode_reserved(&self, ino: u64) -> bool {
        self.inodes.contains(&ino)
    }
    fn page_reserved(&self, d: u16, p: u64) -> bool {
        self.pages.contains(&(d, p))
    }
    fn is_open(&self, ino: u64) -> bool {
        self.open.contains(&ino)
    }
}

fn root_grant() -> Grant {
    Grant {
        leases: [ROOT_INO].into(),
        inodes: (2..200).collect(),
        pages: (1..2048).map(|p| (0u16, p)).collect(),
        ..Grant::default()
    }
}

fn run(m: &mut VecMemory, sb: &Superblock, g: &Grant, ops: &[Op]) -> Result<(), String> {
    let out = apply_batch(m, *sb, g, ops).map_err(|r| r.to_string())?;
    redo::commit(m, sb, &out.changes).unwrap();
    Ok(())
}

fn domain0(m: &mut VecMemory, sb: &Superblock, mode: u32) -> u16 {
    let (d, _, ch) = domain_for(
        m,
        *sb,
        Domain {
            uid: 0,
            gid: 0,
            mode,
        },
    )
    .unwrap();
    redo::commit(m, sb, &ch).unwrap();
    d
}

fn lookup(m: &mut VecMemory, path: &[&str]) -> Option<u64> {
    let mut v = MediaView::new(m).unwrap();
    let mut ino = ROOT_INO;
    for c in path {
        let i = v.inode(ino).unwrap();
        ino = dir::lookup(&mut v, i.root, c).unwrap()?;
    }
    Some(ino)
}

fn assert_clean(m: &mut VecMemory) -> pmlab_fs::fsck::Report {
    let r = fsck(m).unwrap();
    assert!(r.clean(), "{:#?}", r.findings);
    r
}

fn create(parent: u64, name: &str, ino: u64, kind: Kind, domain: u16) -> Op {
    Op::Create {
        parent,
        name: name.into(),
        ino,
        kind,
        mode: 0o644,
        domain,
    }
}

#[test]
fn mkfs_then_fsck_is_clean() {
    let (mut m, _) = fresh();
    let r = assert_clean(&mut m);
    assert_eq!(r.summary.dirs, 1);
    assert_eq!(r.findings.len(), 0);
}

#[test]
fn namespace_operations_keep_the_volume_consistent() {
    let (mut m, sb) = fresh();
    let g = root_grant();
    let d = domain0(&mut m, &sb, 0o644);
    run(
        &mut m,
        &sb,
        &g,
        &[
            Op::Create {
                parent: ROOT_INO,
                name: "a".into(),
                ino: 2,
                kind: Kind::Dir,
                mode: 0o755,
                domain: 0,
            },
            create(2, "f", 3, Kind::File, d),
            Op::MapPages {
                ino: 3,
                index: 0,
                page: 10,
                count: 3,
            },
            Op::SetSize {
                ino: 3,
                size: 3 * PAGE - 5,
            },
            Op::Link {
                parent: ROOT_INO,
                name: "g".into(),
                ino: 3,
            },
        ],
    )
    .unwrap();
    assert_eq!(lookup(&mut m, &["a", "f"]), Some(3));
    assert_eq!(lookup(&mut m, &["g"]), Some(3));
    let r = assert_clean(&mut m);
    assert_eq!(
        (r.summary.dirs, r.summary.files, r.summary.data_pages_used),
        (2, 1, 3)
    );

    run(
        &mut m,
        &sb,
        &g,
        &[
            Op::Rename {
                from_parent: 2,
                from_name: "f".into(),
                to_parent: ROOT_INO,
                to_name: "h".into(),
                ino: 3,
                replace: 0,
            },
            Op::Unlink {
                parent: ROOT_INO,
                name: "g".into(),
                ino: 3,
            },
            Op::Rmdir {
                parent: ROOT_INO,
                name: "a".into(),
                ino: 2,
            },
        ],
    )
    .unwrap();
    assert_eq!(lookup(&mut m, &["a"]), None);
    assert_eq!(lookup(&mut m, &["h"]), Some(3));
    assert_clean(&mut m);

    run(
        &mut m,
        &sb,
        &g,
        &[Op::Unlink {
            parent: ROOT_INO,
            name: "h".into(),
            ino: 3,
        }],
    )
    .unwrap();
    let r = assert_clean(&mut m);
    assert_eq!(
        (
            r.summary.files,
            r.summary.data_pages_used,
            r.summary.meta_pages_used
        ),
        (0, 0, sb.pool_first + 1)
    );
}

#[test]
fn invalid_batches_are_rejected_whole_naming_the_operation() {
    let (mut m, sb) = fresh();
    let d = domain0(&mut m, &sb, 0o644);
    let before = m.bytes().to_vec();
    let g = root_grant();
    let cases: Vec<(Vec<Op>, &str)> = vec![
        (
            vec![
                create(1, "x", 2, Kind::File, d),
                create(1, "x", 3, Kind::File, d),
            ],
            "operation 1 (create): name \"x\" already exists",
        ),
        (vec![create(1, "x", 500, Kind::File, d)], "not reserved"),
        (
            vec![
                create(1, "x", 2, Kind::File, d),
                Op::MapPages {
                    ino: 2,
                    index: 0,
                    page: 5000,
                    count: 1,
                },
            ],
            "outside domain",
        ),
        (
            vec![
                create(1, "x", 2, Kind::File, d),
                Op::MapPages {
                    ino: 2,
                    index: 0,
                    page: 5,
                    count: 1,
                },
                Op::MapPages {
                    ino: 2,
                    index: 1,
                    page: 5,
                    count: 1,
                },
            ],
            "operation 2 (map-pages): data page 5 of domain 0 is already allocated",
        ),
        (
            vec![Op::Unlink {
                parent: 1,
                name: "nope".into(),
                ino: 9,
            }],
            "no name",
        ),
        (
            vec![Op::Rmdir {
                parent: 1,
                name: "x".into(),
                ino: 1,
            }],
            "root cannot",
        ),
        (
            vec![create(1, "x", 2, Kind::File, 3)],
            "domain 3 is not the domain",
        ),
        (vec![create(1, "a/b", 2, Kind::File, d)], "invalid name"),
        (vec![Op::SetSize { ino: 1, size: 0 }], "not a file"),
        (
            vec![
                Op::Create {
                    parent: 1,
                    name: "a".into(),
                    ino: 2,
                    kind: Kind::Dir,
                    mode: 0o755,
                    domain: 0,
                },
                Op::Create {
                    parent: 2,
                    name: "b".into(),
                    ino: 3,
                    kind: Kind::Dir,
                    mode: 0o755,
                    domain: 0,
                },
                Op::Rename {
                    from_parent: 1,
                    from_name: "a".into(),
                    to_parent: 3,
                    to_name: "a".into(),
                    ino: 2,
                    replace: 0,
                },
            ],
            "operation 2 (rename): directory inode 2 cannot move below itself",
        ),
        (
            vec![
                create(1, "x", 2, Kind::File, d),
                Op::Unlink {
                    parent: 1,
                    name: "x".into(),
                    ino: 2,
                },
                Op::Unlink {
                    parent: 1,
                    name: "x".into(),
                    ino: 2,
                },
            ],
            "operation 2 (unlink)",
        ),
    ];
    for (ops, want) in cases {
        let e = apply_batch(&mut m, sb, &g, &ops)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e:?} should contain {want:?}");
        assert_eq!(
            m.bytes(),
            &before[..],
            "a rejected batch changed the volume"
        );
    }
    // Without a lease, and without permission.
    let no_lease = Grant {
        leases: HashSet::new(),
        ..root_grant()
    };
    let e = apply_batch(&mut m, sb, &no_lease, &[create(1, "x", 2, Kind::File, d)]).unwrap_err();
    assert!(e.why.contains("no lease"), "{e}");
    let stranger = Grant {
        uid: 1000,
        gid: 1000,
        ..root_grant()
    };
    let e = apply_batch(&mut m, sb, &stranger, &[create(1, "x", 2, Kind::File, d)]).unwrap_err();
    assert!(e.why.contains("may not write directory"), "{e}");
}

#[test]
fn a_lease_on_a_directory_covers_what_lies_below() {
    let (mut m, sb) = fresh();
    let g = root_grant();
    run(
        &mut m,
        &sb,
        &g,
        &[
            Op::Create {
                parent: 1,
                name: "a".into(),
                ino: 2,
                kind: Kind::Dir,
                mode: 0o755,
                domain: 0,
            },
            Op::Create {
                parent: 2,
                name: "b".into(),
                ino: 3,
                kind: Kind::Dir,
                mode: 0o755,
                domain: 0,
            },
        ],
    )
    .unwrap();
    let on_a = Grant {
        leases: [2].into(),
        ..root_grant()
    };
    let mk = |name: &str, ino| Op::Create {
        parent: 3,
        name: name.into(),
        ino,
        kind: Kind::Dir,
        mode: 0o755,
        domain: 0,
    };
    run(&mut m, &sb, &on_a, &[mk("c", 4)]).unwrap();
    let on_sibling = Grant {
        leases: [4].into(),
        ..root_grant()
    };
    assert!(apply_batch(&mut m, sb, &on_sibling, &[mk("d", 5)]).is_err());
    assert_clean(&mut m);
}

#[test]
fn an_unlinked_open_file_survives_until_reclaimed() {
    let (mut m, sb) = fresh();
    let d = domain0(&mut m, &sb, 0o644);
    let mut g = root_grant();
    run(
        &mut m,
        &sb,
        &g,
        &[
            create(1, "f", 2, Kind::File, d),
            Op::MapPages {
                ino: 2,
                index: 0,
                page: 3,
                count: 1,
            },
        ],
    )
    .unwrap();
    g.open.insert(2);
    let out = apply_batch(
        &mut m,
        sb,
        &g,
        &[Op::Unlink {
            parent: 1,
            name: "f".into(),
            ino: 2,
        }],
    )
    .unwrap();
    assert_eq!(out.orphaned, vec![2]);
    redo::commit(&mut m, &sb, &out.changes).unwrap();
    let r = fsck(&mut m).unwrap();
    assert!(r.clean());
    assert!(
        r.findings
            .iter()
            .any(|f| f.severity == Severity::Note && f.place == "inode 2"),
        "{:?}",
        r.findings
    );
    assert_eq!(r.summary.data_pages_used, 1);
    let ch = reclaim_orphan(&mut m, sb, 2).unwrap();
    redo::commit(&mut m, &sb, &ch.changes).unwrap();
    let r = assert_clean(&mut m);
    assert_eq!((r.summary.data_pages_used, r.findings.len()), (0, 0));
}

#[test]
fn big_files_and_big_directories() {
    let (mut m, sb) = fresh();
    let d = domain0(&mut m, &sb, 0o644);
    let g = root_grant();
    // 600 pages need a radix tree of height 2.
    run(
        &mut m,
        &sb,
        &g,
        &[
            create(1, "big", 2, Kind::File, d),
            Op::MapPages {
                ino: 2,
                index: 0,
                page: 1,
                count: 600,
            },
            Op::SetSize {
                ino: 2,
                size: 600 * PAGE,
            },
        ],
    )
    .unwrap();
    let mut v = MediaView::new(&mut m).unwrap();
    let i = v.inode(2).unwrap();
    assert_eq!(i.height, 2);
    assert_eq!(radix::lookup(&mut v, &i, 599).unwrap(), 600);
    assert_eq!(radix::lookup(&mut v, &i, 600).unwrap(), 0);
    assert_clean(&mut m);
    // Shrinking frees the pages beyond the new end.
    run(
        &mut m,
        &sb,
        &g,
        &[Op::SetSize {
            ino: 2,
            size: 10 * PAGE + 1,
        }],
    )
    .unwrap();
    assert_eq!(assert_clean(&mut m).summary.data_pages_used, 11);
    // 150 names in one directory: more than one page in some buckets? No: spread, but many pages.
    let ops: Vec<Op> = (0..150)
        .map(|k| create(1, &format!("n{k}"), 10 + k, Kind::File, d))
        .collect();
    run(&mut m, &sb, &g, &ops).unwrap();
    assert_eq!(lookup(&mut m, &["n149"]), Some(159));
    assert_clean(&mut m);
}

#[test]
fn fsck_finds_damage_and_says_where() {
    let (mut m, sb) = fresh();
    let d = domain0(&mut m, &sb, 0o644);
    run(
        &mut m,
        &sb,
        &root_grant(),
        &[
            create(1, "f", 2, Kind::File, d),
            Op::MapPages {
                ino: 2,
                index: 0,
                page: 3,
                count: 1,
            },
        ],
    )
    .unwrap();
    assert_clean(&mut m);

    // A flipped bit in the inode table.
    let mut bad = m.clone();
    let (pno, off) = sb.inode_pos(2);
    let mut b = [0u8; 1];
    bad.read(pno * PAGE + off as u64 + 24, &mut b).unwrap();
    bad.write(pno * PAGE + off as u64 + 24, &[b[0] ^ 4])
        .unwrap();
    let r = fsck(&mut bad).unwrap();
    assert!(!r.clean());
    let text = r
        .findings
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains(&format!("page {pno}")) && text.contains("checksum"),
        "{text}"
    );

    // A leaked data page: marked in the bitmap, owned by nobody.
    let mut leak = m.clone();
    let bm = sb.dbitmap_of(d as u64);
    let mut p = pmlab_fs::media::read_raw(&mut leak, bm).unwrap();
    p[0] |= 1 << 7;
    pmlab_fs::media::seal(&mut p, pmlab_fs::media::Tag::Bitmap);
    leak.write(bm * PAGE, &p[..]).unwrap();
    let r = fsck(&mut leak).unwrap();
    // The bitmap page was written behind the redo log's back, so the log's last
    // transaction (which logged that page) no longer matches it: a note, not an error.
    let errors: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{:?}", r.findings);
    assert_eq!(errors[0].place, "domain 0 data page 7");

    // A directory root page whose reserved bytes are not zero (version 2 kept an
    // entry count there; version 3 keeps it in the directory inode's size only).
    let mut counted = m.clone();
    let root = MediaView::new(&mut counted)
        .unwrap()
        .inode(ROOT_INO)
        .unwrap()
        .root;
    let mut p = pmlab_fs::media::read_raw(&mut counted, root).unwrap();
    p[0] = 1;
    pmlab_fs::media::seal(&mut p, pmlab_fs::media::Tag::DirRoot);
    counted.write(root * PAGE, &p[..]).unwrap();
    let r = fsck(&mut counted).unwrap();
    assert!(
        r.findings.iter().any(|f| f.severity == Severity::Error
            && f.to_string().contains(&format!(
                "reserved bytes 0..16 of directory root page {root} are not zero"
            ))),
        "{:?}",
        r.findings
    );

    // A foreign volume is refused, and so is a damaged superblock.
    let mut foreign = VecMemory::new(64 * 4096);
    foreign.write(0, b"NOTAEFS!").unwrap();
    assert!(
        fsck(&mut foreign)
            .unwrap_err()
            .to_string()
            .contains("bad magic")
    );
    let mut sbad = m.clone();
    sbad.write(20, &[0xff]).unwrap();
    assert!(
        fsck(&mut sbad)
            .unwrap_err()
            .to_string()
            .contains("checksum")
    );
}

#[test]
fn the_redo_log_replays_a_committed_transaction_and_ignores_a_torn_one() {
    let (mut m, sb) = fresh();
    let g = root_grant();
    let out = apply_batch(
        &mut m,
        sb,
        &g,
        &[Op::Create {
            parent: 1,
            name: "a".into(),
            ino: 2,
            kind: Kind::Dir,
            mode: 0o755,
            domain: 0,
        }],
    )
    .unwrap();
    let mut done = m.clone();
    redo::commit(&mut done, &sb, &out.changes).unwrap();
    assert!(done.bytes() != m.bytes());

    // Crash after the log is durable, before any page is written in place.
    let mut crashed = m.clone();
    redo::write_log(&mut crashed, &sb, 9, &out.changes).unwrap();
    assert!(
        fsck(&mut crashed)
            .unwrap()
            .findings
            .iter()
            .any(|f| f.what.contains("committed transaction"))
    );
    assert_eq!(
        redo::recover(&mut crashed, &sb).unwrap(),
        redo::LogState::Committed(out.changes.len() as u64)
    );
    let outside_log = |mm: &VecMemory| {
        let b = mm.bytes();
        let (lo, hi) = (
            (sb.log_first * PAGE) as usize,
            ((sb.log_first + sb.log_pages) * PAGE) as usize,
        );
        [&b[..lo], &b[hi..]].concat()
    };
    assert!(
        outside_log(&crashed) == outside_log(&done),
        "replay differs from a completed commit"
    );
    assert_eq!(lookup(&mut crashed, &["a"]), Some(2));
    assert_clean(&mut crashed);

    // A commit torn inside an image: the checksum fails, nothing is replayed.
    let mut torn = m.clone();
    redo::write_log(&mut torn, &sb, 9, &out.changes).unwrap();
    torn.write((sb.log_first + 1) * PAGE + 100, &[0x55])
        .unwrap();
    assert_eq!(redo::recover(&mut torn, &sb).unwrap(), redo::LogState::Torn);
    assert!(outside_log(&torn) == outside_log(&m));
    // The torn log is left for the next commit to overwrite; recovering again ignores
    // it again.
    assert_eq!(redo::recover(&mut torn, &sb).unwrap(), redo::LogState::Torn);
    assert!(outside_log(&torn) == outside_log(&m));
    assert_eq!(lookup(&mut torn, &["a"]), None);
}

/// Crash at every point of a commit: after the log is durable, any prefix of the
/// in-place page writes may have happened; recovery must always reach exactly the
/// committed state. Before the log header is durable, recovery must leave the old state.
#[test]
fn a_commit_interrupted_anywhere_recovers_to_before_or_after() {
    let (mut m, sb) = fresh();
    let d = domain0(&mut m, &sb, 0o644);
    let g = root_grant();
    let mut ops = vec![Op::Create {
        parent: 1,
        name: "dir".into(),
        ino: 2,
        kind: Kind::Dir,
        mode: 0o755,
        domain: 0,
    }];
    for k in 0..40 {
        ops.push(create(2, &format!("f{k}"), 3 + k, Kind::File, d));
    }
    ops.push(Op::MapPages {
        ino: 3,
        index: 0,
        page: 1,
        count: 600,
    });
    ops.push(Op::SetSize {
        ino: 3,
        size: 600 * PAGE,
    });
    let out = apply_batch(&mut m, sb, &g, &ops).unwrap();
    let n = out.changes.len();
    assert!(n > 10, "{n} pages");
    let mut done = m.clone();
    redo::commit(&mut done, &sb, &out.changes).unwrap();
    let outside_log = |mm: &VecMemory| {
        let b = mm.bytes();
        let (lo, hi) = (
            (sb.log_first * PAGE) as usize,
            ((sb.log_first + sb.log_pages) * PAGE) as usize,
        );
        [&b[..lo], &b[hi..]].concat()
    };
    let (before, after) = (outside_log(&m), outside_log(&done));
    for k in 0..=n {
        let mut c = m.clone();
        redo::write_log(&mut c, &sb, 1, &out.changes).unwrap();
        for (pno, img) in out.changes.iter().take(k) {
            c.write(pno * PAGE, &img[..]).unwrap();
        }
        // Between the in-place writes fsck may see a half-applied volume; recovery fixes it.
        redo::recover(&mut c, &sb).unwrap();
        assert!(
            outside_log(&c) == after,
            "crash after {k} of {n} in-place writes"
        );
    }
    // Crash with the records in the log but its header line not yet written: the
    // previous transaction's header no longer matches the body under it.
    let mut logged = m.clone();
    redo::write_log(&mut logged, &sb, 2, &out.changes).unwrap();
    let body = (sb.log_first * PAGE + 64) as usize..((sb.log_first + sb.log_pages) * PAGE) as usize;
    let mut c = m.clone();
    c.write(body.start as u64, &logged.bytes()[body]).unwrap();
    assert_eq!(redo::recover(&mut c, &sb).unwrap(), redo::LogState::Torn);
    assert!(outside_log(&c) == before);
    let r = assert_clean(&mut done);
    assert_eq!((r.summary.files, r.summary.data_pages_used), (40, 600));
}

#[test]
fn a_bucket_lease_covers_the_names_in_that_bucket_only() {
    let (mut m, sb) = fresh();
    let key = pmlab_fs::lease::bucket_key(ROOT_INO, dir::bucket_of("x"));
    let g = Grant {
        leases: [key].into(),
        ..root_grant()
    };
    let other = (0..100)
        .map(|k| format!("y{k}"))
        .find(|n| dir::bucket_of(n) != dir::bucket_of("x"))
        .unwrap();
    let e = apply_batch(
        &mut m,
        sb,
        &g,
        &[Op::Create {
            parent: 1,
            name: other,
            ino: 3,
            kind: Kind::Dir,
            mode: 0o755,
            domain: 0,
        }],
    )
    .unwrap_err();
    assert!(e.why.contains("no lease"), "{e}");
    run(
        &mut m,
        &sb,
        &g,
        &[
            Op::Create {
                parent: 1,
                name: "x".into(),
                ino: 2,
                kind: Kind::Dir,
                mode: 0o755,
                domain: 0,
            },
            Op::Create {
                parent: 2,
                name: "below".into(),
                ino: 3,
                kind: Kind::Dir,
                mode: 0o755,
                domain: 0,
            },
        ],
    )
    .unwrap();
    assert_clean(&mut m);
}

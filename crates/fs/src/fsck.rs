//! Checking a volume: every structure, every reference, every bitmap bit.
//!
//! Findings name what is wrong and where (inode number, page, byte). A foreign volume or
//! one whose superblock is damaged is refused with an error before anything else is read.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::dir;
use crate::domain;
use crate::error::{FsError, Result};
use crate::inode::{Inode, Kind};
use crate::layout::{BITS_PER_PAGE, ROOT_INO, Superblock};
use crate::media::{MediaRead, PAGE, Tag};
use crate::radix;
use crate::redo::{self, LogState};
use crate::view::{MediaView, PageSource};

/// How serious a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Expected after a crash and repaired by the service when it starts (an orphan of
    /// an unlinked open file, a committed transaction awaiting replay).
    Note,
    /// A broken invariant.
    Error,
}

/// One thing fsck found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// How serious it is.
    pub severity: Severity,
    /// Where: "inode 12", "page 40 (byte 0x28000)", "domain 1 data page 7".
    pub place: String,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self.severity {
            Severity::Note => "note",
            Severity::Error => "error",
        };
        write!(f, "{s}: {}: {}", self.place, self.what)
    }
}

/// What fsck saw, besides its findings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Directories reached from the root.
    pub dirs: u64,
    /// PXFS files reached.
    pub files: u64,
    /// KVFS objects reached.
    pub kv_objects: u64,
    /// Metadata pages in use.
    pub meta_pages_used: u64,
    /// Data pages in use, over all domains.
    pub data_pages_used: u64,
    /// Domains in use.
    pub domains: u64,
}

/// The result of a check.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Counts of what was found.
    pub summary: Summary,
    /// Problems, in the order found.
    pub findings: Vec<Finding>,
}

impl Report {
    /// Whether no finding is an error.
    pub fn clean(&self) -> bool {
        self.findings.iter().all(|f| f.severity == Severity::Note)
    }
}

struct Checker<'a, R: MediaRead + ?Sized> {
    view: MediaView<'a, R>,
    sb: Superblock,
    report: Report,
    /// Owner of each metadata page.
    meta_owner: BTreeMap<u64, String>,
    /// Owner of each (domain, data page).
    data_owner: BTreeMap<(u16, u64), u64>,
    refs: HashMap<u64, u32>,
    dirs_seen: BTreeSet<u64>,
    domains: Vec<Option<domain::Domain>>,
}

fn page_place(pno: u64) -> String {
    format!("page {pno} (byte {:#x})", pno * PAGE)
}

impl<R: MediaRead + ?Sized> Checker<'_, R> {
    fn err(&mut self, place: String, what: String) {
        self.report.findings.push(Finding {
            severity: Severity::Error,
            place,
            what,
        });
    }

    fn corrupt(&mut self, e: FsError) {
        match e {
            FsError::Corrupt { what, at, why } => self.err(
                page_place(at.page),
                format!("{what}: {why} (byte {:#x})", at.page * PAGE + at.offset),
            ),
            other => self.err("volume".into(), other.to_string()),
        }
    }

    fn claim_meta(&mut self, pno: u64, owner: String) {
        if pno < self.sb.pool_first || pno >= self.sb.meta_pages {
            self.err(
                page_place(pno),
                format!("{owner} refers to a page outside the pool"),
            );
            return;
        }
        if let Some(prev) = self.meta_owner.insert(pno, owner.clone()) {
            self.err(
                page_place(pno),
                format!("claimed by both {prev} and {owner}"),
            );
        }
    }

    fn claim_data(&mut self, ino: u64, dom: u16, page: u64) {
        if page == 0 || page >= self.sb.domain_pages {
            self.err(
                format!("inode {ino}"),
                format!(
                    "data page {page} outside domain {dom}'s 1..{}",
                    self.sb.domain_pages
                ),
            );
            return;
        }
        if let Some(prev) = self.data_owner.insert((dom, page), ino) {
            self.err(
                format!("domain {dom} data page {page}"),
                format!("used by both inode {prev} and inode {ino}"),
            );
        }
    }

    fn fixed_pages(&mut self) {
        let sb = self.sb;
        let mut fixed: Vec<(u64, Tag)> = vec![(sb.domtab, Tag::Domains)];
        fixed.extend((0..sb.mbitmap_pages).map(|i| (sb.mbitmap_first + i, Tag::Bitmap)));
        fixed.extend(
            (0..sb.dbitmap_pages * sb.max_domains).map(|i| (sb.dbitmap_first + i, Tag::Bitmap)),
        );
        fixed.extend((0..sb.itable_pages).map(|i| (sb.itable_first + i, Tag::Inodes)));
        for (pno, tag) in fixed {
            if let Err(e) = self.view.page(pno, tag) {
                self.corrupt(e);
            }
        }
    }

    fn walk_dir(&mut self, ino: u64, inode: &Inode, path: &str) {
        self.report.summary.dirs += 1;
        self.claim_meta(inode.root, format!("directory inode {ino} ({path})"));
        let (entries, pages) = match dir::entries(&mut self.view, inode.root) {
            Ok(x) => x,
            Err(e) => return self.corrupt(e),
        };
        for p in &pages {
            self.claim_meta(*p, format!("directory inode {ino} ({path}) bucket"));
        }
        self.check_dir_table(ino, inode, path, entries.len());
        let mut names = BTreeSet::new();
        for (name, child) in entries {
            if let Err(e) = dir::check_name(&name) {
                self.err(format!("inode {ino} ({path})"), e.to_string());
            }
            if !names.insert(name.clone()) {
                self.err(
                    format!("inode {ino} ({path})"),
                    format!("name {name:?} appears twice"),
                );
            }
            self.visit_entry(ino, path, &name, child);
        }
    }

    /// The directory's root page reserved bytes and its size against its entries.
    fn check_dir_table(&mut self, ino: u64, inode: &Inode, path: &str, entries: usize) {
        if let Ok(false) = dir::root_reserved_clear(&mut self.view, inode.root) {
            self.err(
                format!("inode {ino} ({path})"),
                format!(
                    "reserved bytes 0..16 of directory root page {} are not zero",
                    inode.root
                ),
            );
        }
        if inode.size != entries as u64 {
            self.err(
                format!("inode {ino} ({path})"),
                format!("size says {} entries, table holds {entries}", inode.size),
            );
        }
    }

    /// One entry `name -> child` of directory `ino`: the inode it names and
    /// (first time a file is reached, every time for a directory) what lies below.
    fn visit_entry(&mut self, ino: u64, path: &str, name: &str, child: u64) {
        let cpath = if path == "/" {
            format!("/{name}")
        } else {
            format!("{path}/{name}")
        };
        if child == 0 || child >= self.sb.inode_count {
            return self.err(
                cpath,
                format!("entry names inode {child}, outside the table"),
            );
        }
        let ci = match self.view.inode(child) {
            Ok(i) => i,
            Err(e) => return self.corrupt(e),
        };
        *self.refs.entry(child).or_default() += 1;
        match ci.kind {
            Kind::Free => self.err(cpath, format!("entry names free inode {child}")),
            Kind::Dir => {
                if !self.dirs_seen.insert(child) {
                    return self.err(cpath, format!("directory inode {child} has a second name"));
                }
                if ci.parent != ino {
                    self.err(
                        format!("inode {child} ({cpath})"),
                        format!("parent field says {}, it lives in {ino}", ci.parent),
                    );
                }
                self.walk_dir(child, &ci, &cpath);
            }
            Kind::File | Kind::Kv => {
                if self.refs[&child] == 1 {
                    self.check_data(child, &ci, &cpath);
                }
            }
        }
    }

    fn check_data(&mut self, ino: u64, i: &Inode, path: &str) {
        let place = format!("inode {ino} ({path})");
        let Some(dom) = self.domains.get(i.domain as usize).copied().flatten() else {
            self.err(place.clone(), format!("domain {} is not in use", i.domain));
            return;
        };
        if (dom.uid, dom.gid, dom.mode) != (i.uid, i.gid, i.mode) {
            self.err(
                place.clone(),
                format!(
                    "owner {}, group {}, mode {:o} differ from its domain {}'s {}, {}, {:o}",
                    i.uid, i.gid, i.mode, i.domain, dom.uid, dom.gid, dom.mode
                ),
            );
        }
        match i.kind {
            Kind::File => {
                self.report.summary.files += 1;
                let mut data = Vec::new();
                let mut index = Vec::new();
                if let Err(e) = radix::walk(&mut self.view, i, &mut |_, p| data.push(p), &mut |p| {
                    index.push(p)
                }) {
                    return self.corrupt(e);
                }
                for p in index {
                    self.claim_meta(p, format!("file inode {ino} radix"));
                }
                for p in data {
                    self.claim_data(ino, i.domain, p);
                }
            }
            Kind::Kv => {
                self.report.summary.kv_objects += 1;
                let n = self.sb.kv_object_pages;
                if i.size > n * PAGE {
                    self.err(
                        place.clone(),
                        format!("size {} exceeds the {}-byte object", i.size, n * PAGE),
                    );
                }
                if i.root != 0 {
                    for p in i.root..i.root + n {
                        self.claim_data(ino, i.domain, p);
                    }
                }
            }
            _ => {}
        }
    }

    fn inode_scan(&mut self) {
        for ino in 1..self.sb.inode_count {
            let i = match self.view.inode(ino) {
                Ok(i) => i,
                Err(e) => {
                    self.corrupt(e);
                    continue;
                }
            };
            if i.kind == Kind::Free {
                continue;
            }
            let refs = if ino == ROOT_INO {
                1
            } else {
                self.refs.get(&ino).copied().unwrap_or(0)
            };
            if refs == 0 {
                if i.nlink == 0 && i.kind != Kind::Dir {
                    self.report.findings.push(Finding {
                        severity: Severity::Note,
                        place: format!("inode {ino}"),
                        what: "unlinked object still allocated (open when the service stopped); reclaimed when the service starts".into(),
                    });
                    self.check_data(ino, &i, "<orphan>");
                } else {
                    self.err(
                        format!("inode {ino}"),
                        format!("allocated {:?} with no name (nlink {})", i.kind, i.nlink),
                    );
                }
                continue;
            }
            if i.nlink != refs {
                self.err(
                    format!("inode {ino}"),
                    format!("link count {} but {refs} names refer to it", i.nlink),
                );
            }
        }
    }

    fn bitmaps(&mut self) {
        let sb = self.sb;
        for pno in 0..sb.pool_first {
            self.meta_owner
                .entry(pno)
                .or_insert_with(|| "fixed area".into());
        }
        let mut page_cache: Option<(u64, crate::media::PageBuf)> = None;
        let mut bit_of = |view: &mut MediaView<'_, R>, first: u64, idx: u64| -> Option<bool> {
            let pg = first + idx / BITS_PER_PAGE;
            let bit = idx % BITS_PER_PAGE;
            if page_cache.as_ref().map(|c| c.0) != Some(pg) {
                page_cache = Some((pg, view.page(pg, Tag::Bitmap).ok()?));
            }
            let p = &page_cache.as_ref()?.1;
            Some(p[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
        };
        for pno in 0..sb.meta_pages {
            let Some(set) = bit_of(&mut self.view, sb.mbitmap_first, pno) else {
                return;
            };
            match (set, self.meta_owner.get(&pno)) {
                (true, None) => self.err(
                    page_place(pno),
                    "marked in use in the metadata bitmap, but nothing refers to it (leak)".into(),
                ),
                (false, Some(o)) => {
                    let o = o.clone();
                    self.err(
                        page_place(pno),
                        format!("used by {o} but free in the metadata bitmap"),
                    )
                }
                _ => {}
            }
        }
        self.report.summary.meta_pages_used = self.meta_owner.len() as u64;
        for d in 0..sb.max_domains {
            for page in 0..sb.domain_pages {
                let Some(set) = bit_of(&mut self.view, sb.dbitmap_of(d), page) else {
                    return;
                };
                // Page 0 of every domain is reserved and always marked in use.
                let owner = self.data_owner.get(&(d as u16, page)).copied();
                let used = page == 0 || owner.is_some();
                let place = || format!("domain {d} data page {page}");
                if set && !used {
                    self.err(
                        place(),
                        "marked in use in the data bitmap, but no file refers to it (leak)".into(),
                    );
                } else if !set && used {
                    let why = match owner {
                        Some(ino) => format!("used by inode {ino} but free in the data bitmap"),
                        None => "reserved, but free in the data bitmap".into(),
                    };
                    self.err(place(), why);
                }
            }
        }
        self.report.summary.data_pages_used = self.data_owner.len() as u64;
    }
}

/// Checks a volume's metadata space. A foreign volume or a damaged superblock is an
/// `Err`; everything else is reported as findings.
pub fn fsck<R: MediaRead + ?Sized>(mem: &mut R) -> Result<Report> {
    let sb = Superblock::read(mem)?;
    let mut report = Report::default();
    // The log keeps its last transaction after commit (pmlab-tx's redo log is not
    // cleared), so a valid, applied log is the normal state and no finding.
    match redo::inspect(mem, &sb) {
        Ok((LogState::Committed(n), _)) => report.findings.push(Finding {
            severity: Severity::Note,
            place: page_place(sb.log_first),
            what: format!("the redo log holds a committed transaction of {n} pages not yet all in place; the service replays it when it starts"),
        }),
        Ok((LogState::Torn, _)) => report.findings.push(Finding {
            severity: Severity::Note,
            place: page_place(sb.log_first),
            what: "the redo log holds an incomplete commit (its checksum fails); the service ignores it and the next commit overwrites it".into(),
        }),
        Ok((LogState::Empty | LogState::Applied(_), _)) => {}
        // A log that is not one, or one that verifies yet would replay something other
        // than sealed metadata pages: the service refuses to start on it.
        Err(crate::error::FsError::Corrupt { what, at, why }) => report.findings.push(Finding {
            severity: Severity::Error,
            place: page_place(at.page),
            what: format!("{what} (byte {:#x}): {why}; the service will not start", at.page * PAGE + at.offset),
        }),
        Err(e) => return Err(e),
    }
    let mut c = Checker {
        view: MediaView::with_sb(mem, sb),
        sb,
        report,
        meta_owner: BTreeMap::new(),
        data_owner: BTreeMap::new(),
        refs: HashMap::new(),
        dirs_seen: BTreeSet::new(),
        domains: Vec::new(),
    };
    c.fixed_pages();
    match domain::read_table(&mut c.view) {
        Ok(t) => c.domains = t,
        Err(e) => c.corrupt(e),
    }
    c.report.summary.domains = c.domains.iter().flatten().count() as u64;
    match c.view.inode(ROOT_INO) {
        Ok(root) if root.kind == Kind::Dir => {
            c.dirs_seen.insert(ROOT_INO);
            c.walk_dir(ROOT_INO, &root, "/");
        }
        Ok(root) => c.err(
            format!("inode {ROOT_INO}"),
            format!("the root is a {:?}, not a directory", root.kind),
        ),
        Err(e) => c.corrupt(e),
    }
    c.inode_scan();
    c.bitmaps();
    // A damaged page is found by every walk that reads it; report it once.
    c.report.findings.dedup();
    Ok(c.report)
}

/// Checks the volume directory at `dir`: its metadata space, and that every domain in
/// use has a data space of the right size.
pub fn fsck_volume(dir: &std::path::Path) -> Result<Report> {
    let (_f, mut m) = crate::volume::open_meta_ro(dir)?;
    let mut report = fsck(&mut m)?;
    let sb = Superblock::read(&mut m)?;
    let mut view = MediaView::with_sb(&mut m, sb);
    if let Ok(table) = domain::read_table(&mut view) {
        for (d, e) in table.iter().enumerate() {
            if e.is_none() {
                continue;
            }
            let p = crate::volume::data_path(dir, d as u16);
            let want = crate::volume::space_file_len(sb.domain_pages);
            match std::fs::metadata(&p) {
                Ok(md) if md.len() == want => {}
                Ok(md) => report.findings.push(Finding {
                    severity: Severity::Error,
                    place: p.display().to_string(),
                    what: format!(
                        "domain {d}'s data space holds {} bytes, expected {want}",
                        md.len()
                    ),
                }),
                Err(e) => report.findings.push(Finding {
                    severity: Severity::Error,
                    place: p.display().to_string(),
                    what: format!("domain {d}'s data space: {e}"),
                }),
            }
        }
    }
    Ok(report)
}

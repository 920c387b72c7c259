//! Seeded random batches of valid metadata operations (PXFS's and KVFS's), and the model
//! of what they do.
//!
//! The workload keeps its own model of the namespace (names, link counts, sizes, page
//! mappings, free inodes and free data pages) and draws every operation so that it is
//! valid against the model: the service must accept every batch, and the volume after
//! each commit must equal the model. The model's snapshots are then the oracle's
//! states. Limits keep the volume's metadata pool (one page per directory, roughly one
//! per name, one per radix index page) and the redo log (pages one batch may change)
//! from filling: an out-of-space rejection would test nothing about crashes.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::snapshot::{Entry, Snapshot};
use pmlab_fs::inode::Kind;
use pmlab_fs::journal::Op;
use pmlab_fs::layout::ROOT_INO;
use pmlab_fs::media::PAGE;

/// Permission bits of new files, one permission domain each (domain `i` for `MODES[i]`).
pub const FILE_MODES: [u32; 2] = [0o644, 0o600];
/// Permission bits of new directories.
pub const DIR_MODE: u32 = 0o755;
/// Most names, directories and files together (bounds the metadata pool in use).
const MAX_OBJECTS: usize = 48;
/// Most directories besides the root.
const MAX_DIRS: usize = 6;
/// Largest file, in pages (keeps radix trees at height 1).
const MAX_FILE_PAGES: u64 = 12;

#[derive(Clone, Debug)]
struct Node {
    kind: Kind,
    nlink: u32,
    size: u64,
    mode: u32,
    domain: u16,
    /// Files: file page index -> data page.
    /// KVFS objects: 0 -> the first page of the object's extent.
    pages: BTreeMap<u64, u64>,
    /// Directories: name -> inode.
    children: BTreeMap<String, u64>,
    /// Directories: the directory holding the name.
    parent: u64,
}

impl Node {
    fn dir(mode: u32, parent: u64) -> Node {
        Node {
            kind: Kind::Dir,
            nlink: 1,
            size: 0,
            mode,
            domain: 0,
            pages: BTreeMap::new(),
            children: BTreeMap::new(),
            parent,
        }
    }
}

/// The workload's model of the volume and its generator of batches.
pub struct Workload {
    nodes: BTreeMap<u64, Node>,
    free_inodes: BTreeSet<u64>,
    /// Free data pages of each domain.
    free_pages: Vec<BTreeSet<u64>>,
    domains: Vec<u16>,
    /// Pages of a KVFS object's extent.
    kv_pages: u64,
    next_name: u64,
}

/// The kinds of operation the workload draws, for its statistics.
pub const OP_NAMES: [&str; 11] = [
    "create",
    "mkdir",
    "extend",
    "truncate",
    "rename",
    "link",
    "unlink",
    "rmdir",
    "kv-put",
    "kv-erase",
    "rename-over",
];
/// Relative odds of each kind in [`OP_NAMES`]: files are created, written and removed
/// more often than directories, as in the metadata mix of file-system benchmarks; KVFS
/// puts (a new object or a new value for one) and erases are drawn like file writes
/// and unlinks; a rename over an existing file (the atomic replace applications rely
/// on) as often as a plain one.
const OP_WEIGHTS: [u32; 11] = [4, 1, 4, 1, 2, 1, 2, 1, 3, 2, 2];

impl Workload {
    /// A model of an empty volume with `inodes` inodes, `domain_pages` data pages per
    /// domain, KVFS objects of `kv_pages` pages, and the domains `domains[i]` holding
    /// files of mode `FILE_MODES[i]`.
    pub fn new(inodes: u64, domain_pages: u64, kv_pages: u64, domains: [u16; 2]) -> Workload {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT_INO, Node::dir(DIR_MODE, ROOT_INO));
        Workload {
            nodes,
            free_inodes: (ROOT_INO + 1..inodes).collect(),
            free_pages: domains
                .iter()
                .map(|_| (1..domain_pages).collect())
                .collect(),
            domains: domains.to_vec(),
            kv_pages,
            next_name: 0,
        }
    }

    /// What the volume holds now, according to the model.
    pub fn snapshot(&self) -> Snapshot {
        let mut out = Snapshot::new();
        let mut stack = vec![("/".to_string(), ROOT_INO)];
        while let Some((path, ino)) = stack.pop() {
            let n = &self.nodes[&ino];
            for (name, child) in &n.children {
                let cpath = if path == "/" {
                    format!("/{name}")
                } else {
                    format!("{path}/{name}")
                };
                stack.push((cpath, *child));
            }
            out.insert(
                path,
                Entry {
                    ino,
                    kind: n.kind,
                    nlink: n.nlink,
                    size: n.size,
                    mode: n.mode,
                    domain: n.domain,
                    pages: n.pages.iter().map(|(i, p)| (*i, *p)).collect(),
                },
            );
        }
        out
    }

    /// Draws a batch of 1..=`max_ops` operations, updating the model as the service
    /// will. Returns the batch and, per operation, its index in [`OP_NAMES`].
    pub fn batch(&mut self, rng: &mut Xoshiro256PlusPlus, max_ops: usize) -> (Vec<Op>, Vec<usize>) {
        let n = rng.gen_range(1..=max_ops.max(1));
        let mut ops = Vec::with_capacity(n);
        let mut kinds = Vec::with_capacity(n);
        while ops.len() < n {
            let mut x = rng.gen_range(0..OP_WEIGHTS.iter().sum::<u32>());
            let kind = OP_WEIGHTS
                .iter()
                .position(|w| {
                    let hit = x < *w;
                    x = x.saturating_sub(*w);
                    hit
                })
                .unwrap_or(0);
            let drawn = match kind {
                0 => self.create(rng, false),
                1 => self.create(rng, true),
                2 => self.extend(rng),
                3 => self.truncate(rng),
                4 => self.rename(rng),
                5 => self.link(rng),
                6 => self.unlink(rng),
                7 => self.rmdir(rng),
                8 => self.kv_put(rng),
                9 => self.kv_erase(rng),
                _ => self.rename_over(rng),
            };
            // An operation with nothing to act on (no file to unlink yet) is redrawn.
            if let Some(mut more) = drawn {
                kinds.extend(std::iter::repeat_n(kind, more.len()));
                ops.append(&mut more);
            }
        }
        (ops, kinds)
    }

    fn objects(&self) -> usize {
        self.nodes.values().map(|n| 1 + n.children.len()).sum()
    }

    fn pick<T: Clone>(rng: &mut Xoshiro256PlusPlus, v: &[T]) -> Option<T> {
        (!v.is_empty()).then(|| v[rng.gen_range(0..v.len())].clone())
    }

    fn dirs(&self) -> Vec<u64> {
        self.of_kind(Kind::Dir)
    }

    fn of_kind(&self, kind: Kind) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.kind == kind)
            .map(|(i, _)| *i)
            .collect()
    }

    /// Every (directory, name, inode) naming an object of `kind`.
    fn names(&self, kind: Kind) -> Vec<(u64, String, u64)> {
        let mut out = Vec::new();
        for (d, n) in &self.nodes {
            for (name, c) in &n.children {
                if self.nodes[c].kind == kind {
                    out.push((*d, name.clone(), *c));
                }
            }
        }
        out
    }

    fn fresh_name(&mut self, prefix: char) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    fn add_name(&mut self, dir: u64, name: String, ino: u64) {
        let d = self.nodes.get_mut(&dir).expect("directory in the model");
        d.children.insert(name, ino);
        d.size += 1;
    }

    fn drop_name(&mut self, dir: u64, name: &str) {
        let d = self.nodes.get_mut(&dir).expect("directory in the model");
        d.children.remove(name);
        d.size -= 1;
    }

    fn create(&mut self, rng: &mut Xoshiro256PlusPlus, dir: bool) -> Option<Vec<Op>> {
        if self.objects() + 2 > MAX_OBJECTS || (dir && self.dirs().len() > MAX_DIRS) {
            return None;
        }
        let parent = Self::pick(rng, &self.dirs())?;
        let ino = *self.free_inodes.iter().next()?;
        self.free_inodes.remove(&ino);
        let name = self.fresh_name(if dir { 'd' } else { 'f' });
        let (kind, mode, d) = if dir {
            (Kind::Dir, DIR_MODE, 0)
        } else {
            let d = rng.gen_range(0..self.domains.len());
            (Kind::File, FILE_MODES[d], d)
        };
        let node = if dir {
            Node::dir(mode, parent)
        } else {
            Node {
                kind,
                domain: self.domains[d],
                ..Node::dir(mode, parent)
            }
        };
        self.nodes.insert(ino, node);
        self.add_name(parent, name.clone(), ino);
        Some(vec![Op::Create {
            parent,
            name,
            ino,
            kind,
            mode,
            domain: if dir { 0 } else { self.domains[d] },
        }])
    }

    /// The first run of `count` consecutive free pages of domain index `di`, searched
    /// from a random start.
    fn free_run(&self, rng: &mut Xoshiro256PlusPlus, di: usize, count: u64) -> Option<u64> {
        let free = &self.free_pages[di];
        let start = rng.gen_range(1..free.iter().next_back().copied().unwrap_or(1) + 1);
        free.range(start..)
            .chain(free.range(..start))
            .copied()
            .find(|p| (0..count).all(|k| free.contains(&(p + k))))
    }

    /// A KVFS put: a new object (create, its extent, its size) or a new value for an
    /// existing one (a fresh extent and size; the old extent goes back to the domain),
    /// as `Kvfs::put` journals them.
    fn kv_put(&mut self, rng: &mut Xoshiro256PlusPlus) -> Option<Vec<Op>> {
        let existing = Self::pick(rng, &self.of_kind(Kind::Kv)).filter(|_| rng.gen_bool(0.5));
        let di = match existing {
            Some(ino) => self.domain_index(self.nodes[&ino].domain),
            None => rng.gen_range(0..self.domains.len()),
        };
        let page = self.free_run(rng, di, self.kv_pages)?;
        let mut ops = Vec::with_capacity(3);
        let ino = match existing {
            Some(ino) => ino,
            None => {
                if self.objects() + 2 > MAX_OBJECTS {
                    return None;
                }
                // KVFS keeps its objects in one flat directory: the root here, so the
                // directories below stay PXFS's (and can empty and go).
                let parent = ROOT_INO;
                let ino = *self.free_inodes.iter().next()?;
                self.free_inodes.remove(&ino);
                let name = self.fresh_name('k');
                let mode = FILE_MODES[di];
                let domain = self.domains[di];
                self.nodes.insert(
                    ino,
                    Node {
                        kind: Kind::Kv,
                        domain,
                        ..Node::dir(mode, parent)
                    },
                );
                self.add_name(parent, name.clone(), ino);
                ops.push(Op::Create {
                    parent,
                    name,
                    ino,
                    kind: Kind::Kv,
                    mode,
                    domain,
                });
                ino
            }
        };
        let size = rng.gen_range(0..=self.kv_pages * PAGE);
        let node = self.nodes.get_mut(&ino).expect("in the model");
        let old = node.pages.insert(0, page);
        node.size = size;
        let n = self.kv_pages;
        self.free_pages[di].extend(old.into_iter().flat_map(|o| o..o + n));
        for k in 0..n {
            self.free_pages[di].remove(&(page + k));
        }
        ops.push(Op::MapPages {
            ino,
            index: 0,
            page,
            count: n,
        });
        ops.push(Op::SetSize { ino, size });
        Some(ops)
    }

    /// A KVFS erase: the object's only name goes, and with it the inode and extent.
    fn kv_erase(&mut self, rng: &mut Xoshiro256PlusPlus) -> Option<Vec<Op>> {
        let (parent, name, ino) = Self::pick(rng, &self.names(Kind::Kv))?;
        self.drop_name(parent, &name);
        let node = self.nodes.remove(&ino).expect("named");
        let di = self.domain_index(node.domain);
        let n = self.kv_pages;
        self.free_pages[di].extend(node.pages.values().flat_map(|&p| p..p + n));
        self.free_inodes.insert(ino);
        Some(vec![Op::Unlink { parent, name, ino }])
    }

    fn domain_index(&self, domain: u16) -> usize {
        self.domains.iter().position(|d| *d == domain).unwrap_or(0)
    }

    /// A write that extends a file (or rewrites its last pages into fresh ones): maps a
    /// run of free data pages, then sets the new size.
    fn extend(&mut self, rng: &mut Xoshiro256PlusPlus) -> Option<Vec<Op>> {
        let ino = Self::pick(rng, &self.of_kind(Kind::File))?;
        let n = &self.nodes[&ino];
        let mapped_end = n.size.div_ceil(PAGE);
        let index = if mapped_end > 0 && rng.gen_bool(0.25) {
            mapped_end - 1
        } else {
            mapped_end
        };
        let count = rng.gen_range(1..=3u64);
        if index + count > MAX_FILE_PAGES {
            return None;
        }
        let di = self.domain_index(n.domain);
        let page = self.free_run(rng, di, count)?;
        let size = (index + count) * PAGE - rng.gen_range(0..PAGE);
        let size = size.max(n.size);
        let mut freed = Vec::new();
        let node = self.nodes.get_mut(&ino).expect("picked from the model");
        for k in 0..count {
            if let Some(old) = node.pages.insert(index + k, page + k) {
                freed.push(old);
            }
        }
        node.size = size;
        for k in 0..count {
            self.free_pages[di].remove(&(page + k));
        }
        self.free_pages[di].extend(freed);
        Some(vec![
            Op::MapPages {
                ino,
                index,
                page,
                count,
            },
            Op::SetSize { ino, size },
        ])
    }

    /// Shrinks a file: pages wholly beyond the new size go back to the domain.
    fn truncate(&mut self, rng: &mut Xoshiro256PlusPlus) -> Option<Vec<Op>> {
        let ino = Self::pick(rng, &self.of_kind(Kind::File))?;
        let node = self.nodes.get_mut(&ino).expect("picked from the model");
        let size = rng.gen_range(0..=node.size);
        let keep = size.div_ceil(PAGE);
        let gone: Vec<u64> = node.pages.range(keep..).map(|(_, p)| *p).collect();
        node.pages.retain(|i, _| *i < keep);
        node.size = size;
        let domain = node.domain;
        let di = self.domain_index(domain);
        self.free_pages[di].extend(gone);
        Some(vec![Op::SetSize { ino, size }])
    }

    fn rename(&mut self, rng: &mut Xoshiro256PlusPlus) -> Option<Vec<Op>> {
        let kind = if rng.gen_bool(0.3) {
            Kind::Dir
        } else {
            Kind::File
        };
        let (from_parent, from_name, ino) = Self::pick(rng, &self.names(kind))?;
        // A directory may not move below itself: targets are directories whose parent
        // chain does not pass through it.
        let targets: Vec<u64> = self
            .dirs()
            .into_iter()
            .filter(|d| !self.below(*d, ino))
            .collect();
        let to_parent = Self::pick(rng, &targets)?;
        let to_name = self.fresh_name(if kind == Kind::Dir { 'd' } else { 'f' });
        self.drop_name(from_parent, &from_name);
        self.add_name(to_parent, to_name.clone(), ino);
        if kind == Kind::Dir {
            self.nodes.get_mut(&ino).expect("named").parent = to_parent;
        }
        Some(vec![Op::Rename {
            from_parent,
            from_name,
            to_parent,
            to_name,
            ino,
            replace: 0,
        }])
    }

    /// Renames a file over another file's name: the target loses that name (and is
    /// freed with its pages if it was its last) in the same operation.
    fn rename_over(&mut self, rng: &mut Xoshiro256PlusPlus) -> Option<Vec<Op>> {
        let files = self.names(Kind::File);
        let (from_parent, from_name, ino) = Self::pick(rng, &files)?;
        let targets: Vec<(u64, String, u64)> =
            files.into_iter().filter(|(_, _, x)| *x != ino).collect();
        let (to_parent, to_name, replace) = Self::pick(rng, &targets)?;
        self.drop_name(to_parent, &to_name);
        let old = self.nodes.get_mut(&replace).expect("named");
        old.nlink -= 1;
        if old.nlink == 0 {
            let old = self.nodes.remove(&replace).expect("named");
            let di = self.domain_index(old.domain);
            self.free_pages[di].extend(old.pages.values());
            self.free_inodes.insert(replace);
        }
        self.drop_name(from_parent, &from_name);
        self.add_name(to_parent, to_name.clone(), ino);
        Some(vec![Op::Rename {
            from_parent,
            from_name,
            to_parent,
            to_name,
            ino,
            replace,
        }])
    }

    /// Whether directory `d` is `ino` or lies below it.
    fn below(&self, mut d: u64, ino: u64) -> bool {
        for _ in 0..=self.nodes.len() {
            if d == ino {
                return true;
            }
            if d == ROOT_INO {
                return false;
            }
            d = self.nodes[&d].parent;
        }
        true
    }

    fn link(&mut self, rng: &mut Xoshiro256PlusPlus) -> Option<Vec<Op>> {
        if self.objects() + 1 > MAX_OBJECTS {
            return None;
        }
        let ino = Self::pick(rng, &self.of_kind(Kind::File))?;
        let parent = Self::pick(rng, &self.dirs())?;
        let name = self.fresh_name('l');
        self.nodes.get_mut(&ino).expect("picked").nlink += 1;
        self.add_name(parent, name.clone(), ino);
        Some(vec![Op::Link { parent, name, ino }])
    }

    fn unlink(&mut self, rng: &mut Xoshiro256PlusPlus) -> Option<Vec<Op>> {
        let (parent, name, ino) = Self::pick(rng, &self.names(Kind::File))?;
        self.drop_name(parent, &name);
        let node = self.nodes.get_mut(&ino).expect("named");
        node.nlink -= 1;
        if node.nlink == 0 {
            // Nobody holds it open: the service frees the inode and its data pages.
            let node = self.nodes.remove(&ino).expect("named");
            let di = self.domain_index(node.domain);
            self.free_pages[di].extend(node.pages.values());
            self.free_inodes.insert(ino);
        }
        Some(vec![Op::Unlink { parent, name, ino }])
    }

    fn rmdir(&mut self, rng: &mut Xoshiro256PlusPlus) -> Option<Vec<Op>> {
        let empty: Vec<(u64, String, u64)> = self
            .names(Kind::Dir)
            .into_iter()
            .filter(|(_, _, d)| self.nodes[d].children.is_empty())
            .collect();
        let (parent, name, ino) = Self::pick(rng, &empty)?;
        self.drop_name(parent, &name);
        self.nodes.remove(&ino);
        self.free_inodes.insert(ino);
        Some(vec![Op::Rmdir { parent, name, ino }])
    }
}

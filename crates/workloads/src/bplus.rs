//! The B+-tree engine the B+-tree workload and the table share: 4 KiB nodes of
//! fixed-size keys (compared as bytes) and values; values only in the leaves, which are
//! chained left to right; internal nodes route with separator keys (child `i` holds
//! the keys in `[sep[i-1], sep[i])`). Insert splits a full node in two halves and
//! pushes a separator up; delete borrows from a sibling or merges with it when a node
//! falls below half full. Each node changed is stored as the byte runs that differ.
//!
//! # Node layout (4096 bytes)
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0 | 4 | `leaf` (1) or internal (0) |
//! | 4 | 4 | `count`: keys held |
//! | 8 | 8 | `next`: the next leaf (0 for the last, and for internal nodes) |
//! | 16 | cap × key | keys |
//! | … | cap × value, or (cap + 1) × 8 | values (leaf) or children (internal) |

use pmlab_spine::Addr;
use pmlab_tx::{Protocol, TxMemory};

use crate::error::{CheckError, WorkloadError, read_failed};
use crate::map::store_changes;
use crate::slab::{Marks, Slab};

mod edit;

/// Bytes per node.
pub(crate) const NODE: u64 = 4096;
const HEAD: usize = 16;

/// Key and value sizes and node capacities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Bytes per key.
    pub key: usize,
    /// Bytes per value.
    pub val: usize,
    /// Pairs per leaf.
    pub leaf_cap: usize,
    /// Keys per internal node.
    pub int_cap: usize,
}

impl Shape {
    fn cap(&self, leaf: bool) -> usize {
        if leaf { self.leaf_cap } else { self.int_cap }
    }
    fn min(&self, leaf: bool) -> usize {
        self.cap(leaf) / 2
    }
    /// Whether both kinds of node fit 4 KiB.
    pub fn fits(&self) -> bool {
        HEAD + self.leaf_cap * (self.key + self.val) <= NODE as usize
            && HEAD + self.int_cap * (self.key + 8) + 8 <= NODE as usize
            && self.leaf_cap >= 3
            && self.int_cap >= 3
    }
    /// Nodes for `keys` keys with every node at least half full, plus the internal
    /// nodes above and some slack.
    pub fn capacity(&self, keys: u64) -> u64 {
        let leaves = keys.div_ceil(self.min(true) as u64) + 1;
        leaves + leaves.div_ceil(self.min(false) as u64) * 2 + 8
    }
}

/// A node's bytes as read, and as changed.
struct Img {
    addr: Addr,
    b: Vec<u8>,
    orig: Vec<u8>,
    s: Shape,
}

impl Img {
    fn load<T: TxMemory>(m: &mut T, s: Shape, addr: Addr) -> Result<Img, WorkloadError> {
        let mut b = vec![0u8; NODE as usize];
        m.tx_read(addr, &mut b)?;
        Ok(Img {
            addr,
            orig: b.clone(),
            b,
            s,
        })
    }

    fn store<T: TxMemory>(&mut self, m: &mut T) -> Result<(), WorkloadError> {
        store_changes(m, self.addr, &self.orig, &self.b)?;
        self.orig.copy_from_slice(&self.b);
        Ok(())
    }

    fn leaf(&self) -> bool {
        self.b[0] == 1
    }
    fn count(&self) -> usize {
        u32::from_le_bytes(self.b[4..8].try_into().expect("4")) as usize
    }
    fn set_count(&mut self, n: usize) {
        self.b[4..8].copy_from_slice(&(n as u32).to_le_bytes());
    }
    fn next(&self) -> u64 {
        u64::from_le_bytes(self.b[8..16].try_into().expect("8"))
    }
    fn set_next(&mut self, n: u64) {
        self.b[8..16].copy_from_slice(&n.to_le_bytes());
    }
    fn key(&self, i: usize) -> &[u8] {
        let o = HEAD + i * self.s.key;
        &self.b[o..o + self.s.key]
    }
    fn keys(&self, from: usize, to: usize) -> &[u8] {
        &self.b[HEAD + from * self.s.key..HEAD + to * self.s.key]
    }
    fn set_keys(&mut self, at: usize, ks: &[u8]) {
        let o = HEAD + at * self.s.key;
        self.b[o..o + ks.len()].copy_from_slice(ks);
    }
    /// Offset of slot `i` of the value (leaf) or child (internal) array.
    fn slot(&self, i: usize) -> usize {
        let leaf = self.leaf();
        HEAD + self.s.cap(leaf) * self.s.key + i * if leaf { self.s.val } else { 8 }
    }
    fn slot_len(&self) -> usize {
        if self.leaf() { self.s.val } else { 8 }
    }
    fn slots(&self, from: usize, to: usize) -> &[u8] {
        &self.b[self.slot(from)..self.slot(to)]
    }
    fn set_slots(&mut self, at: usize, vs: &[u8]) {
        let o = self.slot(at);
        self.b[o..o + vs.len()].copy_from_slice(vs);
    }
    fn kid(&self, i: usize) -> u64 {
        let o = self.slot(i);
        u64::from_le_bytes(self.b[o..o + 8].try_into().expect("8"))
    }
    /// The first index whose key is at least `k`.
    fn lower_bound(&self, k: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) < k {
                lo = mid + 1
            } else {
                hi = mid
            }
        }
        lo
    }
    /// The child of an internal node that routes `k`: the number of separators <= k.
    fn route(&self, k: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) <= k {
                lo = mid + 1
            } else {
                hi = mid
            }
        }
        lo
    }
    /// Replaces the contents with `n` keys and the slots given (n values, or n + 1
    /// children), zeroing what lies beyond.
    fn fill(&mut self, leaf: bool, keys: &[u8], slots: &[u8]) {
        let s = self.s;
        self.b[0..4].copy_from_slice(&u32::from(leaf).to_le_bytes());
        let n = keys.len() / s.key;
        self.set_count(n);
        let kend = HEAD + s.cap(leaf) * s.key;
        self.b[HEAD..kend].fill(0);
        self.b[HEAD..HEAD + keys.len()].copy_from_slice(keys);
        let vstart = kend;
        let vend = vstart
            + if leaf {
                s.leaf_cap * s.val
            } else {
                (s.int_cap + 1) * 8
            };
        self.b[vstart..vend].fill(0);
        self.b[vstart..vstart + slots.len()].copy_from_slice(slots);
        self.b[vend..].fill(0);
        if !leaf {
            self.set_next(0);
        }
    }
}

/// How a descent reads the nodes it only searches (the internal nodes on the way, and
/// the leaf of a lookup). A node that is changed is read whole either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeReads {
    /// Every node read whole (4 KiB, 64 lines): the default, which the other papers'
    /// reproductions use.
    #[default]
    Whole,
    /// A searched node read as a search in C would touch it: its 16-byte head, the
    /// keys a binary search over the sorted keys probes, and the one child pointer or
    /// value it takes — through the transaction interface, so every read is counted.
    /// Paper 001 does not describe its B+-tree beyond "each 4KB node contains 200
    /// key(8B)-value(4B) pairs"; this is what its C code would presumably do.
    Search,
    /// [`NodeReads::Search`], and a leaf an insert or delete changes edited in place:
    /// the search finds the index, then only the keys and values the change shifts are
    /// read and written back one place over (with the new pair, or zeros where the
    /// last pair was, and the count) — as a C B+-tree edits a sorted leaf with
    /// `memmove`. A leaf that splits or falls below half full is then read whole, as
    /// before. Not the default: paper 001 does not say how its B+-tree edits a node.
    Edit,
}

/// A B+-tree whose root and count live in two header words, its nodes in `slab`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tree {
    pub shape: Shape,
    pub root: Addr,
    pub count: Addr,
    pub slab: Slab,
    /// How searched nodes are read.
    pub reads: NodeReads,
}

/// A node searched in place ([`NodeReads::Search`]): only its head read so far.
struct Probe {
    addr: Addr,
    leaf: bool,
    count: usize,
    s: Shape,
}

impl Probe {
    fn head<T: TxMemory>(m: &mut T, s: Shape, addr: Addr) -> Result<Probe, WorkloadError> {
        let mut h = [0u8; HEAD];
        m.tx_read(addr, &mut h)?;
        Ok(Probe {
            addr,
            leaf: h[0] == 1,
            count: u32::from_le_bytes(h[4..8].try_into().expect("4")) as usize,
            s,
        })
    }

    fn key<T: TxMemory>(&self, m: &mut T, i: usize, out: &mut [u8]) -> Result<(), WorkloadError> {
        let at = self.addr + (HEAD + i * self.s.key) as u64;
        Ok(m.tx_read(at, out)?)
    }

    /// The number of keys below `k` (`or_equal`: at most `k`), reading only the keys
    /// probed: the same index as [`Img::lower_bound`] and [`Img::route`].
    fn search<T: TxMemory>(
        &self,
        m: &mut T,
        k: &[u8],
        or_equal: bool,
    ) -> Result<usize, WorkloadError> {
        let mut key = vec![0u8; self.s.key];
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            self.key(m, mid, &mut key)?;
            if key.as_slice() < k || (or_equal && key.as_slice() == k) {
                lo = mid + 1
            } else {
                hi = mid
            }
        }
        Ok(lo)
    }

    /// Where slot `i` (value or child) lies.
    fn slot(&self, i: usize) -> Addr {
        let (cap, len) = if self.leaf {
            (self.s.leaf_cap, self.s.val)
        } else {
            (self.s.int_cap, 8)
        };
        self.addr + (HEAD + cap * self.s.key + i * len) as u64
    }
}

/// Where a descent went: each internal node and the child index taken.
type Path = Vec<(Addr, usize)>;

impl Tree {
    fn load<T: TxMemory>(&self, m: &mut T, a: Addr) -> Result<Img, WorkloadError> {
        Img::load(m, self.shape, a)
    }

    /// Descends to the leaf that holds (or would hold) `k`.
    fn descend<T: TxMemory>(
        &self,
        m: &mut T,
        k: &[u8],
    ) -> Result<Option<(Img, Path)>, WorkloadError> {
        let mut at = m.tx_read_u64(self.root)?;
        if at == 0 {
            return Ok(None);
        }
        let mut path = Vec::new();
        loop {
            if self.reads != NodeReads::Whole {
                let probe = Probe::head(m, self.shape, at)?;
                if !probe.leaf {
                    let i = probe.search(m, k, true)?;
                    path.push((at, i));
                    at = m.tx_read_u64(probe.slot(i))?;
                    continue;
                }
            }
            let node = self.load(m, at)?;
            if node.leaf() {
                return Ok(Some((node, path)));
            }
            let i = node.route(k);
            path.push((at, i));
            at = node.kid(i);
        }
    }

    /// Under [`NodeReads::Search`]: the leaf that holds (or would hold) `k`, searched
    /// in place, and the index of the first key at least `k` in it, if it is `k`.
    fn find<T: TxMemory>(
        &self,
        m: &mut T,
        k: &[u8],
    ) -> Result<Option<(Probe, usize)>, WorkloadError> {
        let mut at = m.tx_read_u64(self.root)?;
        if at == 0 {
            return Ok(None);
        }
        loop {
            let probe = Probe::head(m, self.shape, at)?;
            if probe.leaf {
                let i = probe.search(m, k, false)?;
                if i == probe.count {
                    return Ok(None);
                }
                let mut key = vec![0u8; self.shape.key];
                probe.key(m, i, &mut key)?;
                return Ok((key.as_slice() == k).then_some((probe, i)));
            }
            let i = probe.search(m, k, true)?;
            at = m.tx_read_u64(probe.slot(i))?;
        }
    }

    /// The value of `k`, into `out`; false if absent.
    pub fn get<T: TxMemory>(
        &self,
        m: &mut T,
        k: &[u8],
        out: &mut [u8],
    ) -> Result<bool, WorkloadError> {
        if self.reads != NodeReads::Whole {
            let Some((leaf, i)) = self.find(m, k)? else {
                return Ok(false);
            };
            m.tx_read(leaf.slot(i), out)?;
            return Ok(true);
        }
        let Some((leaf, _)) = self.descend(m, k)? else {
            return Ok(false);
        };
        let i = leaf.lower_bound(k);
        if i < leaf.count() && leaf.key(i) == k {
            out.copy_from_slice(leaf.slots(i, i + 1));
            return Ok(true);
        }
        Ok(false)
    }

    /// Replaces the value of `k` (present).
    pub fn update<T: TxMemory>(&self, m: &mut T, k: &[u8], v: &[u8]) -> Result<(), WorkloadError> {
        if self.reads != NodeReads::Whole {
            // Only the value changes: stored where the search found it.
            if let Some((leaf, i)) = self.find(m, k)? {
                m.tx_write(leaf.slot(i), v)?;
            }
            return Ok(());
        }
        if let Some((mut leaf, _)) = self.descend(m, k)? {
            let i = leaf.lower_bound(k);
            if i < leaf.count() && leaf.key(i) == k {
                leaf.set_slots(i, v);
                leaf.store(m)?;
            }
        }
        Ok(())
    }

    fn add_count<T: TxMemory>(&self, m: &mut T, d: u64) -> Result<(), WorkloadError> {
        let c = m.tx_read_u64(self.count)?;
        Ok(m.tx_write_u64(self.count, c.wrapping_add(d))?)
    }

    fn new_node<T: TxMemory>(&self, m: &mut T) -> Result<Img, WorkloadError> {
        let a = self.slab.alloc(m)?;
        self.load(m, a)
    }

    /// Inserts `k` (absent) with `v`.
    pub fn insert<T: TxMemory>(&self, m: &mut T, k: &[u8], v: &[u8]) -> Result<(), WorkloadError> {
        self.add_count(m, 1)?;
        if self.reads == NodeReads::Edit {
            if let Some((probe, path)) = self.find_leaf(m, k)? {
                if probe.count < self.shape.leaf_cap {
                    return self.insert_in_place(m, &probe, k, v);
                }
                let leaf = self.load(m, probe.addr)?;
                return self.insert_into(m, leaf, path, k, v);
            }
        }
        let Some((leaf, path)) = self.descend(m, k)? else {
            let mut leaf = self.new_node(m)?;
            leaf.fill(true, k, v);
            leaf.set_next(0);
            leaf.store(m)?;
            return Ok(m.tx_write_u64(self.root, leaf.addr)?);
        };
        self.insert_into(m, leaf, path, k, v)
    }

    /// Inserts `k` with `v` into `leaf` (read whole), reached by `path`.
    fn insert_into<T: TxMemory>(
        &self,
        m: &mut T,
        mut leaf: Img,
        mut path: Path,
        k: &[u8],
        v: &[u8],
    ) -> Result<(), WorkloadError> {
        let i = leaf.lower_bound(k);
        let n = leaf.count();
        let mut keys = leaf.keys(0, n).to_vec();
        let mut vals = leaf.slots(0, n).to_vec();
        keys.splice(i * self.shape.key..i * self.shape.key, k.iter().copied());
        vals.splice(i * self.shape.val..i * self.shape.val, v.iter().copied());
        if n < self.shape.leaf_cap {
            leaf.fill(true, &keys, &vals);
            return leaf.store(m);
        }
        // Split the leaf: the left keeps the first half, the right leaf the rest.
        let h = n.div_ceil(2);
        let mut right = self.new_node(m)?;
        right.fill(
            true,
            &keys[h * self.shape.key..],
            &vals[h * self.shape.val..],
        );
        right.set_next(leaf.next());
        let next = leaf.next();
        leaf.fill(
            true,
            &keys[..h * self.shape.key],
            &vals[..h * self.shape.val],
        );
        leaf.set_next(right.addr);
        debug_assert_ne!(next, right.addr);
        leaf.store(m)?;
        right.store(m)?;
        let sep = right.key(0).to_vec();
        self.push_up(m, &mut path, leaf.addr, sep, right.addr)
    }

    /// Inserts separator `sep` with right child `right` next to `left` in the parent
    /// on `path`, splitting internal nodes (and growing a new root) as needed.
    fn push_up<T: TxMemory>(
        &self,
        m: &mut T,
        path: &mut Path,
        mut left: Addr,
        mut sep: Vec<u8>,
        mut right: Addr,
    ) -> Result<(), WorkloadError> {
        let ks = self.shape.key;
        while let Some((pa, i)) = path.pop() {
            let mut p = self.load(m, pa)?;
            let n = p.count();
            let mut keys = p.keys(0, n).to_vec();
            let mut kids = p.slots(0, n + 1).to_vec();
            keys.splice(i * ks..i * ks, sep.iter().copied());
            kids.splice((i + 1) * 8..(i + 1) * 8, right.to_le_bytes());
            if n < self.shape.int_cap {
                p.fill(false, &keys, &kids);
                return p.store(m);
            }
            let h = n.div_ceil(2);
            let mut r = self.new_node(m)?;
            r.fill(false, &keys[(h + 1) * ks..], &kids[(h + 1) * 8..]);
            sep = keys[h * ks..(h + 1) * ks].to_vec();
            p.fill(false, &keys[..h * ks], &kids[..(h + 1) * 8]);
            p.store(m)?;
            r.store(m)?;
            (left, right) = (pa, r.addr);
        }
        let mut root = self.new_node(m)?;
        let mut kids = left.to_le_bytes().to_vec();
        kids.extend_from_slice(&right.to_le_bytes());
        root.fill(false, &sep, &kids);
        root.store(m)?;
        Ok(m.tx_write_u64(self.root, root.addr)?)
    }

    /// Removes `k` (present).
    pub fn remove<T: TxMemory>(&self, m: &mut T, k: &[u8]) -> Result<(), WorkloadError> {
        if self.reads == NodeReads::Edit {
            return self.remove_in_place(m, k);
        }
        let Some((mut leaf, mut path)) = self.descend(m, k)? else {
            return Ok(());
        };
        let i = leaf.lower_bound(k);
        if i >= leaf.count() || leaf.key(i) != k {
            return Ok(());
        }
        self.add_count(m, u64::MAX)?;
        let n = leaf.count();
        let (ks, vs) = (self.shape.key, self.shape.val);
        let mut keys = leaf.keys(0, n).to_vec();
        let mut vals = leaf.slots(0, n).to_vec();
        keys.drain(i * ks..(i + 1) * ks);
        vals.drain(i * vs..(i + 1) * vs);
        let next = leaf.next();
        leaf.fill(true, &keys, &vals);
        leaf.set_next(next);
        leaf.store(m)?;
        self.rebalance(m, leaf, &mut path)
    }

    /// Restores the occupancy of `node` (and its ancestors on `path`) after a removal.
    fn rebalance<T: TxMemory>(
        &self,
        m: &mut T,
        mut node: Img,
        path: &mut Path,
    ) -> Result<(), WorkloadError> {
        loop {
            let leaf = node.leaf();
            let Some((pa, i)) = path.pop() else {
                // The root: an empty leaf empties the tree; an internal root with one
                // child hands the root to it.
                if node.count() == 0 {
                    let child = if leaf { 0 } else { node.kid(0) };
                    m.tx_write_u64(self.root, child)?;
                    self.slab.free(m, node.addr)?;
                }
                return Ok(());
            };
            if node.count() >= self.shape.min(leaf) {
                return Ok(());
            }
            let mut parent = self.load(m, pa)?;
            if i > 0 {
                let mut l = self.load(m, parent.kid(i - 1))?;
                if l.count() > self.shape.min(leaf) {
                    return self.borrow(m, &mut parent, i - 1, &mut l, &mut node);
                }
            }
            if i < parent.count() {
                let mut r = self.load(m, parent.kid(i + 1))?;
                if r.count() > self.shape.min(leaf) {
                    return self.borrow(m, &mut parent, i, &mut node, &mut r);
                }
                self.merge(m, &mut parent, i, &mut node, r)?;
            } else {
                let mut l = self.load(m, parent.kid(i - 1))?;
                self.merge(m, &mut parent, i - 1, &mut l, node)?;
            }
            node = parent;
        }
    }

    /// The entries of `l`, separator `j` of `parent` (internal nodes only) and the
    /// entries of `r`, as one run of keys and slots.
    fn joined(&self, parent: &Img, j: usize, l: &Img, r: &Img) -> (Vec<u8>, Vec<u8>) {
        let (ln, rn) = (l.count(), r.count());
        let mut keys = l.keys(0, ln).to_vec();
        let mut slots;
        if l.leaf() {
            slots = l.slots(0, ln).to_vec();
            slots.extend_from_slice(r.slots(0, rn));
        } else {
            keys.extend_from_slice(parent.key(j));
            slots = l.slots(0, ln + 1).to_vec();
            slots.extend_from_slice(r.slots(0, rn + 1));
        }
        keys.extend_from_slice(r.keys(0, rn));
        (keys, slots)
    }

    /// Evens out siblings `l` and `r` (children `j` and `j + 1` of `parent`).
    fn borrow<T: TxMemory>(
        &self,
        m: &mut T,
        parent: &mut Img,
        j: usize,
        l: &mut Img,
        r: &mut Img,
    ) -> Result<(), WorkloadError> {
        let leaf = l.leaf();
        let (keys, slots) = self.joined(parent, j, l, r);
        let (ks, sl) = (self.shape.key, l.slot_len());
        let total = keys.len() / ks;
        let next = (l.next(), r.next());
        if leaf {
            let h = total / 2;
            l.fill(true, &keys[..h * ks], &slots[..h * sl]);
            r.fill(true, &keys[h * ks..], &slots[h * sl..]);
            l.set_next(next.0);
            r.set_next(next.1);
            parent.set_keys(j, r.key(0).to_vec().as_slice());
        } else {
            // `total` counts the separator that came down; one goes back up.
            let h = (total - 1) / 2;
            l.fill(false, &keys[..h * ks], &slots[..(h + 1) * 8]);
            r.fill(false, &keys[(h + 1) * ks..], &slots[(h + 1) * 8..]);
            parent.set_keys(j, &keys[h * ks..(h + 1) * ks]);
        }
        l.store(m)?;
        r.store(m)?;
        parent.store(m)
    }

    /// Merges `r` into `l` (children `j` and `j + 1` of `parent`) and drops separator
    /// `j` with its right child from `parent` (which is stored by the caller's loop).
    fn merge<T: TxMemory>(
        &self,
        m: &mut T,
        parent: &mut Img,
        j: usize,
        l: &mut Img,
        r: Img,
    ) -> Result<(), WorkloadError> {
        let (keys, slots) = self.joined(parent, j, l, &r);
        let next = r.next();
        l.fill(l.leaf(), &keys, &slots);
        if l.leaf() {
            l.set_next(next);
        }
        l.store(m)?;
        self.slab.free(m, r.addr)?;
        let (n, ks) = (parent.count(), self.shape.key);
        let mut pk = parent.keys(0, n).to_vec();
        let mut pc = parent.slots(0, n + 1).to_vec();
        pk.drain(j * ks..(j + 1) * ks);
        pc.drain((j + 1) * 8..(j + 2) * 8);
        parent.fill(false, &pk, &pc);
        parent.store(m)
    }

    /// Checks the tree (see the module documentation of each workload); `pair` is
    /// given each key and value in key order. Returns the pairs held.
    pub fn check<P: Protocol>(
        &self,
        p: &mut P,
        name: &'static str,
        mut pair: impl FnMut(&[u8], &[u8]),
    ) -> Result<u64, CheckError> {
        let rd = |p: &mut P, a: Addr| p.read_u64(a).map_err(|e| read_failed(name, a, e));
        let bump = rd(p, self.slab.state + 8)?.min(self.slab.cap);
        let root = rd(p, self.root)?;
        let mut walk = Walk {
            name,
            used: Marks::new(bump),
            held: 0,
            leaf_depth: None,
            prev_leaf: None,
            last_key: None,
        };
        let mut stack: Vec<Visit> = Vec::new();
        if root != 0 {
            stack.push(Visit {
                at: root,
                from: self.root,
                lo: None,
                hi: None,
                depth: 0,
            });
        }
        let mut b = vec![0u8; NODE as usize];
        while let Some(v) = stack.pop() {
            let node = self.visit(p, &mut walk, &v, bump, root, &mut b)?;
            if node.leaf() {
                walk.leaf(&node, &v, &mut pair)?;
            } else {
                push_children(&mut stack, &node, &v);
            }
        }
        walk.finish(self, p)?;
        Ok(walk.held)
    }

    /// Marks node `v.at` used (once), reads it and checks its occupancy and order.
    fn visit<P: Protocol>(
        &self,
        p: &mut P,
        walk: &mut Walk,
        v: &Visit,
        bump: u64,
        root: Addr,
        b: &mut [u8],
    ) -> Result<Img, CheckError> {
        let name = walk.name;
        let idx = self.slab.index(v.at, bump).ok_or_else(|| {
            CheckError::new(
                name,
                v.from,
                format!("link {:#x} is not an allocated node", v.at),
            )
        })?;
        if !walk.used.set(idx) {
            return Err(CheckError::new(name, v.at, "a node is reached twice"));
        }
        p.read(v.at, b).map_err(|e| read_failed(name, v.at, e))?;
        let node = Img {
            addr: v.at,
            orig: Vec::new(),
            b: b.to_vec(),
            s: self.shape,
        };
        walk.node(&node, v, v.at == root)?;
        Ok(node)
    }
}

/// Pushes an internal node's children right to left, so that leaves are visited in
/// key order.
fn push_children(stack: &mut Vec<Visit>, node: &Img, v: &Visit) {
    let n = node.count();
    for j in (0..=n).rev() {
        stack.push(Visit {
            at: node.kid(j),
            from: v.at + node.slot(j) as u64,
            lo: if j == 0 {
                v.lo.clone()
            } else {
                Some(node.key(j - 1).to_vec())
            },
            hi: if j == n {
                v.hi.clone()
            } else {
                Some(node.key(j).to_vec())
            },
            depth: v.depth + 1,
        });
    }
}

/// A node the checker is to visit: where, who links to it, the keys it must lie
/// within (`[lo, hi)`), and its depth.
struct Visit {
    at: Addr,
    from: Addr,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
    depth: u32,
}

/// What the checker has seen so far.
struct Walk {
    name: &'static str,
    used: Marks,
    held: u64,
    leaf_depth: Option<u32>,
    prev_leaf: Option<(Addr, u64)>,
    last_key: Option<Vec<u8>>,
}

impl Walk {
    /// Occupancy and key order of any node.
    fn node(&self, node: &Img, v: &Visit, is_root: bool) -> Result<(), CheckError> {
        let (flag, n, s) = (node.b[0], node.count(), node.s);
        let leaf = flag == 1;
        let min = if is_root { 1 } else { s.min(leaf) };
        if flag > 1 || n < min || n > s.cap(leaf) {
            return Err(CheckError::new(
                self.name,
                v.at,
                format!(
                    "{n} keys (allowed {min} to {}), leaf flag {flag}",
                    s.cap(leaf)
                ),
            ));
        }
        for j in 0..n {
            let k = node.key(j);
            let in_order = j == 0 || node.key(j - 1) < k;
            if !in_order
                || v.lo.as_deref().is_some_and(|l| k < l)
                || v.hi.as_deref().is_some_and(|h| k >= h)
            {
                return Err(CheckError::new(
                    self.name,
                    v.at,
                    format!("key {j} is out of order"),
                ));
            }
        }
        Ok(())
    }

    /// The end of the leaf chain, the count word, and the node pool's accounting.
    fn finish<P: Protocol>(&self, t: &Tree, p: &mut P) -> Result<(), CheckError> {
        let name = self.name;
        if let Some((pl, pnext)) = self.prev_leaf {
            if pnext != 0 {
                return Err(CheckError::new(
                    name,
                    pl,
                    format!("the last leaf links to {pnext:#x}"),
                ));
            }
        }
        let count = p
            .read_u64(t.count)
            .map_err(|e| read_failed(name, t.count, e))?;
        if count != self.held {
            return Err(CheckError::new(
                name,
                t.count,
                format!("the count word says {count}, the leaves hold {}", self.held),
            ));
        }
        t.slab.check(p, &self.used)?;
        Ok(())
    }

    /// Depth, chain and global order of a leaf; hands its pairs to `pair`.
    fn leaf(
        &mut self,
        node: &Img,
        v: &Visit,
        pair: &mut impl FnMut(&[u8], &[u8]),
    ) -> Result<(), CheckError> {
        let name = self.name;
        match self.leaf_depth {
            None => self.leaf_depth = Some(v.depth),
            Some(d) if d != v.depth => {
                return Err(CheckError::new(
                    name,
                    v.at,
                    format!("a leaf at depth {}, another at {d}", v.depth),
                ));
            }
            _ => {}
        }
        if let Some((pl, pnext)) = self.prev_leaf {
            if pnext != v.at {
                return Err(CheckError::new(
                    name,
                    pl,
                    format!(
                        "the leaf chain goes to {pnext:#x}, the next leaf is {:#x}",
                        v.at
                    ),
                ));
            }
        }
        self.prev_leaf = Some((v.at, node.next()));
        let n = node.count();
        for j in 0..n {
            if self.last_key.as_deref().is_some_and(|l| node.key(j) <= l) {
                return Err(CheckError::new(name, v.at, "keys repeat across leaves"));
            }
            pair(node.key(j), node.slots(j, j + 1));
        }
        self.last_key = Some(node.key(n - 1).to_vec());
        self.held += n as u64;
        Ok(())
    }
}

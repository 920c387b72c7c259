//! A B-tree of 8-byte keys and values (paper 000): keys and values in every node, as
//! in Cormen et al. — minimum degree t = 8, so a node holds 7 to 15 keys (the root 1 to
//! 15) in 384 bytes (`n`, `leaf`, 15 keys, 15 values, 16 children). Insert splits full
//! nodes on the way down; delete makes every node it descends into hold at least t
//! keys (borrowing from or merging with a sibling). Each node changed is stored as the
//! byte runs that differ. One insert or delete per transaction.
//!
//! Checker: keys in order within and across nodes, key counts within bounds, every
//! leaf at the same depth, the count word right, every node reached once and every
//! other node free.

use pmlab_spine::Addr;
use pmlab_tx::{Batch, Protocol, TxMemory};

use crate::contents::Contents;
use crate::error::{CheckError, WorkloadError, read_failed};
use crate::header::{Header, STRUCT_OFF};
use crate::map::{Map, fill, store_changes, toggle_tx};
use crate::slab::{Marks, Slab};
use crate::workload::{Ops, Structure};

/// The workload's name.
pub const NAME: &str = "btree";
/// Minimum degree.
const T: usize = 8;
const MAX: usize = 2 * T - 1;
const NODE: u64 = 16 + 8 * (MAX as u64) * 2 + 8 * (MAX as u64 + 1);
const ROOT: u64 = 0;
const COUNT: u64 = 1;
const POOL: u64 = 2;

/// One node, decoded, with the bytes it was read as.
#[derive(Clone)]
struct Node {
    addr: Addr,
    n: usize,
    leaf: bool,
    keys: [u64; MAX],
    vals: [u64; MAX],
    kids: [u64; MAX + 1],
    orig: [u8; NODE as usize],
}

impl Node {
    fn decode(addr: Addr, b: [u8; NODE as usize]) -> Node {
        let w = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8"));
        let mut node = Node {
            addr,
            n: w(0) as usize,
            leaf: w(1) != 0,
            keys: [0; MAX],
            vals: [0; MAX],
            kids: [0; MAX + 1],
            orig: b,
        };
        for i in 0..MAX {
            node.keys[i] = w(2 + i);
            node.vals[i] = w(2 + MAX + i);
        }
        for i in 0..=MAX {
            node.kids[i] = w(2 + 2 * MAX + i);
        }
        node
    }

    fn encode(&self) -> [u8; NODE as usize] {
        let mut b = [0u8; NODE as usize];
        let mut put = |i: usize, v: u64| b[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
        put(0, self.n as u64);
        put(1, u64::from(self.leaf));
        for i in 0..MAX {
            put(2 + i, self.keys[i]);
            put(2 + MAX + i, self.vals[i]);
        }
        for i in 0..=MAX {
            put(2 + 2 * MAX + i, self.kids[i]);
        }
        b
    }

    fn load<T: TxMemory>(m: &mut T, addr: Addr) -> Result<Node, WorkloadError> {
        let mut b = [0u8; NODE as usize];
        m.tx_read(addr, &mut b)?;
        Ok(Node::decode(addr, b))
    }

    /// Stores what changed since the node was read (or last stored).
    fn store<T: TxMemory>(&mut self, m: &mut T) -> Result<(), WorkloadError> {
        let new = self.encode();
        store_changes(m, self.addr, &self.orig, &new)?;
        self.orig = new;
        Ok(())
    }

    fn insert_at(&mut self, i: usize, k: u64, v: u64) {
        self.keys.copy_within(i..self.n, i + 1);
        self.vals.copy_within(i..self.n, i + 1);
        self.keys[i] = k;
        self.vals[i] = v;
        self.n += 1;
    }

    fn remove_at(&mut self, i: usize) -> (u64, u64) {
        let kv = (self.keys[i], self.vals[i]);
        self.keys.copy_within(i + 1..self.n, i);
        self.vals.copy_within(i + 1..self.n, i);
        self.n -= 1;
        self.keys[self.n] = 0;
        self.vals[self.n] = 0;
        kv
    }

    /// The first index whose key is at least `k`.
    fn lower_bound(&self, k: u64) -> usize {
        self.keys[..self.n].partition_point(|&x| x < k)
    }
}

/// The tree.
pub struct BTree {
    h: Header,
    slab: Slab,
}

impl BTree {
    fn new_node<T: TxMemory>(&self, m: &mut T, leaf: bool) -> Result<Node, WorkloadError> {
        let addr = self.slab.alloc(m)?;
        let mut b = [0u8; NODE as usize];
        m.tx_read(addr, &mut b)?;
        let mut node = Node::decode(addr, b);
        node.n = 0;
        node.leaf = leaf;
        node.keys = [0; MAX];
        node.vals = [0; MAX];
        node.kids = [0; MAX + 1];
        Ok(node)
    }

    fn root<T: TxMemory>(&self, m: &mut T) -> Result<Addr, WorkloadError> {
        Ok(m.tx_read_u64(self.h.state(ROOT))?)
    }

    /// Splits the full child `i` of `x` around its median, which moves up into `x`.
    fn split_child<T: TxMemory>(
        &self,
        m: &mut T,
        x: &mut Node,
        i: usize,
    ) -> Result<(), WorkloadError> {
        let mut y = Node::load(m, x.kids[i])?;
        let mut z = self.new_node(m, y.leaf)?;
        z.n = T - 1;
        z.keys[..T - 1].copy_from_slice(&y.keys[T..MAX]);
        z.vals[..T - 1].copy_from_slice(&y.vals[T..MAX]);
        if !y.leaf {
            z.kids[..T].copy_from_slice(&y.kids[T..=MAX]);
            y.kids[T..=MAX].fill(0);
        }
        let (mk, mv) = (y.keys[T - 1], y.vals[T - 1]);
        y.keys[T - 1..].fill(0);
        y.vals[T - 1..].fill(0);
        y.n = T - 1;
        x.kids.copy_within(i + 1..x.n + 1, i + 2);
        x.kids[i + 1] = z.addr;
        x.insert_at(i, mk, mv);
        y.store(m)?;
        z.store(m)?;
        x.store(m)
    }

    fn insert_nonfull<T: TxMemory>(
        &self,
        m: &mut T,
        mut x: Node,
        k: u64,
        v: u64,
    ) -> Result<(), WorkloadError> {
        loop {
            let mut i = x.lower_bound(k);
            if x.leaf {
                x.insert_at(i, k, v);
                return x.store(m);
            }
            if Node::load(m, x.kids[i])?.n == MAX {
                self.split_child(m, &mut x, i)?;
                if k > x.keys[i] {
                    i += 1;
                }
            }
            x = Node::load(m, x.kids[i])?;
        }
    }

    /// The largest (or, with `max` false, smallest) pair below `node`.
    fn extreme<T: TxMemory>(
        &self,
        m: &mut T,
        mut node: Node,
        max: bool,
    ) -> Result<(u64, u64), WorkloadError> {
        while !node.leaf {
            node = Node::load(m, node.kids[if max { node.n } else { 0 }])?;
        }
        let i = if max { node.n - 1 } else { 0 };
        Ok((node.keys[i], node.vals[i]))
    }

    /// Merges child `i + 1` of `x` and the key between them into child `i`.
    fn merge<T: TxMemory>(&self, m: &mut T, x: &mut Node, i: usize) -> Result<Node, WorkloadError> {
        let mut y = Node::load(m, x.kids[i])?;
        let z = Node::load(m, x.kids[i + 1])?;
        let (k, v) = x.remove_at(i);
        x.kids.copy_within(i + 2..x.n + 2, i + 1);
        x.kids[x.n + 1] = 0;
        let yn = y.n;
        y.keys[yn] = k;
        y.vals[yn] = v;
        y.keys[yn + 1..yn + 1 + z.n].copy_from_slice(&z.keys[..z.n]);
        y.vals[yn + 1..yn + 1 + z.n].copy_from_slice(&z.vals[..z.n]);
        if !y.leaf {
            y.kids[yn + 1..yn + 2 + z.n].copy_from_slice(&z.kids[..=z.n]);
        }
        y.n = yn + 1 + z.n;
        y.store(m)?;
        x.store(m)?;
        self.slab.free(m, z.addr)?;
        Ok(y)
    }

    /// Makes child `i` of `x` hold at least t keys (Cormen's case 3); returns the
    /// child to descend into, which may now sit at `i - 1`.
    fn fill_child<T: TxMemory>(
        &self,
        m: &mut T,
        x: &mut Node,
        i: usize,
    ) -> Result<Node, WorkloadError> {
        let mut c = Node::load(m, x.kids[i])?;
        if c.n >= T {
            return Ok(c);
        }
        if i > 0 {
            let mut l = Node::load(m, x.kids[i - 1])?;
            if l.n >= T {
                c.kids.copy_within(0..c.n + 1, 1);
                c.insert_at(0, x.keys[i - 1], x.vals[i - 1]);
                c.kids[0] = l.kids[l.n];
                l.kids[l.n] = 0;
                let (k, v) = l.remove_at(l.n - 1);
                x.keys[i - 1] = k;
                x.vals[i - 1] = v;
                l.store(m)?;
                c.store(m)?;
                x.store(m)?;
                return Ok(c);
            }
        }
        if i < x.n {
            let mut r = Node::load(m, x.kids[i + 1])?;
            if r.n >= T {
                let at = c.n;
                c.insert_at(at, x.keys[i], x.vals[i]);
                c.kids[at + 1] = r.kids[0];
                r.kids.copy_within(1..r.n + 1, 0);
                r.kids[r.n] = 0;
                let (k, v) = r.remove_at(0);
                x.keys[i] = k;
                x.vals[i] = v;
                r.store(m)?;
                c.store(m)?;
                x.store(m)?;
                return Ok(c);
            }
            return self.merge(m, x, i);
        }
        self.merge(m, x, i - 1)
    }

    /// Removes `k`, present below `x`, which holds at least t keys (or is the root).
    fn delete<T: TxMemory>(&self, m: &mut T, mut x: Node, mut k: u64) -> Result<(), WorkloadError> {
        loop {
            let i = x.lower_bound(k);
            if i < x.n && x.keys[i] == k {
                if x.leaf {
                    x.remove_at(i);
                    return x.store(m);
                }
                let y = Node::load(m, x.kids[i])?;
                let z = Node::load(m, x.kids[i + 1])?;
                if y.n >= T {
                    let (pk, pv) = self.extreme(m, y.clone(), true)?;
                    x.keys[i] = pk;
                    x.vals[i] = pv;
                    x.store(m)?;
                    (x, k) = (y, pk);
                } else if z.n >= T {
                    let (sk, sv) = self.extreme(m, z.clone(), false)?;
                    x.keys[i] = sk;
                    x.vals[i] = sv;
                    x.store(m)?;
                    (x, k) = (z, sk);
                } else {
                    x = self.merge(m, &mut x, i)?;
                }
                continue;
            }
            if x.leaf {
                return Ok(());
            }
            x = self.fill_child(m, &mut x, i)?;
        }
    }

    fn add_count<T: TxMemory>(&self, m: &mut T, d: u64) -> Result<(), WorkloadError> {
        let c = m.tx_read_u64(self.h.state(COUNT))?;
        Ok(m.tx_write_u64(self.h.state(COUNT), c.wrapping_add(d))?)
    }
}

impl Map for BTree {
    fn get<T: TxMemory>(&self, m: &mut T, key: u64) -> Result<Option<u64>, WorkloadError> {
        let mut at = self.root(m)?;
        while at != 0 {
            let x = Node::load(m, at)?;
            let i = x.lower_bound(key);
            if i < x.n && x.keys[i] == key {
                return Ok(Some(x.vals[i]));
            }
            at = if x.leaf { 0 } else { x.kids[i] };
        }
        Ok(None)
    }

    fn insert<T: TxMemory>(&self, m: &mut T, key: u64, value: u64) -> Result<(), WorkloadError> {
        let r = self.root(m)?;
        if r == 0 {
            let mut x = self.new_node(m, true)?;
            x.insert_at(0, key, value);
            x.store(m)?;
            m.tx_write_u64(self.h.state(ROOT), x.addr)?;
        } else {
            let root = Node::load(m, r)?;
            if root.n == MAX {
                let mut s = self.new_node(m, false)?;
                s.kids[0] = r;
                s.store(m)?;
                m.tx_write_u64(self.h.state(ROOT), s.addr)?;
                self.split_child(m, &mut s, 0)?;
                self.insert_nonfull(m, s, key, value)?;
            } else {
                self.insert_nonfull(m, root, key, value)?;
            }
        }
        self.add_count(m, 1)
    }

    fn remove<T: TxMemory>(&self, m: &mut T, key: u64) -> Result<(), WorkloadError> {
        let r = self.root(m)?;
        if r == 0 {
            return Ok(());
        }
        let root = Node::load(m, r)?;
        self.delete(m, root, key)?;
        let root = Node::load(m, r)?;
        if root.n == 0 {
            let next = if root.leaf { 0 } else { root.kids[0] };
            m.tx_write_u64(self.h.state(ROOT), next)?;
            self.slab.free(m, r)?;
        }
        self.add_count(m, u64::MAX)
    }
}

impl Structure for BTree {
    fn footprint(elements: u64) -> u64 {
        STRUCT_OFF + capacity(elements) * NODE
    }

    fn layout(h: &Header) -> Result<Self, WorkloadError> {
        Ok(BTree {
            h: *h,
            slab: Slab {
                base: h.body(),
                node: NODE,
                cap: capacity(h.elements),
                state: h.state(POOL),
                workload: NAME,
            },
        })
    }

    fn universe(&self) -> u64 {
        2 * self.h.elements
    }

    fn init<P: Protocol>(&mut self, p: &mut P, batch: &mut Batch) -> Result<(), WorkloadError> {
        fill(self, p, batch, self.h.elements)
    }

    fn run_tx<P: Protocol>(
        &mut self,
        p: &mut P,
        batch: &mut Batch,
        ops: &mut Ops,
    ) -> Result<(), WorkloadError> {
        toggle_tx(self, p, batch, ops)
    }

    fn check<P: Protocol>(&self, p: &mut P) -> Result<Contents, CheckError> {
        check_tree(self, p)
    }
}

/// Nodes the pool holds: every node at least half full (t - 1 keys) for the whole key
/// space, plus the internal nodes above and some slack.
fn capacity(elements: u64) -> u64 {
    let leaves = (2 * elements).div_ceil(T as u64 - 1);
    leaves + leaves / (T as u64 - 1) + 16
}

fn check_tree<P: Protocol>(t: &BTree, p: &mut P) -> Result<Contents, CheckError> {
    let rd = |p: &mut P, a: Addr| p.read_u64(a).map_err(|e| read_failed(NAME, a, e));
    let bump = rd(p, t.slab.state + 8)?.min(t.slab.cap);
    let mut used = Marks::new(bump);
    let mut contents = Contents::default();
    let root = rd(p, t.h.state(ROOT))?;
    let mut leaf_depth = None;
    let mut stack = Vec::new();
    if root != 0 {
        stack.push(Visit {
            at: root,
            from: t.h.state(ROOT),
            lo: None,
            hi: None,
            depth: 0,
        });
    }
    while let Some(v) = stack.pop() {
        let i = t.slab.index(v.at, bump).ok_or_else(|| {
            CheckError::new(
                NAME,
                v.from,
                format!("link {:#x} is not an allocated node", v.at),
            )
        })?;
        if !used.set(i) {
            return Err(CheckError::new(NAME, v.at, "a node is reached twice"));
        }
        let x = check_node(p, &v, v.at == root, &mut contents)?;
        if x.leaf {
            match leaf_depth {
                None => leaf_depth = Some(v.depth),
                Some(d) if d != v.depth => {
                    return Err(CheckError::new(
                        NAME,
                        v.at,
                        format!("a leaf at depth {}, another at {d}", v.depth),
                    ));
                }
                _ => {}
            }
            continue;
        }
        for j in 0..=x.n {
            stack.push(Visit {
                at: x.kids[j],
                from: v.at + 16 + 16 * MAX as u64 + 8 * j as u64,
                lo: if j == 0 { v.lo } else { Some(x.keys[j - 1]) },
                hi: if j == x.n { v.hi } else { Some(x.keys[j]) },
                depth: v.depth + 1,
            });
        }
    }
    let count = rd(p, t.h.state(COUNT))?;
    if count != contents.count {
        return Err(CheckError::new(
            NAME,
            t.h.state(COUNT),
            format!(
                "the count word says {count}, the tree holds {}",
                contents.count
            ),
        ));
    }
    t.slab.check(p, &used)?;
    Ok(contents)
}

/// A node the checker is to visit: where, who links to it, the keys it must lie
/// strictly between, and its depth.
struct Visit {
    at: Addr,
    from: Addr,
    lo: Option<u64>,
    hi: Option<u64>,
    depth: u32,
}

/// Reads node `v.at`, checks its key count and key order, and adds its pairs.
fn check_node<P: Protocol>(
    p: &mut P,
    v: &Visit,
    is_root: bool,
    contents: &mut Contents,
) -> Result<Node, CheckError> {
    let mut b = [0u8; NODE as usize];
    p.read(v.at, &mut b)
        .map_err(|e| read_failed(NAME, v.at, e))?;
    let raw_n = u64::from_le_bytes(b[0..8].try_into().expect("8"));
    let raw_leaf = u64::from_le_bytes(b[8..16].try_into().expect("8"));
    let min = if is_root { 1 } else { T as u64 - 1 };
    if raw_n < min || raw_n > MAX as u64 || raw_leaf > 1 {
        return Err(CheckError::new(
            NAME,
            v.at,
            format!("{raw_n} keys (allowed {min} to {MAX}), leaf flag {raw_leaf}"),
        ));
    }
    let x = Node::decode(v.at, b);
    let mut prev = v.lo;
    for j in 0..x.n {
        let k = x.keys[j];
        if prev.is_some_and(|p| k <= p) || v.hi.is_some_and(|h| k >= h) {
            return Err(CheckError::new(
                NAME,
                v.at,
                format!("key {j} ({k:#x}) is out of order"),
            ));
        }
        prev = Some(k);
        contents.add(k, x.vals[j]);
    }
    Ok(x)
}

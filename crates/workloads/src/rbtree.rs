//! A red-black tree of 8-byte keys and values (papers 000 and 001, after NV-Heaps):
//! 64-byte nodes (`key`, `value`, `left`, `right`, `parent`, `color`), insert and delete
//! as in Cormen et al. (with null links for the sentinel). One insert or delete per
//! transaction; a rotation's stores reach the protocol together at its end.
//!
//! Checker: keys in search order, parent links match child links, the root black, no
//! red node with a red child, every root-to-leaf path with the same number of black
//! nodes, the count word right, every node reached once and every other node free.

use pmlab_spine::Addr;
use pmlab_tx::{Batch, Protocol, TxMemory};

use crate::contents::Contents;
use crate::error::{CheckError, WorkloadError, read_failed};
use crate::header::{Header, STRUCT_OFF};
use crate::map::{Map, fill, toggle_tx};
use crate::slab::{Marks, Slab};
use crate::workload::{Ops, Structure};

/// The workload's name.
pub const NAME: &str = "rbtree";
const NODE: u64 = 64;
const ROOT: u64 = 0;
const COUNT: u64 = 1;
const POOL: u64 = 2;

const KEY: u64 = 0;
const VALUE: u64 = 8;
const LEFT: u64 = 16;
const RIGHT: u64 = 24;
const PARENT: u64 = 32;
const COLOR: u64 = 40;
const BLACK: u64 = 0;
const RED: u64 = 1;

/// The tree.
pub struct RbTree {
    h: Header,
    slab: Slab,
}

/// The tree's fields through a transaction (null is 0, and black).
struct Ed<'m, T: TxMemory> {
    m: &'m mut T,
    root: Addr,
}

impl<T: TxMemory> Ed<'_, T> {
    fn get(&mut self, n: Addr, f: u64) -> Result<u64, WorkloadError> {
        Ok(self.m.tx_read_u64(n + f)?)
    }
    fn set(&mut self, n: Addr, f: u64, v: u64) -> Result<(), WorkloadError> {
        Ok(self.m.tx_write_u64(n + f, v)?)
    }
    fn color(&mut self, n: Addr) -> Result<u64, WorkloadError> {
        if n == 0 {
            Ok(BLACK)
        } else {
            self.get(n, COLOR)
        }
    }
    fn root(&mut self) -> Result<Addr, WorkloadError> {
        Ok(self.m.tx_read_u64(self.root)?)
    }

    /// Links `child` where `old` hung under `parent` (or as the root).
    fn replace_child(&mut self, parent: Addr, old: Addr, child: Addr) -> Result<(), WorkloadError> {
        if parent == 0 {
            Ok(self.m.tx_write_u64(self.root, child)?)
        } else if self.get(parent, LEFT)? == old {
            self.set(parent, LEFT, child)
        } else {
            self.set(parent, RIGHT, child)
        }
    }

    /// Rotates `x` down to the `side`: left rotation for `side == LEFT`.
    fn rotate(&mut self, x: Addr, side: u64) -> Result<(), WorkloadError> {
        let other = LEFT + RIGHT - side;
        let y = self.get(x, other)?;
        let inner = self.get(y, side)?;
        self.set(x, other, inner)?;
        if inner != 0 {
            self.set(inner, PARENT, x)?;
        }
        let xp = self.get(x, PARENT)?;
        self.set(y, PARENT, xp)?;
        self.replace_child(xp, x, y)?;
        self.set(y, side, x)?;
        self.set(x, PARENT, y)
    }

    fn insert_fixup(&mut self, mut z: Addr) -> Result<(), WorkloadError> {
        loop {
            let zp = self.get(z, PARENT)?;
            if zp == 0 || self.color(zp)? != RED {
                break;
            }
            let zpp = self.get(zp, PARENT)?;
            // `side` is where the parent hangs; the uncle is on the other side.
            let side = if self.get(zpp, LEFT)? == zp {
                LEFT
            } else {
                RIGHT
            };
            let other = LEFT + RIGHT - side;
            let uncle = self.get(zpp, other)?;
            if self.color(uncle)? == RED {
                self.set(zp, COLOR, BLACK)?;
                self.set(uncle, COLOR, BLACK)?;
                self.set(zpp, COLOR, RED)?;
                z = zpp;
                continue;
            }
            let mut zp = zp;
            if self.get(zp, other)? == z {
                z = zp;
                self.rotate(z, side)?;
                zp = self.get(z, PARENT)?;
            }
            self.set(zp, COLOR, BLACK)?;
            self.set(zpp, COLOR, RED)?;
            self.rotate(zpp, other)?;
        }
        let root = self.root()?;
        self.set(root, COLOR, BLACK)
    }

    fn delete_fixup(&mut self, mut x: Addr, mut xp: Addr) -> Result<(), WorkloadError> {
        while x != self.root()? && self.color(x)? == BLACK {
            // x is null only where its sibling is not, so the side is unambiguous.
            let side = if self.get(xp, LEFT)? == x {
                LEFT
            } else {
                RIGHT
            };
            let other = LEFT + RIGHT - side;
            let mut w = self.get(xp, other)?;
            if self.color(w)? == RED {
                self.set(w, COLOR, BLACK)?;
                self.set(xp, COLOR, RED)?;
                self.rotate(xp, side)?;
                w = self.get(xp, other)?;
            }
            let (wn, wf) = (self.get(w, side)?, self.get(w, other)?);
            if self.color(wn)? == BLACK && self.color(wf)? == BLACK {
                self.set(w, COLOR, RED)?;
                x = xp;
                xp = self.get(x, PARENT)?;
                continue;
            }
            if self.color(wf)? == BLACK {
                self.set(wn, COLOR, BLACK)?;
                self.set(w, COLOR, RED)?;
                self.rotate(w, other)?;
                w = self.get(xp, other)?;
            }
            let c = self.get(xp, COLOR)?;
            self.set(w, COLOR, c)?;
            self.set(xp, COLOR, BLACK)?;
            let wf = self.get(w, other)?;
            self.set(wf, COLOR, BLACK)?;
            self.rotate(xp, side)?;
            x = self.root()?;
            xp = 0;
        }
        if x != 0 {
            self.set(x, COLOR, BLACK)?;
        }
        Ok(())
    }

    fn find(&mut self, key: u64) -> Result<Addr, WorkloadError> {
        let mut x = self.root()?;
        while x != 0 {
            let k = self.get(x, KEY)?;
            if k == key {
                return Ok(x);
            }
            x = self.get(x, if key < k { LEFT } else { RIGHT })?;
        }
        Ok(0)
    }
}

impl RbTree {
    fn ed<'m, T: TxMemory>(&self, m: &'m mut T) -> Ed<'m, T> {
        Ed {
            m,
            root: self.h.state(ROOT),
        }
    }

    fn add_count<T: TxMemory>(&self, m: &mut T, d: u64) -> Result<(), WorkloadError> {
        let c = m.tx_read_u64(self.h.state(COUNT))?;
        Ok(m.tx_write_u64(self.h.state(COUNT), c.wrapping_add(d))?)
    }
}

impl Map for RbTree {
    fn get<T: TxMemory>(&self, m: &mut T, key: u64) -> Result<Option<u64>, WorkloadError> {
        let mut e = self.ed(m);
        match e.find(key)? {
            0 => Ok(None),
            n => Ok(Some(e.get(n, VALUE)?)),
        }
    }

    fn insert<T: TxMemory>(&self, m: &mut T, key: u64, value: u64) -> Result<(), WorkloadError> {
        let z = self.slab.alloc(m)?;
        let mut e = self.ed(m);
        let (mut parent, mut x) = (0, e.root()?);
        while x != 0 {
            parent = x;
            let side = if key < e.get(x, KEY)? { LEFT } else { RIGHT };
            x = e.get(x, side)?;
        }
        let mut img = [0u8; 48];
        img[0..8].copy_from_slice(&key.to_le_bytes());
        img[8..16].copy_from_slice(&value.to_le_bytes());
        img[32..40].copy_from_slice(&parent.to_le_bytes());
        img[40..48].copy_from_slice(&RED.to_le_bytes());
        e.m.tx_write(z, &img)?;
        if parent == 0 {
            e.m.tx_write_u64(e.root, z)?;
        } else {
            let side = if key < e.get(parent, KEY)? {
                LEFT
            } else {
                RIGHT
            };
            e.set(parent, side, z)?;
        }
        e.insert_fixup(z)?;
        self.add_count(m, 1)
    }

    fn remove<T: TxMemory>(&self, m: &mut T, key: u64) -> Result<(), WorkloadError> {
        let mut e = self.ed(m);
        let z = e.find(key)?;
        if z == 0 {
            return Ok(());
        }
        let (zl, zr, zp) = (e.get(z, LEFT)?, e.get(z, RIGHT)?, e.get(z, PARENT)?);
        let mut removed_color = e.get(z, COLOR)?;
        let (x, xp);
        if zl == 0 || zr == 0 {
            x = if zl == 0 { zr } else { zl };
            xp = zp;
            e.replace_child(zp, z, x)?;
            if x != 0 {
                e.set(x, PARENT, zp)?;
            }
        } else {
            let mut y = zr;
            while e.get(y, LEFT)? != 0 {
                y = e.get(y, LEFT)?;
            }
            removed_color = e.get(y, COLOR)?;
            x = e.get(y, RIGHT)?;
            if e.get(y, PARENT)? == z {
                xp = y;
            } else {
                xp = e.get(y, PARENT)?;
                e.replace_child(xp, y, x)?;
                if x != 0 {
                    e.set(x, PARENT, xp)?;
                }
                e.set(y, RIGHT, zr)?;
                e.set(zr, PARENT, y)?;
            }
            e.replace_child(zp, z, y)?;
            e.set(y, PARENT, zp)?;
            e.set(y, LEFT, zl)?;
            e.set(zl, PARENT, y)?;
            let c = e.get(z, COLOR)?;
            e.set(y, COLOR, c)?;
        }
        if removed_color == BLACK {
            e.delete_fixup(x, xp)?;
        }
        self.slab.free(m, z)?;
        self.add_count(m, u64::MAX)
    }
}

impl Structure for RbTree {
    fn footprint(elements: u64) -> u64 {
        STRUCT_OFF + 2 * elements * NODE
    }

    fn layout(h: &Header) -> Result<Self, WorkloadError> {
        Ok(RbTree {
            h: *h,
            slab: Slab {
                base: h.body(),
                node: NODE,
                cap: 2 * h.elements,
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
        let rd = |p: &mut P, a: Addr| p.read_u64(a).map_err(|e| read_failed(NAME, a, e));
        let bump = rd(p, self.slab.state + 8)?.min(self.slab.cap);
        let mut used = Marks::new(bump);
        let mut contents = Contents::default();
        let root = rd(p, self.h.state(ROOT))?;
        let mut black_height: Option<u64> = None;
        let mut stack = vec![Visit {
            n: root,
            parent: 0,
            lo: None,
            hi: None,
            blacks: 0,
            parent_red: false,
        }];
        while let Some(v) = stack.pop() {
            if v.n == 0 {
                match black_height {
                    None => black_height = Some(v.blacks),
                    Some(b) if b != v.blacks => {
                        return Err(CheckError::new(
                            NAME,
                            v.parent,
                            format!("a path below holds {} black nodes, another {b}", v.blacks),
                        ));
                    }
                    _ => {}
                }
                continue;
            }
            let i = self.slab.index(v.n, bump).ok_or_else(|| {
                CheckError::new(
                    NAME,
                    v.parent,
                    format!("link {:#x} is not an allocated node", v.n),
                )
            })?;
            if !used.set(i) {
                return Err(CheckError::new(NAME, v.n, "a node is reached twice"));
            }
            let node = check_node(p, &v)?;
            contents.add(node.key, node.value);
            let (b, red) = (v.blacks + u64::from(!node.red), node.red);
            let (lo, hi) = (v.lo, v.hi);
            stack.push(Visit {
                n: node.left,
                parent: v.n,
                lo,
                hi: Some(node.key),
                blacks: b,
                parent_red: red,
            });
            stack.push(Visit {
                n: node.right,
                parent: v.n,
                lo: Some(node.key),
                hi,
                blacks: b,
                parent_red: red,
            });
        }
        let count = rd(p, self.h.state(COUNT))?;
        if count != contents.count {
            return Err(CheckError::new(
                NAME,
                self.h.state(COUNT),
                format!(
                    "the count word says {count}, the tree holds {}",
                    contents.count
                ),
            ));
        }
        self.slab.check(p, &used)?;
        Ok(contents)
    }
}

/// A node the checker is to visit: the node (0 for a null link), its parent, the keys
/// it must lie strictly between, the black nodes above it, whether its parent is red.
struct Visit {
    n: Addr,
    parent: Addr,
    lo: Option<u64>,
    hi: Option<u64>,
    blacks: u64,
    parent_red: bool,
}

/// A node's fields as the checker needs them.
struct Fields {
    key: u64,
    value: u64,
    left: Addr,
    right: Addr,
    red: bool,
}

/// Reads node `v.n` and checks its parent link, search order and colours.
fn check_node<P: Protocol>(p: &mut P, v: &Visit) -> Result<Fields, CheckError> {
    let n = v.n;
    let mut f = [0u8; 48];
    p.read(n, &mut f).map_err(|e| read_failed(NAME, n, e))?;
    let w = |o: u64| u64::from_le_bytes(f[o as usize..o as usize + 8].try_into().expect("8"));
    let key = w(KEY);
    if w(PARENT) != v.parent {
        return Err(CheckError::new(
            NAME,
            n,
            format!("parent link {:#x}, reached from {:#x}", w(PARENT), v.parent),
        ));
    }
    if v.lo.is_some_and(|l| key <= l) || v.hi.is_some_and(|h| key >= h) {
        return Err(CheckError::new(
            NAME,
            n,
            format!("key {key:#x} is out of search order"),
        ));
    }
    let red = match w(COLOR) {
        RED => true,
        BLACK => false,
        c => {
            return Err(CheckError::new(
                NAME,
                n,
                format!("color {c} is neither red nor black"),
            ));
        }
    };
    if red && v.parent == 0 {
        return Err(CheckError::new(NAME, n, "the root is red"));
    }
    if red && v.parent_red {
        return Err(CheckError::new(NAME, n, "a red node has a red child"));
    }
    Ok(Fields {
        key,
        value: w(VALUE),
        left: w(LEFT),
        right: w(RIGHT),
        red,
    })
}

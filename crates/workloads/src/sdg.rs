//! SDG: edge inserts and deletes in a large undirected graph (paper 001, after Boost's
//! adjacency list). Each vertex has a 16-byte entry (`head`, `degree`) in a vertex
//! table; its neighbours live in a list of 64-byte blocks (`next`, `n`, six neighbour
//! ids). New neighbours go into the head block (a new head block when it is full), and
//! a removed neighbour's place is taken by the head block's last one, so every block
//! but the head is full. An edge is in both endpoints' lists.
//!
//! One operation per transaction: pick two vertices (uniform or Zipf); if the edge is
//! there, delete it; otherwise insert it — unless an endpoint already has
//! [`MAX_DEGREE`] neighbours, when a random edge of the first vertex is deleted
//! instead. That keeps the graph near a steady size without a bound on its lists that
//! the operations could reach. The graph starts with as many random edges as vertices.
//!
//! Checker: every edge appears in both endpoints' lists, once each; no self loops;
//! blocks full but the head, which holds at least one; degrees and the edge count
//! right; every block reached once and every other block free.

use std::collections::HashMap;

use pmlab_spine::Addr;
use pmlab_tx::{Batch, Protocol, TxMemory};

use crate::contents::Contents;
use crate::error::{CheckError, WorkloadError, read_failed};
use crate::header::{Header, STRUCT_OFF};
use crate::slab::{Marks, Slab};
use crate::workload::{Ops, Structure, in_tx};

/// The workload's name.
pub const NAME: &str = "sdg";
/// Most neighbours a vertex takes by insertion.
pub const MAX_DEGREE: u64 = 12;
const PER_BLOCK: u64 = 6;
const BLOCK: u64 = 64;
const EDGES: u64 = 0;
const POOL: u64 = 1;
const FILL_BATCH: u64 = 16;

/// The graph.
pub struct Sdg {
    h: Header,
    vertices: Addr,
    slab: Slab,
}

impl Sdg {
    fn v(&self, u: u64) -> Addr {
        self.vertices + 16 * u
    }

    fn degree<T: TxMemory>(&self, m: &mut T, u: u64) -> Result<u64, WorkloadError> {
        Ok(m.tx_read_u64(self.v(u) + 8)?)
    }

    fn add_to<T: TxMemory>(&self, m: &mut T, addr: Addr, d: u64) -> Result<(), WorkloadError> {
        let x = m.tx_read_u64(addr)?;
        Ok(m.tx_write_u64(addr, x.wrapping_add(d))?)
    }

    /// Where `v` sits in `u`'s list: (block, slot).
    fn find<T: TxMemory>(
        &self,
        m: &mut T,
        u: u64,
        v: u64,
    ) -> Result<Option<(Addr, u64)>, WorkloadError> {
        let mut b = m.tx_read_u64(self.v(u))?;
        while b != 0 {
            let n = m.tx_read_u64(b + 8)?.min(PER_BLOCK);
            for s in 0..n {
                if m.tx_read_u64(b + 16 + 8 * s)? == v {
                    return Ok(Some((b, s)));
                }
            }
            b = m.tx_read_u64(b)?;
        }
        Ok(None)
    }

    /// The `i`-th neighbour of `u` (the head block's first, then the full blocks').
    fn neighbour<T: TxMemory>(&self, m: &mut T, u: u64, mut i: u64) -> Result<u64, WorkloadError> {
        let mut b = m.tx_read_u64(self.v(u))?;
        loop {
            let n = m.tx_read_u64(b + 8)?;
            if i < n {
                return Ok(m.tx_read_u64(b + 16 + 8 * i)?);
            }
            i -= n;
            b = m.tx_read_u64(b)?;
        }
    }

    /// Adds `v` to `u`'s list.
    fn link<T: TxMemory>(&self, m: &mut T, u: u64, v: u64) -> Result<(), WorkloadError> {
        let head = m.tx_read_u64(self.v(u))?;
        let n = if head == 0 {
            PER_BLOCK
        } else {
            m.tx_read_u64(head + 8)?
        };
        if n < PER_BLOCK {
            m.tx_write_u64(head + 16 + 8 * n, v)?;
            m.tx_write_u64(head + 8, n + 1)?;
        } else {
            let b = self.slab.alloc(m)?;
            let mut img = [0u8; 24];
            img[0..8].copy_from_slice(&head.to_le_bytes());
            img[8..16].copy_from_slice(&1u64.to_le_bytes());
            img[16..24].copy_from_slice(&v.to_le_bytes());
            m.tx_write(b, &img)?;
            m.tx_write_u64(self.v(u), b)?;
        }
        self.add_to(m, self.v(u) + 8, 1)
    }

    /// Removes `v` from `u`'s list (where it is present).
    fn unlink<T: TxMemory>(&self, m: &mut T, u: u64, v: u64) -> Result<(), WorkloadError> {
        let Some((b, s)) = self.find(m, u, v)? else {
            return Ok(());
        };
        let head = m.tx_read_u64(self.v(u))?;
        let n = m.tx_read_u64(head + 8)?;
        let last = m.tx_read_u64(head + 16 + 8 * (n - 1))?;
        m.tx_write_u64(b + 16 + 8 * s, last)?;
        m.tx_write_u64(head + 16 + 8 * (n - 1), 0)?;
        if n == 1 {
            let next = m.tx_read_u64(head)?;
            m.tx_write_u64(self.v(u), next)?;
            self.slab.free(m, head)?;
        } else {
            m.tx_write_u64(head + 8, n - 1)?;
        }
        self.add_to(m, self.v(u) + 8, u64::MAX)
    }

    fn insert_edge<T: TxMemory>(&self, m: &mut T, u: u64, v: u64) -> Result<(), WorkloadError> {
        self.link(m, u, v)?;
        self.link(m, v, u)?;
        self.add_to(m, self.h.state(EDGES), 1)
    }

    fn delete_edge<T: TxMemory>(&self, m: &mut T, u: u64, v: u64) -> Result<(), WorkloadError> {
        self.unlink(m, u, v)?;
        self.unlink(m, v, u)?;
        self.add_to(m, self.h.state(EDGES), u64::MAX)
    }

    /// One operation on the edge `(u, v)` (see the module documentation).
    fn operate<T: TxMemory>(
        &self,
        m: &mut T,
        u: u64,
        v: u64,
        ops: &mut Ops,
    ) -> Result<(), WorkloadError> {
        if self.find(m, u, v)?.is_some() {
            return self.delete_edge(m, u, v);
        }
        let (du, dv) = (self.degree(m, u)?, self.degree(m, v)?);
        if du < MAX_DEGREE && dv < MAX_DEGREE {
            return self.insert_edge(m, u, v);
        }
        let (x, dx) = if du > 0 { (u, du) } else { (v, dv) };
        let w = self.neighbour(m, x, ops.below(dx))?;
        self.delete_edge(m, x, w)
    }

    fn pair(&self, ops: &mut Ops) -> (u64, u64) {
        let n = self.h.elements;
        let u = ops.pick();
        let mut v = ops.pick();
        if v == u {
            v = (v + 1) % n;
        }
        (u, v)
    }
}

impl Structure for Sdg {
    fn footprint(elements: u64) -> u64 {
        let vt = (16 * elements).div_ceil(BLOCK) * BLOCK;
        STRUCT_OFF + vt + blocks(elements) * BLOCK
    }

    fn layout(h: &Header) -> Result<Self, WorkloadError> {
        let vertices = h.body();
        let vt = (16 * h.elements).div_ceil(BLOCK) * BLOCK;
        Ok(Sdg {
            h: *h,
            vertices,
            slab: Slab {
                base: vertices + vt,
                node: BLOCK,
                cap: blocks(h.elements),
                state: h.state(POOL),
                workload: NAME,
            },
        })
    }

    fn universe(&self) -> u64 {
        self.h.elements
    }

    fn init<P: Protocol>(&mut self, p: &mut P, batch: &mut Batch) -> Result<(), WorkloadError> {
        let zeros = vec![0u8; 4096];
        let len = 16 * self.h.elements;
        for off in (0..len).step_by(4096) {
            let n = 4096.min(len - off) as usize;
            in_tx(p, |p| Ok(p.write(self.vertices + off, &zeros[..n])?))?;
        }
        // As many random edges as vertices, from a stream of the workload's own.
        let params = crate::Params {
            elements: self.h.elements,
            dist: crate::Dist::Uniform,
            ops_per_tx: 1,
        };
        let mut ops = Ops::over(0x5d6, self.h.elements, &params);
        let mut made = 0;
        while made < self.h.elements {
            in_tx(p, |p| {
                let mut s = batch.on(p);
                for _ in 0..FILL_BATCH.min(self.h.elements - made) {
                    let (u, v) = self.pair(&mut ops);
                    let room = self.degree(&mut s, u)? < MAX_DEGREE
                        && self.degree(&mut s, v)? < MAX_DEGREE;
                    if self.find(&mut s, u, v)?.is_none() && room {
                        self.insert_edge(&mut s, u, v)?;
                    }
                    made += 1;
                }
                Ok(s.finish()?)
            })?;
        }
        Ok(())
    }

    fn run_tx<P: Protocol>(
        &mut self,
        p: &mut P,
        batch: &mut Batch,
        ops: &mut Ops,
    ) -> Result<(), WorkloadError> {
        in_tx(p, |p| {
            let mut s = batch.on(p);
            for _ in 0..ops.per_tx() {
                let (u, v) = self.pair(ops);
                self.operate(&mut s, u, v, ops)?;
            }
            Ok(s.finish()?)
        })
    }

    fn check<P: Protocol>(&self, p: &mut P) -> Result<Contents, CheckError> {
        let rd = |p: &mut P, a: Addr| p.read_u64(a).map_err(|e| read_failed(NAME, a, e));
        let bump = rd(p, self.slab.state + 8)?.min(self.slab.cap);
        let mut used = Marks::new(bump);
        // Each undirected edge (low, high): how many of its endpoints list it.
        let mut seen: HashMap<(u64, u64), u8> = HashMap::new();
        let mut nbrs = Vec::new();
        for u in 0..self.h.elements {
            self.list_of(p, u, bump, &mut used, &mut nbrs)?;
            for &v in &nbrs {
                *seen.entry((u.min(v), u.max(v))).or_default() += 1;
            }
        }
        let mut contents = Contents::default();
        for (&(a, b), &k) in &seen {
            if k != 2 {
                return Err(CheckError::new(
                    NAME,
                    self.v(a),
                    format!("edge {a}-{b} is listed by one endpoint only"),
                ));
            }
            contents.add(a, b);
        }
        let edges = rd(p, self.h.state(EDGES))?;
        if edges != contents.count {
            return Err(CheckError::new(
                NAME,
                self.h.state(EDGES),
                format!(
                    "the edge count says {edges}, the lists hold {}",
                    contents.count
                ),
            ));
        }
        self.slab.check(p, &used)?;
        Ok(contents)
    }
}

impl Sdg {
    /// Walks `u`'s block list into `nbrs`, checking blocks (allocated, reached once,
    /// full but the head), neighbours (in range, not `u`, listed once) and the degree.
    fn list_of<P: Protocol>(
        &self,
        p: &mut P,
        u: u64,
        bump: u64,
        used: &mut Marks,
        nbrs: &mut Vec<u64>,
    ) -> Result<(), CheckError> {
        let rd = |p: &mut P, a: Addr| p.read_u64(a).map_err(|e| read_failed(NAME, a, e));
        let (mut from, mut b) = (self.v(u), rd(p, self.v(u))?);
        let degree = rd(p, self.v(u) + 8)?;
        nbrs.clear();
        let mut first = true;
        while b != 0 {
            let i = self.slab.index(b, bump).ok_or_else(|| {
                CheckError::new(NAME, from, format!("link {b:#x} is not an allocated block"))
            })?;
            if !used.set(i) {
                return Err(CheckError::new(NAME, b, "a block is reached twice"));
            }
            let k = rd(p, b + 8)?;
            let ok = if first {
                (1..=PER_BLOCK).contains(&k)
            } else {
                k == PER_BLOCK
            };
            if !ok {
                let which = if first { "head" } else { "later" };
                return Err(CheckError::new(
                    NAME,
                    b,
                    format!("vertex {u}: a {which} block holds {k} neighbours"),
                ));
            }
            for s in 0..k {
                let v = rd(p, b + 16 + 8 * s)?;
                if v >= self.h.elements || v == u || nbrs.contains(&v) {
                    return Err(CheckError::new(
                        NAME,
                        b + 16 + 8 * s,
                        format!(
                            "vertex {u}: neighbour {v} is out of range, the vertex itself, or listed twice"
                        ),
                    ));
                }
                nbrs.push(v);
            }
            (from, b, first) = (b, rd(p, b)?, false);
        }
        if degree != nbrs.len() as u64 {
            return Err(CheckError::new(
                NAME,
                self.v(u) + 8,
                format!(
                    "vertex {u}: degree {degree}, {} neighbours listed",
                    nbrs.len()
                ),
            ));
        }
        Ok(())
    }
}

/// Blocks the pool holds: two per vertex (twelve neighbours in full blocks of six),
/// plus slack for the deletes' turnover inside a transaction.
fn blocks(elements: u64) -> u64 {
    2 * elements + 16
}

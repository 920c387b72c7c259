//! The workloads as one type: which structure, its parameters, its operation stream,
//! and the calls every harness uses (format, open, run one transaction, check).

use pmlab_spine::Addr;
use pmlab_tx::{Area, Batch, Protocol};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::bplus::NodeReads;
use crate::contents::Contents;
use crate::error::{CheckError, WorkloadError};
use crate::header::Header;
use crate::keys::{Dist, Picker};
use crate::{bptree, btree, db, hashtable, rbtree, sdg, sps};

/// The workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Random swaps of array entries (000, 001).
    Sps,
    /// Chained hash table (000, 001).
    HashTable,
    /// Red-black tree (000, 001).
    RbTree,
    /// B-tree (000).
    BTree,
    /// B+-tree of 4 KiB nodes, 200 pairs each (001).
    BpTree,
    /// Edge inserts and deletes in a large graph (001).
    Sdg,
    /// A table of rows in a B+-tree of 4 KiB pages, standing in for SQLite (001).
    Db,
}

impl Kind {
    /// Every workload.
    pub const ALL: [Kind; 7] = [
        Kind::Sps,
        Kind::HashTable,
        Kind::RbTree,
        Kind::BTree,
        Kind::BpTree,
        Kind::Sdg,
        Kind::Db,
    ];

    /// The name on command lines and in results.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sps => sps::NAME,
            Kind::HashTable => hashtable::NAME,
            Kind::RbTree => rbtree::NAME,
            Kind::BTree => btree::NAME,
            Kind::BpTree => bptree::NAME,
            Kind::Sdg => sdg::NAME,
            Kind::Db => db::NAME,
        }
    }

    /// Parses [`Kind::name`].
    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Operations per transaction unless asked otherwise: one for the workloads of
    /// paper 000 and SDG; the B+-tree and the table group several, as paper 001's
    /// B+-tree does ("each transaction consists of multiple key-value insert or delete
    /// operations"; it gives no number, so 4) and as SQLite's benchmark batches rows.
    pub fn default_ops_per_tx(self) -> u32 {
        match self {
            Kind::BpTree | Kind::Db => 4,
            _ => 1,
        }
    }

    /// Elements unless asked otherwise: scaled so a native run takes seconds. The
    /// papers' footprints are 1-6 GB (000); see docs/transactions.md for the full sizes.
    pub fn default_elements(self) -> u64 {
        match self {
            Kind::Sps => 1 << 20,
            Kind::Sdg => 1 << 16,
            Kind::Db => 1 << 16,
            _ => 1 << 18,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A workload's size and operation mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Elements: array entries (SPS), keys present at the start (maps), vertices (SDG),
    /// rows at the start (table).
    pub elements: u64,
    /// How operations pick elements.
    pub dist: Dist,
    /// Operations per transaction (B+-tree and table; the others do one).
    pub ops_per_tx: u32,
}

impl Params {
    /// `kind`'s defaults with `dist`.
    pub fn defaults(kind: Kind, dist: Dist) -> Params {
        Params {
            elements: kind.default_elements(),
            dist,
            ops_per_tx: kind.default_ops_per_tx(),
        }
    }
}

/// The operation stream: which elements each transaction touches, and the values it
/// writes, all from xoshiro256++ seeded with the run's seed.
#[derive(Clone, Debug)]
pub struct Ops {
    rng: Xoshiro256PlusPlus,
    picker: Picker,
    per_tx: u32,
    /// Operations drawn so far.
    pub drawn: u64,
}

impl Ops {
    /// The stream of `w` under `params` (its distribution and batch), from `seed`.
    pub fn new(seed: u64, w: &Workload, params: &Params) -> Ops {
        Ops {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            picker: Picker::new(w.universe(), params.dist),
            per_tx: params.ops_per_tx.max(1),
            drawn: 0,
        }
    }

    /// A stream over `n` elements without a structure (a peer's run of the same
    /// operations, a structure's own first fill).
    pub fn over(seed: u64, n: u64, params: &Params) -> Ops {
        Ops {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            picker: Picker::new(n, params.dist),
            per_tx: params.ops_per_tx.max(1),
            drawn: 0,
        }
    }

    /// The next element.
    pub fn pick(&mut self) -> u64 {
        self.drawn += 1;
        self.picker.pick(&mut self.rng)
    }

    /// A random value to store.
    pub fn value(&mut self) -> u64 {
        self.rng.r#gen()
    }

    /// A random number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.rng.gen_range(0..n.max(1))
    }

    /// Operations per transaction.
    pub fn per_tx(&self) -> u32 {
        self.per_tx
    }
}

/// What every structure implements; [`Workload`] dispatches to it.
pub(crate) trait Structure: Sized {
    /// The structure's own header parameter for `elements` (0 if none).
    fn param(_elements: u64) -> u64 {
        0
    }

    /// Bytes of data area for `elements` (header included).
    fn footprint(elements: u64) -> u64;

    /// The structure laid out as its header says (no memory access).
    fn layout(h: &Header) -> Result<Self, WorkloadError>;

    /// How many elements operations pick among.
    fn universe(&self) -> u64;

    /// Fills a freshly formatted area (zeroing what needs it, inserting the first
    /// elements), in transactions.
    fn init<P: Protocol>(&mut self, p: &mut P, batch: &mut Batch) -> Result<(), WorkloadError>;

    /// One transaction of the workload.
    fn run_tx<P: Protocol>(
        &mut self,
        p: &mut P,
        batch: &mut Batch,
        ops: &mut Ops,
    ) -> Result<(), WorkloadError>;

    /// Checks every invariant; returns the contents.
    fn check<P: Protocol>(&self, p: &mut P) -> Result<Contents, CheckError>;
}

/// One workload's structure in a protocol's data area.
pub struct Workload {
    kind: Kind,
    header: Header,
    imp: Imp,
    batch: Batch,
}

enum Imp {
    Sps(sps::Sps),
    HashTable(hashtable::HashTable),
    RbTree(rbtree::RbTree),
    BTree(btree::BTree),
    BpTree(bptree::BpTree),
    Sdg(sdg::Sdg),
    Db(db::Db),
}

/// Runs `$body` with `$s` bound to the structure inside `$imp`.
macro_rules! each {
    ($imp:expr, $s:ident => $body:expr) => {
        match $imp {
            Imp::Sps($s) => $body,
            Imp::HashTable($s) => $body,
            Imp::RbTree($s) => $body,
            Imp::BTree($s) => $body,
            Imp::BpTree($s) => $body,
            Imp::Sdg($s) => $body,
            Imp::Db($s) => $body,
        }
    };
}

/// Calls `$f::<Structure>($args)` for the structure of `$kind`.
macro_rules! by_kind {
    ($kind:expr, $f:ident($($args:expr),*)) => {
        match $kind {
            Kind::Sps => $f::<sps::Sps>($($args),*),
            Kind::HashTable => $f::<hashtable::HashTable>($($args),*),
            Kind::RbTree => $f::<rbtree::RbTree>($($args),*),
            Kind::BTree => $f::<btree::BTree>($($args),*),
            Kind::BpTree => $f::<bptree::BpTree>($($args),*),
            Kind::Sdg => $f::<sdg::Sdg>($($args),*),
            Kind::Db => $f::<db::Db>($($args),*),
        }
    };
}

fn footprint_of<S: Structure>(elements: u64) -> u64 {
    S::footprint(elements)
}

fn param_of<S: Structure>(elements: u64) -> u64 {
    S::param(elements)
}

fn imp_of(kind: Kind, h: &Header) -> Result<Imp, WorkloadError> {
    Ok(match kind {
        Kind::Sps => Imp::Sps(sps::Sps::layout(h)?),
        Kind::HashTable => Imp::HashTable(hashtable::HashTable::layout(h)?),
        Kind::RbTree => Imp::RbTree(rbtree::RbTree::layout(h)?),
        Kind::BTree => Imp::BTree(btree::BTree::layout(h)?),
        Kind::BpTree => Imp::BpTree(bptree::BpTree::layout(h)?),
        Kind::Sdg => Imp::Sdg(sdg::Sdg::layout(h)?),
        Kind::Db => Imp::Db(db::Db::layout(h)?),
    })
}

/// Runs `f` as one transaction: begun here, aborted on any error, committed otherwise.
pub(crate) fn in_tx<P: Protocol>(
    p: &mut P,
    f: impl FnOnce(&mut P) -> Result<(), WorkloadError>,
) -> Result<(), WorkloadError> {
    p.begin()?;
    match f(p) {
        Ok(()) => {
            p.commit()?;
            Ok(())
        }
        Err(e) => {
            p.abort()?;
            Err(e)
        }
    }
}

impl Workload {
    /// Bytes of data area `kind` needs for `params`.
    pub fn footprint(kind: Kind, params: &Params) -> u64 {
        by_kind!(kind, footprint_of(params.elements))
    }

    /// The most elements whose structure fits `bytes` of data area (paper 000 sizes
    /// its workloads by footprint: 1 to 6 GB); at least 2.
    pub fn elements_for_footprint(kind: Kind, params: &Params, bytes: u64) -> u64 {
        let fits = |e: u64| {
            Workload::footprint(
                kind,
                &Params {
                    elements: e,
                    ..*params
                },
            ) <= bytes
        };
        let (mut lo, mut hi) = (2u64, crate::header::MAX_ELEMENTS);
        if !fits(lo) {
            return lo;
        }
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if fits(mid) { lo = mid } else { hi = mid - 1 }
        }
        lo
    }

    /// Makes the structure in `area` (empty, then filled with its first elements), in
    /// transactions of `p`. Refuses an area too small for `params` before writing.
    pub fn format<P: Protocol>(
        p: &mut P,
        kind: Kind,
        params: &Params,
        area: Area,
    ) -> Result<Workload, WorkloadError> {
        if params.elements < 2 || params.elements > crate::header::MAX_ELEMENTS {
            return Err(WorkloadError::BadParams {
                workload: kind.name(),
                problem: format!(
                    "{} elements: between 2 and {} are possible",
                    params.elements,
                    crate::header::MAX_ELEMENTS
                ),
            });
        }
        let needed = Workload::footprint(kind, params);
        if needed > area.len {
            return Err(WorkloadError::TooSmall {
                workload: kind.name(),
                elements: params.elements,
                needed,
                have: area.len,
            });
        }
        let header = Header {
            base: area.base,
            name: kind.name(),
            elements: params.elements,
            footprint: needed,
            param: by_kind!(kind, param_of(params.elements)),
        };
        in_tx(p, |p| Ok(header.write(p)?))?;
        let mut w = Workload {
            kind,
            imp: imp_of(kind, &header)?,
            header,
            batch: Batch::new(),
        };
        let batch = &mut w.batch;
        each!(&mut w.imp, s => s.init(p, batch))?;
        Ok(w)
    }

    /// Opens the structure `kind` made earlier in `area`: checks its header (a
    /// structure of another kind, or one larger than the area, is refused by field).
    pub fn open<P: Protocol>(p: &mut P, kind: Kind, area: Area) -> Result<Workload, WorkloadError> {
        let header = Header::read(p, area.base, kind.name())?;
        let needed = by_kind!(kind, footprint_of(header.elements));
        if header.footprint != needed || needed > area.len {
            return Err(WorkloadError::BadHeader {
                addr: area.base,
                offset: 32,
                field: "footprint",
                problem: format!(
                    "{} bytes recorded; {} elements need {needed}, and the area holds {}",
                    header.footprint, header.elements, area.len
                ),
            });
        }
        Ok(Workload {
            kind,
            imp: imp_of(kind, &header)?,
            header,
            batch: Batch::new(),
        })
    }

    /// Sets how the B+-tree and the table read the nodes they only search
    /// ([`NodeReads`]; [`NodeReads::Whole`] unless set). The other workloads have no
    /// such nodes and ignore it. The structure and its contents are the same either
    /// way; only the reads differ.
    pub fn set_node_reads(&mut self, reads: NodeReads) {
        match &mut self.imp {
            Imp::BpTree(t) => t.set_node_reads(reads),
            Imp::Db(t) => t.set_node_reads(reads),
            _ => {}
        }
    }

    /// The workload.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Elements the structure was made for.
    pub fn elements(&self) -> u64 {
        self.header.elements
    }

    /// The data area's base.
    pub fn base(&self) -> Addr {
        self.header.base
    }

    /// How many elements operations pick among.
    pub fn universe(&self) -> u64 {
        each!(&self.imp, s => s.universe())
    }

    /// Runs one transaction of the workload (committed, or aborted on error).
    pub fn run_tx<P: Protocol>(&mut self, p: &mut P, ops: &mut Ops) -> Result<(), WorkloadError> {
        let batch = &mut self.batch;
        each!(&mut self.imp, s => s.run_tx(p, batch, ops))
    }

    /// Checks the structure's invariants (outside a transaction, after recovery) and
    /// returns what it holds.
    pub fn check<P: Protocol>(&self, p: &mut P) -> Result<Contents, CheckError> {
        each!(&self.imp, s => s.check(p))
    }
}

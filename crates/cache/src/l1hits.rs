//! The level-1 hit loop: the references of a batch that hit the top way of their
//! level-1 set, counted without touching the general machinery.
//!
//! Nearly every reference of a program trace is such a hit, so this loop sets the
//! simulator's speed. It only reads the tag arrays (a write counts as a hit only when
//! its block is already dirty, so that nothing changes), which lets a unified level 1 be
//! viewed twice, once per side, without aliasing a mutable borrow. Hits are counted in
//! one register, 16 bits per kind, rather than in memory, where consecutive increments of
//! the same counter would wait on each other through store forwarding.

use crate::cache::{Cache, DIRTY, VALID};
use pmlab_trace::{Kind, Ref};

/// Most references one call examines: a reference adds up to 2 to its kind's 16-bit
/// field of the packed fetch count, which must not overflow.
pub(crate) const MAX_RUN: usize = (u16::MAX / 2) as usize;

/// Where a block lives in a cache: the geometry the hit loop indexes by.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Geometry {
    lg2_block: u32,
    block_mask: u64,
    /// A block address shifted right by this, masked by `index_mask`, is the index of
    /// the top way of its set: one shift for the set number and for the multiplication
    /// by the associativity together.
    index_shift: u32,
    index_mask: usize,
}

/// What the hit loop needs of one level-1 cache.
#[derive(Clone, Copy)]
pub(crate) struct HitView<'a> {
    /// The cache's ways, set-major (only the top way of each set is examined).
    ways: &'a [u64],
    geometry: Geometry,
}

impl<'a> HitView<'a> {
    /// The view of `c`, or `None` when a hit may have to change state the loop does not
    /// keep (classification shadows, tree-PLRU bits), or when the cache has more ways
    /// than bytes in a block (the one-shift indexing needs `assoc <= block size`).
    pub(crate) fn of(c: &'a Cache) -> Option<Self> {
        let lg2_assoc = c.assoc.trailing_zeros();
        (c.fast_ok && lg2_assoc <= c.lg2_block).then(|| HitView {
            ways: &c.ways,
            geometry: Geometry {
                lg2_block: c.lg2_block,
                block_mask: c.block_mask,
                index_shift: c.lg2_block - lg2_assoc,
                index_mask: (c.set_mask << lg2_assoc) as usize,
            },
        })
    }
}

/// Counts packed 16 bits per kind, by `Kind as usize`.
#[derive(Clone, Copy, Default)]
pub(crate) struct PackedCounts(u64);

impl PackedCounts {
    /// The count of `kind`.
    pub(crate) fn get(self, kind: Kind) -> u64 {
        (self.0 >> (16 * kind as u32)) & 0xffff
    }
}

/// What [`leading_hits`] found.
pub(crate) struct Hits {
    /// References taken.
    pub refs: usize,
    /// Block accesses (fetches) by kind: one per reference, two for one that spans two
    /// blocks.
    pub fetches: PackedCounts,
    /// References that spanned two blocks, by kind.
    pub multi_block: PackedCounts,
}

/// Counts the leading references of `refs` (at most [`MAX_RUN`]) that are level-1 hits
/// changing nothing: a reference of one block, or of two (about one in twelve of an
/// x86 program's instruction fetches straddles a block boundary), each in the top way of
/// its set in `views[1]` (instruction fetches) or `views[0]` (everything else) and, for
/// a write, already dirty.
#[inline]
pub(crate) fn leading_hits(refs: &[Ref], views: &[HitView; 2]) -> Hits {
    let refs = &refs[..refs.len().min(MAX_RUN)];
    // Split level-1 caches nearly always share their geometry (and a unified one does
    // trivially): the loop then keeps it in registers and picks only the tag array by
    // kind. Monomorphised twice rather than branched on per reference.
    let (d, i) = (views[0].geometry, views[1].geometry);
    if d == i {
        scan(refs, views, |_| d)
    } else {
        scan(refs, views, |side| if side == 1 { i } else { d })
    }
}

#[inline(always)]
fn scan(refs: &[Ref], views: &[HitView; 2], geometry: impl Fn(usize) -> Geometry) -> Hits {
    // Slicing each tag array to exactly `index_mask + 1` ways lets the compiler see that
    // a masked index is in bounds.
    let ways = [0, 1].map(|side| &views[side].ways[..=geometry(side).index_mask]);
    let (mut fetches, mut multi) = (0u64, 0u64);
    let done = |n, fetches, multi| Hits {
        refs: n,
        fetches: PackedCounts(fetches),
        multi_block: PackedCounts(multi),
    };
    for (n, r) in refs.iter().enumerate() {
        let side = usize::from(r.kind == Kind::Instr);
        let (ways, g) = (ways[side], geometry(side));
        let top = |blk: u64| ways[(blk >> g.index_shift) as usize & g.index_mask];
        let (one, ignore_dirty) = PER_KIND[r.kind as usize];
        let blk = r.addr & !g.block_mask;
        if top(blk) | ignore_dirty != blk | VALID | DIRTY {
            return done(n, fetches, multi);
        }
        // Offset of the last byte from the block's start. A size of 0 wraps round at
        // offset 0 and goes to the general path, which treats it as one byte, as this
        // loop does at any other offset.
        let last = (r.addr & g.block_mask)
            .wrapping_add(u64::from(r.size))
            .wrapping_sub(1);
        if last > g.block_mask {
            let next = blk.wrapping_add(g.block_mask + 1);
            if last >> g.lg2_block > 1 || top(next) | ignore_dirty != next | VALID | DIRTY {
                return done(n, fetches, multi);
            }
            fetches += one;
            multi += one;
        }
        fetches += one;
    }
    done(refs.len(), fetches, multi)
}

/// By `Kind as usize`: one in the kind's 16-bit field of a packed count, and the bits
/// of a way a hit ignores ([`DIRTY`]: a read, fetch or misc hits a clean or dirty copy;
/// a write only a dirty one, since a clean one would have to change).
const PER_KIND: [(u64, u64); 4] = [(1, DIRTY), (1 << 16, 0), (1 << 32, DIRTY), (1 << 48, DIRTY)];

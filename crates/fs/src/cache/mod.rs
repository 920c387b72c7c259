//! libFS's cache of checked metadata: decoded inodes, lease ancestries, radix-tree
//! nodes and the data pages they lead to.
//!
//! Reading metadata from the mapping costs a page copy and a checksum per page; a read
//! or write of 4 KiB would pay that three or four times over. A lease is what makes
//! caching sound: while the client holds a lease covering an object, no other client
//! may change it, so what the client read under the lease stays true. The cache is
//! therefore emptied whenever that guarantee lapses or changes hands — when a lease is
//! acquired (what was read before it may be stale) or given back, and when the overlay
//! is dropped after the service applied what was shipped (an fsync, a lease change, the
//! overlay's size cap: the service's own allocations of metadata pages then replace the
//! client's provisional ones). The client's own recorded operations drop exactly the entries
//! whose pages they changed or freed: radix pages are cached by page number, and a
//! freed pool page keeps its old contents until the service places another file's
//! index page there, which it may do at a page the client's own check did not choose.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::Result;
use crate::inode::Inode;
use crate::layout::{INODES_PER_PAGE, Superblock};
use crate::media::{PageBuf, Tag};
use crate::view::PageSource;

mod stamps;
use stamps::Stamps;

/// Checked metadata, valid while the client's leases stay as they were.
#[derive(Default)]
pub struct MetaCache {
    /// By inode-table page (inode number / [`INODES_PER_PAGE`]): a lookup is two hash
    /// probes, and a change of one inode-table page drops its group in one step.
    groups: FxHashMap<u64, PageGroup>,
    ancestry: FxHashMap<u64, Vec<u64>>,
    radix_pages: FxHashMap<u64, PageBuf>,
    /// Keys found covered by a lease, (key, exclusive), while the lease table's loss
    /// count stood at `covered_at` (see [`crate::client`]'s lease table): cover only
    /// grows until a lease is lost, and every key's cached ancestry ends in its
    /// directory's, so a key covered here covers every key below it.
    covered: FxHashSet<(u64, bool)>,
    covered_at: u64,
    /// Objects libFS's local checks found covered (see `crate::apply::apply_batch_over`),
    /// carried from one check to the next under the same rule as `covered`; the
    /// checks themselves forget them where an operation took a name away or moved one.
    checked: FxHashSet<u64>,
    /// When what is held of each inode last changed (see [`MetaCache::unchanged_since`]).
    stamps: Stamps,
}

/// The cached inodes of one inode-table page, with their files' page maps.
#[derive(Default)]
struct PageGroup {
    inodes: FxHashMap<u64, Inode>,
    /// Per file: page index -> data page (0: a hole).
    leaves: FxHashMap<u64, FxHashMap<u64, u64>>,
}

impl PageGroup {
    /// Forgets every inode and page map of the group, keeping the tables' memory: an
    /// append changes its file's inode-table page, and the next append fills the
    /// same tables again (freeing and allocating them was three allocations a write).
    /// The entries of files whose maps are emptied stay, one per inode of the page at
    /// most, until the whole cache is cleared.
    fn forget_all(&mut self) {
        self.inodes.clear();
        for map in self.leaves.values_mut() {
            map.clear();
        }
    }
}

/// The group (inode-table page, counted from the table's first) of inode `ino`.
fn group_of(ino: u64) -> u64 {
    ino / INODES_PER_PAGE
}

impl MetaCache {
    /// Forgets everything.
    pub fn clear(&mut self) {
        self.stamps.everything();
        self.groups.clear();
        self.ancestry.clear();
        self.radix_pages.clear();
        self.covered.clear();
        self.checked.clear();
    }

    /// The tick of the cache's latest change: an inode read now from the media may be
    /// cached later if [`MetaCache::unchanged_since`] this tick.
    pub fn tick(&self) -> u64 {
        self.stamps.now()
    }

    /// Whether nothing the cache saw since tick `tick` dropped or rewrote inode `ino`
    /// or its page map, or would have had they been cached: what was read of them
    /// then may be cached now, as if cached then.
    pub fn unchanged_since(&self, tick: u64, ino: u64) -> bool {
        self.stamps.unchanged_since(tick, group_of(ino), ino)
    }

    /// A cached inode.
    pub fn inode(&self, ino: u64) -> Option<Inode> {
        self.groups.get(&group_of(ino))?.inodes.get(&ino).copied()
    }

    /// Remembers inode `ino`.
    pub fn put_inode(&mut self, ino: u64, i: Inode) {
        self.groups
            .entry(group_of(ino))
            .or_default()
            .inodes
            .insert(ino, i);
    }

    /// The cached lease ancestry of `key`.
    pub fn ancestry(&self, key: u64) -> Option<&[u64]> {
        self.ancestry.get(&key).map(|v| v.as_slice())
    }

    /// Remembers the lease ancestry of `key`.
    pub fn put_ancestry(&mut self, key: u64, up: Vec<u64>) {
        self.ancestry.insert(key, up);
    }

    /// Forgets the ancestry of `key` (a file's name went away). No other key's
    /// ancestry runs through a file's, so what was found covered of other keys stands.
    pub fn forget_ancestry(&mut self, key: u64) {
        self.ancestry.remove(&key);
        self.covered.remove(&(key, true));
        self.covered.remove(&(key, false));
    }

    /// Forgets every ancestry (a name moved or went away).
    pub fn forget_ancestries(&mut self) {
        self.ancestry.clear();
        self.covered.clear();
    }

    /// Forgets the keys found covered unless the lease table has lost nothing since
    /// (`losses` is its loss count now).
    pub fn covered_since(&mut self, losses: u64) {
        if self.covered_at != losses {
            self.covered.clear();
            self.checked.clear();
            self.covered_at = losses;
        }
    }

    /// Takes the objects the local checks found covered, unless the lease table has
    /// lost a lease since (`losses` is its loss count now), for the next check to carry.
    pub fn take_checked(&mut self, losses: u64) -> FxHashSet<u64> {
        self.covered_since(losses);
        std::mem::take(&mut self.checked)
    }

    /// Keeps what a local check found covered (its outcome's `covered`).
    pub fn put_checked(&mut self, checked: FxHashSet<u64>) {
        self.checked = checked;
    }

    /// Forgets what the local checks found covered (the overlay they ran over went).
    pub fn forget_checked(&mut self) {
        self.checked.clear();
    }

    /// Whether `key` was found covered (exclusively, if `exclusive`) since the last
    /// [`MetaCache::covered_since`] that forgot.
    pub fn is_covered(&self, key: u64, exclusive: bool) -> bool {
        self.covered.contains(&(key, true)) || (!exclusive && self.covered.contains(&(key, false)))
    }

    /// Whether `key` was found covered (exclusively, if `exclusive`) and the lease
    /// table has lost no lease since (`losses` is its loss count now). Unlike
    /// [`MetaCache::covered_since`] it forgets nothing, so it needs no exclusive use.
    pub fn is_covered_as_of(&self, losses: u64, key: u64, exclusive: bool) -> bool {
        self.covered_at == losses && self.is_covered(key, exclusive)
    }

    /// Remembers that `key` is covered (exclusively, if `exclusive`).
    pub fn put_covered(&mut self, key: u64, exclusive: bool) {
        self.covered.insert((key, exclusive));
    }

    /// The cached data page of page `index` of file `ino`.
    pub fn leaf(&self, ino: u64, index: u64) -> Option<u64> {
        self.groups
            .get(&group_of(ino))?
            .leaves
            .get(&ino)?
            .get(&index)
            .copied()
    }

    /// The cached data pages of pages `first..=last` of file `ino`, if every one of
    /// them is cached: one lookup of the file's page map for a whole read.
    pub fn leaves(&self, ino: u64, first: u64, last: u64) -> Option<Vec<u64>> {
        let map = self.groups.get(&group_of(ino))?.leaves.get(&ino)?;
        (first..=last).map(|i| map.get(&i).copied()).collect()
    }

    /// Remembers that page `index` of file `ino` is data page `page`.
    pub fn put_leaf(&mut self, ino: u64, index: u64, page: u64) {
        self.groups
            .entry(group_of(ino))
            .or_default()
            .leaves
            .entry(ino)
            .or_default()
            .insert(index, page);
    }

    /// Drops what the client's own change (or freeing) of metadata pages `pages` made
    /// stale: those radix nodes, and the inodes (with their page maps) stored on those pages. Every
    /// change of a file's tree also rewrites its inode, so its page map goes with it.
    ///
    /// Every recorded operation calls this, so it removes only the cached inodes of each
    /// changed inode-table page, which are one group: a sweep of the whole cache would
    /// cost as much as the cache holds (thousands of inodes after a run of creates) on
    /// every 4 KiB append, and a removal per inode number of the page would cost a
    /// page's worth of lookups when one or two of them are cached.
    pub fn forget_pages(&mut self, sb: &Superblock, pages: impl Iterator<Item = u64>) {
        for p in pages {
            self.radix_pages.remove(&p);
            if !(sb.itable_first..sb.pool_first).contains(&p) {
                continue;
            }
            self.stamps.group(p - sb.itable_first);
            if let Some(g) = self.groups.get_mut(&(p - sb.itable_first)) {
                g.forget_all();
            }
        }
    }

    /// Brings what was read from metadata pages `pages`, which the client's own
    /// recorded step changed, up to the step: a changed radix node goes, and of the
    /// inodes the step wrote (`written`: only `Txn::put_inode` writes an inode slot)
    /// each cached one is decoded afresh from its page's new image (`images`, the
    /// overlay after the step) and loses its page map (every change of a file's tree
    /// rewrites its inode). The other inodes of those pages, and their maps, stay:
    /// forgetting a changed page's whole group meant that a KVFS put or a log append
    /// made the next reads of some thirty other files take the state alone to read
    /// their inodes again (`client::shared`).
    pub fn refresh_written(
        &mut self,
        sb: &Superblock,
        pages: impl Iterator<Item = u64>,
        written: &[u64],
        images: &FxHashMap<u64, PageBuf>,
    ) {
        for p in pages {
            self.radix_pages.remove(&p);
        }
        for &ino in written {
            self.stamps.inode(ino);
            let Some(g) = self.groups.get_mut(&group_of(ino)) else {
                continue;
            };
            if let Some(m) = g.leaves.get_mut(&ino) {
                m.clear();
            }
            let Some(cached) = g.inodes.get_mut(&ino) else {
                continue;
            };
            let (pno, off) = sb.inode_pos(ino);
            let slot = images
                .get(&pno)
                .map(|img| &img[off..off + crate::inode::INODE_SIZE]);
            match slot.map(Inode::decode) {
                Some(Ok(now)) => *cached = now,
                _ => {
                    g.inodes.remove(&ino);
                }
            }
        }
    }

    /// Drops inode `ino` and its page map.
    pub fn forget_inode(&mut self, ino: u64) {
        self.stamps.inode(ino);
        if let Some(g) = self.groups.get_mut(&group_of(ino)) {
            g.inodes.remove(&ino);
            g.leaves.remove(&ino);
        }
    }

    /// Drops the page map of file `ino`.
    pub fn forget_leaves(&mut self, ino: u64) {
        self.stamps.inode(ino);
        if let Some(g) = self.groups.get_mut(&group_of(ino)) {
            g.leaves.remove(&ino);
        }
    }
}

/// A page source that serves radix nodes from the cache, reading (and remembering)
/// the ones it lacks from `inner`.
pub struct CachedRadix<'a, S: PageSource + ?Sized> {
    /// Where missing pages come from.
    pub inner: &'a mut S,
    /// The cache filled on the way.
    pub cache: &'a mut MetaCache,
    /// The client's own changed pages, which `inner` lays over the media: they are in
    /// memory already, and a cached clone would share an image with the overlay, so
    /// that the next recorded change of it (the next append's, to the same index
    /// page) would copy all 4 KiB of it first.
    pub own: &'a crate::txn::Changes,
}

impl<S: PageSource + ?Sized> PageSource for CachedRadix<'_, S> {
    fn sb(&self) -> &Superblock {
        self.inner.sb()
    }
    fn page(&mut self, pno: u64, tag: Tag) -> Result<PageBuf> {
        if tag == Tag::Radix
            && let Some(p) = self.cache.radix_pages.get(&pno)
        {
            return Ok(p.clone());
        }
        let p = self.inner.page(pno, tag)?;
        if tag == Tag::Radix && !self.own.contains_key(&pno) {
            self.cache.radix_pages.insert(pno, p.clone());
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inode::{INODE_SIZE, Kind};
    use crate::layout::Params;

    fn file(size: u64) -> Inode {
        Inode {
            kind: Kind::File,
            nlink: 1,
            size,
            ..Inode::FREE
        }
    }

    /// Of the inodes on a page the client's own step changed, the ones it wrote are
    /// decoded afresh and lose their page maps; the other cached inodes of the page
    /// keep theirs; a written inode whose page has no image goes.
    #[test]
    fn a_step_refreshes_the_inodes_it_wrote_and_keeps_their_neighbours() {
        let sb = Superblock::plan(&Params::default()).unwrap();
        let (a, b) = (INODES_PER_PAGE + 3, INODES_PER_PAGE + 4);
        let (pno, _) = sb.inode_pos(a);
        let mut c = MetaCache::default();
        for ino in [a, b] {
            c.put_inode(ino, file(4096));
            c.put_leaf(ino, 0, 100 + ino);
        }
        let mut img = crate::pagebuf::zero_page();
        for (ino, i) in [(a, file(8192)), (b, file(4096))] {
            let (_, off) = sb.inode_pos(ino);
            i.encode(&mut img[off..off + INODE_SIZE]);
        }
        let images: FxHashMap<u64, PageBuf> = [(pno, img)].into_iter().collect();
        c.refresh_written(&sb, std::iter::once(pno), &[a], &images);
        assert_eq!(
            c.inode(a),
            Some(file(8192)),
            "a written inode is read afresh"
        );
        assert_eq!(c.leaf(a, 0), None, "a written inode's page map goes");
        assert_eq!(c.inode(b), Some(file(4096)), "an inode not written stays");
        assert_eq!(c.leaf(b, 0), Some(100 + b), "with its page map");
        c.refresh_written(&sb, std::iter::once(pno), &[b], &FxHashMap::default());
        assert_eq!(c.inode(b), None, "a written inode with no image goes");
        assert_eq!(c.inode(a), Some(file(8192)), "and only that one");
    }

    /// Every change the cache sees stamps what it touched, cached or not: a find of an
    /// inode from before a rewrite of it, a drop of its page map, a change of its
    /// inode-table page or a clear is refused; a find nothing touched stands.
    #[test]
    fn changes_stamp_what_they_touch_cached_or_not() {
        let sb = Superblock::plan(&Params::default()).unwrap();
        let (a, b) = (INODES_PER_PAGE + 3, 2 * INODES_PER_PAGE + 1);
        let mut c = MetaCache::default();
        let t = c.tick();
        c.refresh_written(&sb, std::iter::empty(), &[a], &FxHashMap::default());
        assert!(
            !c.unchanged_since(t, a),
            "an inode written while not cached"
        );
        assert!(c.unchanged_since(t, b), "an inode not written");
        let t = c.tick();
        let (pb, _) = sb.inode_pos(b);
        c.forget_pages(&sb, std::iter::once(pb));
        assert!(!c.unchanged_since(t, b), "an inode of a changed page");
        assert!(c.unchanged_since(t, a), "an inode of another page");
        let t = c.tick();
        c.forget_leaves(a);
        assert!(!c.unchanged_since(t, a), "a file whose page map went");
        let t = c.tick();
        c.forget_inode(b);
        assert!(!c.unchanged_since(t, b), "a dropped inode");
        assert!(c.unchanged_since(t, a), "and only that one");
        let t = c.tick();
        c.clear();
        assert!(!c.unchanged_since(t, a), "anything, after a clear");
        assert!(c.unchanged_since(c.tick(), a), "a find after every change");
    }
}

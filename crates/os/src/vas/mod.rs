//! SpaceJMP's OS objects in the model (El Hajj et al., ASPLOS 2016, §3-4): segments that
//! own physical frames, and address spaces that are sets of non-overlapping segments,
//! each with its own radix page table.
//!
//! A segment's frames are reserved when it is created (as DragonFly's SpaceJMP does) and
//! shared by every address space it is attached to: attaching builds page-table entries
//! to the same frames, detaching tears them down, and both are counted in
//! [`TableWork`]. An address space covers `va_bits` of virtual address; a segment that
//! does not fit is refused, which is §2.1's "not enough VA bits" problem made visible.

mod radix;

pub use radix::{ENTRIES_PER_TABLE, RadixTable, TableWork, tables_for_aligned_run};

use std::collections::BTreeMap;

use crate::{Asid, PageSize, Vpn};

/// A segment of the model: `pages` frames behind virtual pages `base_vpn..`.
#[derive(Clone, Debug)]
pub struct ModelSegment {
    /// First virtual page.
    pub base_vpn: Vpn,
    /// Its frames, one per page, in page order.
    pub frames: Vec<u64>,
}

/// Why the model refused an operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VasModelError {
    /// Not enough physical frames for a new segment.
    #[error("out of physical memory: {wanted} frames wanted, {free} free")]
    OutOfFrames {
        /// Frames asked for.
        wanted: u64,
        /// Frames free.
        free: u64,
    },
    /// The segment ends beyond the virtual addresses an address space has.
    #[error("segment [{base:#x}, {end:#x}) does not fit in {va_bits} virtual address bits")]
    NotEnoughVaBits {
        /// Segment base address.
        base: u64,
        /// Segment end address.
        end: u64,
        /// Virtual address bits of an address space.
        va_bits: u32,
    },
    /// The segment overlaps one already attached to the address space.
    #[error("segment {segment} overlaps segment {other} in address space {asid}")]
    Overlap {
        /// The segment being attached.
        segment: u32,
        /// The one in the way.
        other: u32,
        /// The address space.
        asid: Asid,
    },
    /// No such segment or address space, or the segment is not attached.
    #[error("no {what} {id}")]
    Unknown {
        /// What was looked for.
        what: &'static str,
        /// Its id.
        id: u64,
    },
    /// A base or size that is not a multiple of the page size.
    #[error("{field} {value:#x} is not a multiple of the {page} page")]
    Unaligned {
        /// Which argument.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The page size.
        page: PageSize,
    },
}

#[derive(Clone, Debug)]
struct Space {
    table: RadixTable,
    /// Attached segments and whether writable.
    attached: BTreeMap<u32, bool>,
}

/// Segments, address spaces and physical frames of the model.
#[derive(Clone, Debug)]
pub struct SegmentSpaces {
    page: PageSize,
    va_bits: u32,
    frames: u64,
    free: Vec<u64>,
    next_frame: u64,
    segments: BTreeMap<u32, ModelSegment>,
    next_segment: u32,
    spaces: BTreeMap<Asid, Space>,
    /// Work of tables that no longer exist.
    retired: TableWork,
}

impl SegmentSpaces {
    /// `frames` physical frames of `page`, address spaces of `va_bits` virtual bits.
    pub fn new(page: PageSize, va_bits: u32, frames: u64) -> Self {
        SegmentSpaces {
            page,
            va_bits,
            frames,
            free: Vec::new(),
            next_frame: 0,
            segments: BTreeMap::new(),
            next_segment: 0,
            spaces: BTreeMap::new(),
            retired: TableWork::default(),
        }
    }

    /// The page size.
    pub fn page_size(&self) -> PageSize {
        self.page
    }

    /// Virtual address bits of every address space.
    pub fn va_bits(&self) -> u32 {
        self.va_bits
    }

    /// Frames not owned by any segment.
    pub fn free_frames(&self) -> u64 {
        self.frames - self.next_frame + self.free.len() as u64
    }

    /// Creates a segment of `size` bytes at virtual `base`, reserving its frames now.
    pub fn create_segment(&mut self, base: u64, size: u64) -> Result<u32, VasModelError> {
        let p = self.page.bytes();
        for (field, value) in [("base", base), ("size", size)] {
            if value % p != 0 {
                return Err(VasModelError::Unaligned {
                    field,
                    value,
                    page: self.page,
                });
            }
        }
        let pages = size / p;
        if pages > self.free_frames() {
            return Err(VasModelError::OutOfFrames {
                wanted: pages,
                free: self.free_frames(),
            });
        }
        let frames = (0..pages)
            .map(|_| {
                self.free.pop().unwrap_or_else(|| {
                    self.next_frame += 1;
                    self.next_frame - 1
                })
            })
            .collect();
        let id = self.next_segment;
        self.next_segment += 1;
        self.segments.insert(
            id,
            ModelSegment {
                base_vpn: base / p,
                frames,
            },
        );
        Ok(id)
    }

    /// The segment `id`.
    pub fn segment(&self, id: u32) -> Option<&ModelSegment> {
        self.segments.get(&id)
    }

    /// Destroys segment `id`: detached from every space, its frames freed.
    pub fn destroy_segment(&mut self, id: u32) -> Result<(), VasModelError> {
        let holders: Vec<Asid> = self
            .spaces
            .iter()
            .filter(|(_, s)| s.attached.contains_key(&id))
            .map(|(&a, _)| a)
            .collect();
        for asid in holders {
            self.detach(asid, id)?;
        }
        let seg = self.segments.remove(&id).ok_or(VasModelError::Unknown {
            what: "segment",
            id: u64::from(id),
        })?;
        self.free.extend(seg.frames.iter().rev());
        Ok(())
    }

    /// Creates an empty address space `asid` (its root table allocated); an existing one
    /// is kept.
    pub fn create_space(&mut self, asid: Asid) {
        let (page, bits) = (self.page, self.va_bits);
        self.spaces.entry(asid).or_insert_with(|| Space {
            table: RadixTable::new(page, bits),
            attached: BTreeMap::new(),
        });
    }

    /// Destroys address space `asid`, tearing its whole table down.
    pub fn destroy_space(&mut self, asid: Asid) -> Result<TableWork, VasModelError> {
        let mut s = self.spaces.remove(&asid).ok_or(VasModelError::Unknown {
            what: "address space",
            id: u64::from(asid),
        })?;
        let before = s.table.work();
        s.table.destroy();
        let mut done = s.table.work();
        self.retired.add(done);
        done.entry_writes -= before.entry_writes;
        done.tables_freed -= before.tables_freed;
        done.tables_allocated = 0;
        Ok(done)
    }

    fn space_mut(&mut self, asid: Asid) -> Result<&mut Space, VasModelError> {
        self.spaces.get_mut(&asid).ok_or(VasModelError::Unknown {
            what: "address space",
            id: u64::from(asid),
        })
    }

    /// Attaches segment `id` to `asid`, writing one page-table entry per page. Returns
    /// the table work it took.
    pub fn attach(
        &mut self,
        asid: Asid,
        id: u32,
        writable: bool,
    ) -> Result<TableWork, VasModelError> {
        let seg = self.segments.get(&id).ok_or(VasModelError::Unknown {
            what: "segment",
            id: u64::from(id),
        })?;
        let (base, pages) = (seg.base_vpn, seg.frames.len() as u64);
        let shift = self.page.shift();
        let va_bits = self.va_bits;
        let ranges: Vec<(u32, Vpn, u64)> = self
            .segments
            .iter()
            .map(|(&k, s)| (k, s.base_vpn, s.frames.len() as u64))
            .collect();
        let space = self.space_mut(asid)?;
        if base.checked_add(pages).is_none() || !space.table.covers(base + pages.max(1) - 1) {
            return Err(VasModelError::NotEnoughVaBits {
                base: base << shift,
                end: (base + pages) << shift,
                va_bits,
            });
        }
        for &(other, b, n) in &ranges {
            if other != id
                && space.attached.contains_key(&other)
                && b < base + pages
                && base < b + n
            {
                return Err(VasModelError::Overlap {
                    segment: id,
                    other,
                    asid,
                });
            }
        }
        let before = space.table.work();
        space.attached.insert(id, writable);
        let frames = self.segments[&id].frames.clone();
        let space = self.spaces.get_mut(&asid).expect("checked above");
        for (i, f) in frames.into_iter().enumerate() {
            space.table.map(base + i as u64, f, writable);
        }
        Ok(diff(space.table.work(), before))
    }

    /// Detaches segment `id` from `asid`, clearing its entries and freeing empty tables.
    pub fn detach(&mut self, asid: Asid, id: u32) -> Result<TableWork, VasModelError> {
        let seg = self.segments.get(&id).ok_or(VasModelError::Unknown {
            what: "segment",
            id: u64::from(id),
        })?;
        let (base, pages) = (seg.base_vpn, seg.frames.len() as u64);
        let space = self.space_mut(asid)?;
        if space.attached.remove(&id).is_none() {
            return Err(VasModelError::Unknown {
                what: "attachment of segment",
                id: u64::from(id),
            });
        }
        let before = space.table.work();
        for vpn in base..base + pages {
            space.table.unmap(vpn);
        }
        Ok(diff(space.table.work(), before))
    }

    /// The frame and writability of page `vpn` in `asid`.
    #[inline]
    pub fn translate(&self, asid: Asid, vpn: Vpn) -> Option<(u64, bool)> {
        self.spaces.get(&asid)?.table.translate(vpn)
    }

    /// The page table of `asid`.
    pub fn table(&self, asid: Asid) -> Option<&RadixTable> {
        self.spaces.get(&asid).map(|s| &s.table)
    }

    /// All page-table work so far, of live and destroyed spaces.
    pub fn work(&self) -> TableWork {
        let mut w = self.retired;
        for s in self.spaces.values() {
            w.add(s.table.work());
        }
        w
    }

    /// Checks that every attached page maps its segment's frame and no frame is owned
    /// twice.
    pub fn check(&self) -> Result<(), String> {
        let mut owner = std::collections::HashMap::new();
        for (&id, s) in &self.segments {
            for &f in &s.frames {
                if f >= self.frames {
                    return Err(format!("segment {id} owns frame {f} beyond memory"));
                }
                if let Some(o) = owner.insert(f, id) {
                    return Err(format!("frame {f} owned by segments {o} and {id}"));
                }
            }
        }
        for (asid, space) in &self.spaces {
            let mut expected = 0;
            for (&id, &w) in &space.attached {
                let s = &self.segments[&id];
                for (i, &f) in s.frames.iter().enumerate() {
                    let vpn = s.base_vpn + i as u64;
                    if space.table.translate(vpn) != Some((f, w)) {
                        return Err(format!(
                            "space {asid}: page {vpn} of segment {id} not mapped to {f}"
                        ));
                    }
                }
                expected += s.frames.len() as u64;
            }
            if space.table.mapped_pages() != expected {
                return Err(format!("space {asid} maps pages of no attached segment"));
            }
        }
        Ok(())
    }
}

fn diff(after: TableWork, before: TableWork) -> TableWork {
    TableWork {
        entry_writes: after.entry_writes - before.entry_writes,
        tables_allocated: after.tables_allocated - before.tables_allocated,
        tables_freed: after.tables_freed - before.tables_freed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_in_two_spaces_shares_its_frames() {
        let mut m = SegmentSpaces::new(PageSize::KIB_4, 48, 64);
        let s = m.create_segment(0x10000, 8 << 12).unwrap();
        m.create_space(1);
        m.create_space(2);
        m.attach(1, s, true).unwrap();
        m.attach(2, s, false).unwrap();
        assert_eq!(
            m.translate(1, 0x10).map(|t| t.0),
            m.translate(2, 0x10).map(|t| t.0)
        );
        assert!(!m.translate(2, 0x10).unwrap().1);
        m.check().unwrap();
        m.detach(1, s).unwrap();
        assert_eq!(m.translate(1, 0x10), None);
        assert!(m.translate(2, 0x10).is_some());
        m.check().unwrap();
    }

    #[test]
    fn too_few_va_bits_and_overlaps_are_refused() {
        let mut m = SegmentSpaces::new(PageSize::KIB_4, 20, 1024);
        let fits = m.create_segment(0, 1 << 20).unwrap();
        let beyond = m.create_segment(1 << 20, 1 << 12).unwrap();
        let over = m.create_segment(0x8000, 1 << 12).unwrap();
        m.create_space(1);
        m.attach(1, fits, true).unwrap();
        assert!(matches!(
            m.attach(1, beyond, true),
            Err(VasModelError::NotEnoughVaBits { .. })
        ));
        assert!(matches!(
            m.attach(1, over, true),
            Err(VasModelError::Overlap { .. })
        ));
        assert!(matches!(
            m.create_segment(0, 1 << 30),
            Err(VasModelError::OutOfFrames { .. })
        ));
        m.destroy_segment(fits).unwrap();
        assert_eq!(m.table(1).unwrap().mapped_pages(), 0);
        m.check().unwrap();
    }
}

//! Where OSP keeps its persistent state, in the area the pool gives its log
//! ("meta" here), and the data area's frames.
//!
//! | offset | size | what |
//! |-------:|-----:|------|
//! | 0 | 64 | superblock: `magic` `PMLABOSP`, `version`, first data page, data pages, spare frames, journal lines, first spare frame, the checkpoint word (`group << 1 \| region`) |
//! | 64 | 64 | the super page's committed bitmap (super-page variant) |
//! | 128 | 8 per data page | the page map: each data page's frame (the persistent page table) |
//! | | 64 + 32 per tuple | checkpoint region A: tuple count, then tuples `<V+1, P0, P1, CB>` |
//! | | same | checkpoint region B |
//! | | 64 per record | the journal |
//! | page-aligned | 2 pages | the super page's two frames |
//! | page-aligned | 4 KiB each | the spare frames |
//!
//! Frames are named by their physical page number. The data area's pages are virtual
//! pages; when the pool is made virtual page `v` is frame `v` (the data area is
//! identity-mapped) and the spare frames are free.

use pmlab_model::Machine;
use pmlab_spine::{LINE, Memory};
use pmlab_tx::{Area, TxError};

/// The page size OSP runs with: 64 lines, so a bitmap is one 8-byte word.
pub const PAGE: u64 = 4096;
/// Lines per page.
pub const LINES: u64 = PAGE / LINE;
/// The magic of OSP's superblock.
pub const MAGIC: u64 = u64::from_le_bytes(*b"PMLABOSP");
/// The layout version.
pub const VERSION: u64 = 1;
/// Bytes of a tuple in a checkpoint region or the super page.
pub const TUPLE: u64 = 32;
/// Where the checkpoint word is in the superblock.
pub const CKPT_AT: u64 = 56;
/// Tuples the super page holds.
pub const SUPER_TUPLES: u64 = PAGE / TUPLE;

/// OSP's geometry in physical memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The area OSP's state lives in.
    pub meta: Area,
    /// First data page (virtual page number; frame number at format).
    pub first_vpn: u64,
    /// Data pages.
    pub pages: u64,
    /// Spare frames.
    pub spare: u64,
    /// First spare frame.
    pub first_spare: u64,
    /// Journal records.
    pub journal_lines: u64,
    /// Physical address of the page map.
    pub page_map: u64,
    /// Physical addresses of the two checkpoint regions.
    pub regions: [u64; 2],
    /// Physical address of the journal.
    pub journal: u64,
    /// The super page's two frames.
    pub super_frames: [u64; 2],
}

fn up(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}

fn bad_area(meta: Area, problem: String) -> TxError {
    TxError::BadArea {
        structure: "OSP state",
        addr: meta.base,
        problem,
    }
}

impl Layout {
    /// Bytes of one checkpoint region for `spare` tuples.
    fn region_len(spare: u64) -> u64 {
        LINE + up(spare * TUPLE, LINE)
    }

    /// Bytes of the state area for a data area of `data_len` bytes.
    pub fn meta_len(data_len: u64, spare: u64, journal_lines: u64) -> u64 {
        let pages = data_len.div_ceil(PAGE);
        let fixed = 2 * LINE + up(pages * 8, LINE) + 2 * Self::region_len(spare);
        up(fixed + journal_lines * LINE, PAGE) + 2 * PAGE + spare * PAGE
    }

    /// Plans the layout in `meta` for the page-aligned `data`; an error if it does
    /// not fit or the areas are not page-aligned.
    pub fn plan(meta: Area, data: Area, spare: u64, journal_lines: u64) -> Result<Self, TxError> {
        let aligned = |a: Area| a.base % PAGE == 0 && a.len % PAGE == 0;
        if !aligned(meta) || !aligned(data) || data.len == 0 {
            return Err(bad_area(
                meta,
                format!(
                    "the state area [{:#x}, {:#x}) and the data area [{:#x}, {:#x}) must be non-empty whole 4 KiB pages",
                    meta.base,
                    meta.end(),
                    data.base,
                    data.end()
                ),
            ));
        }
        let need = Self::meta_len(data.len, spare, journal_lines);
        if meta.len < need {
            return Err(bad_area(
                meta,
                format!(
                    "{} bytes, but {} data pages, {spare} spare frames and {journal_lines} journal records need {need}",
                    meta.len,
                    data.len / PAGE
                ),
            ));
        }
        let pages = data.len / PAGE;
        let page_map = meta.base + 2 * LINE;
        let region_a = page_map + up(pages * 8, LINE);
        let region_b = region_a + Self::region_len(spare);
        let journal = region_b + Self::region_len(spare);
        let super0 = up(journal + journal_lines * LINE, PAGE);
        Ok(Layout {
            meta,
            first_vpn: data.base / PAGE,
            pages,
            spare,
            first_spare: (super0 + 2 * PAGE) / PAGE,
            journal_lines,
            page_map,
            regions: [region_a, region_b],
            journal,
            super_frames: [super0 / PAGE, super0 / PAGE + 1],
        })
    }

    /// Whether virtual page `vpn` is a data page.
    pub fn is_data(&self, vpn: u64) -> bool {
        vpn >= self.first_vpn && vpn < self.first_vpn + self.pages
    }

    /// Every frame data may live in: the data area's and the spare ones.
    pub fn frames(&self) -> impl Iterator<Item = u64> + '_ {
        (self.first_vpn..self.first_vpn + self.pages)
            .chain(self.first_spare..self.first_spare + self.spare)
    }

    /// Whether `pfn` is a frame data may live in.
    pub fn is_frame(&self, pfn: u64) -> bool {
        self.is_data(pfn) || (pfn >= self.first_spare && pfn < self.first_spare + self.spare)
    }

    /// Physical address of the page-map word of `vpn`.
    pub fn pte_addr(&self, vpn: u64) -> u64 {
        self.page_map + 8 * (vpn - self.first_vpn)
    }

    fn superblock(&self) -> [u8; LINE as usize] {
        let mut b = [0u8; LINE as usize];
        let words = [
            MAGIC,
            VERSION,
            self.first_vpn,
            self.pages,
            self.spare,
            self.journal_lines,
            self.first_spare,
        ];
        for (i, w) in words.iter().enumerate() {
            b[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// Writes a fresh state: the superblock, the identity page map, empty checkpoint
    /// regions, an empty journal and super page; all durable when it returns.
    pub fn format(&self, m: &mut Machine) -> Result<(), TxError> {
        let mut p = m.phys();
        let zero_from = self.meta.base;
        let zero_to = self.super_frames[1] * PAGE + PAGE;
        let zeros = vec![0u8; PAGE as usize];
        let mut at = zero_from;
        while at < zero_to {
            let n = (zero_to - at).min(PAGE);
            p.write(at, &zeros[..n as usize])?;
            at += n;
        }
        p.write(self.meta.base, &self.superblock())?;
        let mut map = Vec::with_capacity(self.pages as usize * 8);
        for v in self.first_vpn..self.first_vpn + self.pages {
            map.extend_from_slice(&v.to_le_bytes());
        }
        p.write(self.page_map, &map)?;
        p.machine().persist_all();
        Ok(())
    }

    /// Checks that the superblock in memory describes this layout.
    pub fn check(&self, m: &mut Machine) -> Result<(), TxError> {
        let mut b = [0u8; LINE as usize];
        m.phys().read(self.meta.base, &mut b)?;
        let want = self.superblock();
        let names = [
            "magic",
            "version",
            "first data page",
            "data pages",
            "spare frames",
            "journal records",
            "first spare frame",
        ];
        for (i, field) in names.iter().enumerate() {
            let r = 8 * i..8 * i + 8;
            if b[r.clone()] != want[r.clone()] {
                let got = u64::from_le_bytes(b[r.clone()].try_into().expect("8 bytes"));
                let exp = u64::from_le_bytes(want[r].try_into().expect("8 bytes"));
                return Err(TxError::BadHeader {
                    structure: "OSP superblock",
                    addr: self.meta.base,
                    offset: 8 * i as u64,
                    field,
                    problem: format!("{got:#x} where this machine's OSP expects {exp:#x}"),
                });
            }
        }
        Ok(())
    }
}

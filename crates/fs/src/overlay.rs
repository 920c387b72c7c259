//! A client's view of the metadata: the service's read-only mapping with the client's
//! own not-yet-shipped changes laid over it, page by page.
//!
//! libFS computes those changes with the very function the service validates with
//! ([`crate::apply::apply_batch`]), so its view of its own operations is exactly what the
//! service will make of them. The overlay is dropped whenever the journal is shipped.
//!
//! Reading the mapping races with the service: after a redo commit it copies the new
//! page images in place, and a page shared by several leases (a bitmap, an inode-table
//! page holding other clients' inodes) may be rewritten while this client copies it.
//! Such a torn copy fails its checksum. Whole-page reads from the mapping are therefore
//! re-read until the copy is sound, for a bounded time ([`TORN_READ_PATIENCE`]). Of the
//! fixes open here this is the one in the spirit of Aerie: the client keeps reading
//! shared metadata directly, without a call into the service and without a lock the
//! service would have to take around every in-place write (a seqlock page would make
//! every commit pay for a reader that is rarely there). A page still unsound after the
//! bound is handed up unchanged, so real damage is still reported as corruption.

use rustc_hash::FxHashMap;
use std::time::{Duration, Instant};

use pmlab_spine::{Addr, SpineError};

use crate::media::{BODY, MediaRead, PAGE, PageBuf, Tag, le, read_checked, verify};
use crate::txn::{Changes, Clean};

/// How long a torn page is re-read before it is taken for damaged: long enough for the
/// service to be descheduled in the middle of its in-place copy on a busy machine.
pub const TORN_READ_PATIENCE: Duration = Duration::from_secs(2);

/// Re-reads before the first sleep: a rewrite in progress usually ends within them.
const SPINS: u32 = 64;

/// The base mapping plus the client's pending page images.
pub struct Overlay<'a, R: MediaRead + ?Sized> {
    /// The mapped metadata space.
    pub base: &'a mut R,
    /// Pending page images.
    pub pages: &'a Changes,
    /// Sound whole pages already read from `base` through this overlay: one operation
    /// reading a page twice gets the same image, for the price of a copy.
    seen: FxHashMap<u64, PageBuf>,
    /// Whether pages read are kept in `seen`. A transaction keeps the pages it read
    /// itself, and a second reference here would make it copy every page it changes.
    remember: bool,
    /// Checked images kept from earlier reads (libFS's clean pages), read before `base`.
    clean: Option<&'a Clean>,
}

impl<'a, R: MediaRead + ?Sized> Overlay<'a, R> {
    /// `pages` laid over `base`.
    pub fn new(base: &'a mut R, pages: &'a Changes) -> Self {
        Overlay {
            base,
            pages,
            seen: FxHashMap::default(),
            remember: true,
            clean: None,
        }
    }

    /// `pages` laid over `clean` laid over `base`.
    pub fn with_clean(base: &'a mut R, pages: &'a Changes, clean: &'a Clean) -> Self {
        Overlay {
            clean: Some(clean),
            ..Overlay::new(base, pages)
        }
    }

    /// A whole page this overlay holds an image of, pending or already read. Of the
    /// clean pages, only those of objects under leases (inodes, directories, file
    /// indexes) are read here: what a lease covers changes only through its holder,
    /// and libFS drops its clean pages whenever it takes a lease. The domain table and
    /// the bitmaps belong to no lease; they are read from the mapping.
    fn known(&self, pno: u64) -> Option<&PageBuf> {
        self.pages
            .get(&pno)
            .or_else(|| self.seen.get(&pno))
            .or_else(|| {
                self.clean
                    .and_then(|c| c.get(&pno))
                    .filter(|p| under_leases(le::u32_at(&p[..], BODY + 4)))
            })
    }

    /// `pages` laid over `base` for one transaction ([`crate::txn::Txn`]), which keeps
    /// every page it reads: the overlay does not keep them too.
    pub fn for_txn(base: &'a mut R, pages: &'a Changes) -> Self {
        Overlay {
            remember: false,
            ..Overlay::new(base, pages)
        }
    }
}

/// Whether pages of kind `tag` hold objects that leases cover.
fn under_leases(tag: u32) -> bool {
    [Tag::Inodes, Tag::DirRoot, Tag::DirBucket, Tag::Radix]
        .iter()
        .any(|&t| t as u32 == tag)
}

/// Whether a whole-page image carries a checksum that matches its body.
fn sound(page: &[u8]) -> bool {
    let stored = u32::from_le_bytes(page[BODY..BODY + 4].try_into().unwrap());
    stored == crc32fast::hash(&page[..BODY])
}

/// Reads the page at `addr` from `base` into `buf`, again while it is torn; true if
/// the copy is sound.
fn read_whole_page<R: MediaRead + ?Sized>(
    base: &mut R,
    addr: Addr,
    buf: &mut [u8],
) -> Result<bool, SpineError> {
    base.media_read(addr, buf)?;
    if sound(buf) {
        return Ok(true);
    }
    let start = Instant::now();
    let mut tries = 0u32;
    while start.elapsed() < TORN_READ_PATIENCE {
        if tries < SPINS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(100));
        }
        tries += 1;
        base.media_read(addr, buf)?;
        if sound(buf) {
            return Ok(true);
        }
    }
    Ok(false)
}

impl<R: MediaRead + ?Sized> MediaRead for Overlay<'_, R> {
    fn media_size(&self) -> u64 {
        self.base.media_size()
    }
    fn media_read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        pmlab_spine::check_bounds(addr, buf.len() as u64, self.media_size())?;
        let mut done = 0usize;
        while done < buf.len() {
            let a = addr + done as u64;
            let pno = a / PAGE;
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(buf.len() - done);
            match self.pages.get(&pno) {
                Some(p) => buf[done..done + n].copy_from_slice(&p[off..off + n]),
                None if off == 0 && n == PAGE as usize => {
                    let out = &mut buf[done..done + n];
                    if let Some(p) = self.known(pno) {
                        out.copy_from_slice(&p[..]);
                    } else if read_whole_page(self.base, a, out)? {
                        let mut p = PageBuf::to_overwrite();
                        p.copy_from_slice(out);
                        self.seen.insert(pno, p);
                    }
                }
                None => self.base.media_read(a, &mut buf[done..done + n])?,
            }
            done += n;
        }
        Ok(())
    }

    /// Pages the client sealed itself, and pages already found sound on the way in,
    /// are not checksummed again: only their kind is checked. A page read from the
    /// mapping is checksummed once, by the torn-read check.
    fn checked_page(&mut self, pno: u64, tag: Tag) -> crate::error::Result<PageBuf> {
        if let Some(p) = self.known(pno) {
            if le::u32_at(&p[..], BODY + 4) != tag as u32 {
                verify(p, pno, tag)?;
            }
            return Ok(p.clone());
        }
        if (pno + 1) * PAGE > self.media_size() {
            return read_checked(self, pno, tag);
        }
        let mut p = PageBuf::to_overwrite();
        let sound = read_whole_page(self.base, pno * PAGE, &mut p[..])?;
        if !sound || le::u32_at(&p[..], BODY + 4) != tag as u32 {
            // Reports what is wrong with it.
            verify(&p, pno, tag)?;
        }
        if self.remember {
            self.seen.insert(pno, p.clone());
        }
        Ok(p)
    }
}

//! Handing out free inodes and data pages: reservations (within the client's and its
//! user's limits), and the next-fit searches behind them.

use super::State;
use crate::error::{FsError, Result};
use crate::inode::{Kind, access};
use crate::proto::Reply;

impl State {
    /// Reserves up to `n_inodes` free inodes and up to `n_pages` free pages of domain
    /// `d` (in runs of `extent`) to client `id`, cut to what its limits and its user's
    /// leave: as many as can be granted, at least one of each kind asked for, or refused.
    pub(super) fn reserve(
        &mut self,
        id: u64,
        n_inodes: u32,
        d: u16,
        n_pages: u32,
        extent: u32,
    ) -> Result<Reply> {
        let (uid, gid, held_inodes, held_pages) = {
            let c = &self.clients[&id];
            (c.uid, c.gid, c.inodes.len() as u64, c.reserved_pages())
        };
        let mut inodes = Vec::new();
        if n_inodes > 0 {
            let room = self.limits.inodes.saturating_sub(held_inodes).min(
                self.limits
                    .inodes_per_user
                    .saturating_sub(self.user_inodes(uid)),
            );
            if room == 0 {
                return Err(FsError::NoSpace(format!(
                    "client limit: {held_inodes} inodes reserved to this client and not used \
                     (at most {} per client, {} per user)",
                    self.limits.inodes, self.limits.inodes_per_user
                )));
            }
            inodes = self.free_inodes(u64::from(n_inodes).min(room) as u32)?;
        }
        let mut pages = Vec::new();
        if n_pages > 0 {
            let table = self.domain_table()?;
            let Some(dom) = table.get(d as usize).copied().flatten() else {
                return Err(FsError::NotFound(format!("domain {d}")));
            };
            if !access(uid, gid, dom.uid, dom.gid, dom.mode).write {
                return Err(FsError::Denied(format!(
                    "uid {uid} may not write domain {d}"
                )));
            }
            let room = self.limits.pages.saturating_sub(held_pages).min(
                self.limits
                    .pages_per_user
                    .saturating_sub(self.user_pages(uid, d)),
            );
            let run = u64::from(extent.max(1));
            let want = u64::from(n_pages).min(room) / run * run;
            if want == 0 {
                return Err(FsError::NoSpace(format!(
                    "client limit: {held_pages} data pages reserved to this client and not used \
                     (at most {} per client, {} per user and domain)",
                    self.limits.pages, self.limits.pages_per_user
                )));
            }
            pages = self.free_pages(d, want as u32, extent)?;
            // A grant may come out smaller than asked, in whole extents.
            if pages.is_empty() {
                return Err(FsError::NoSpace(format!(
                    "domain {d} has no free {} of {} pages",
                    if extent > 1 { "extent" } else { "run" },
                    extent.max(1)
                )));
            }
            // Reserved pages are handed out as they are, not zeroed. Only a client that
            // may write domain `d` gets here; it either holds a read-write mapping of the
            // domain's whole data space (and can read every old byte these pages hold)
            // or, if it may only write the domain, no mapping at all. No byte of another
            // domain is ever in them: each domain has its own data space, created afresh
            // when the domain is (re)created, and a file whose permissions change moves
            // to another domain's space. So zeroing would protect nothing from anyone, at
            // the cost of writing and persisting every reserved page (a KVFS object is
            // mostly unwritten; a libFS pool holds up to a thousand pages). Unwritten
            // bytes still read as zeros: libFS zeroes what a write leaves of a fresh page
            // below the end of file, and the mapped bytes a file gains when it grows
            // (`pxfs::zero_gap`); a KVFS get reads only the value's bytes. The paper's
            // TFS likewise only hands out space and checks its use when the log arrives.
        }
        let c = self.clients.get_mut(&id).expect("a connected client");
        for &i in &inodes {
            c.inodes.insert(i);
            self.reserved_inodes.insert(i);
        }
        if !pages.is_empty() {
            c.pages.entry(d).or_default().extend(pages.iter().copied());
            for &p in &pages {
                self.reserved_pages.insert(d, p);
            }
        }
        Ok(Reply::Reserved { inodes, pages })
    }

    /// Inodes reserved to the clients of user `uid`.
    fn user_inodes(&self, uid: u32) -> u64 {
        self.clients
            .values()
            .filter(|c| c.uid == uid)
            .map(|c| c.inodes.len() as u64)
            .sum()
    }

    /// Pages of domain `d` reserved to the clients of user `uid`.
    fn user_pages(&self, uid: u32, d: u16) -> u64 {
        self.clients
            .values()
            .filter(|c| c.uid == uid)
            .filter_map(|c| c.pages.get(&d))
            .map(|p| p.len())
            .sum()
    }

    /// Up to `n` free inodes not reserved to anyone, found next-fit from where the
    /// last search stopped, so a reservation costs what it asks for, not a scan of the
    /// inodes in use before it. Each inode-table page is read (and checked) once.
    pub(super) fn free_inodes(&mut self, n: u32) -> Result<Vec<u64>> {
        let mut inodes = Vec::new();
        if n == 0 {
            return Ok(inodes);
        }
        let span = self.sb.inode_count - 2;
        let mut held: Option<(u64, crate::media::PageBuf)> = None;
        for k in 0..span {
            if inodes.len() as u32 >= n {
                break;
            }
            let ino = 2 + (self.inode_hint + k) % span;
            if self.reserved_inodes.contains(&ino) {
                continue;
            }
            let (pno, off) = self.sb.inode_pos(ino);
            if held.as_ref().is_none_or(|h| h.0 != pno) {
                held = Some((pno, self.page(pno, crate::media::Tag::Inodes)?));
            }
            let page = &held.as_ref().unwrap().1;
            if Kind::from_u8(page[off]) == Some(Kind::Free) {
                inodes.push(ino);
            }
        }
        if inodes.is_empty() {
            return Err(FsError::NoSpace("no free inodes".into()));
        }
        if let Some(&last) = inodes.last() {
            // `last - 1` is the offset of `last + 1` from inode 2.
            self.inode_hint = last - 1;
        }
        Ok(inodes)
    }

    /// Up to `n` free, unreserved pages of domain `d`, in whole runs of `run`
    /// consecutive pages (KVFS objects' extents; 1 or 0: single pages anywhere). The
    /// runs need not adjoin, so the extent of an erased object serves the next put
    /// however fragmented the domain is. The search is next-fit: it starts where the
    /// last one in this domain stopped and wraps around once, so reserving costs what
    /// it asks for (amortized) instead of a scan from page 1 over every page in use. A
    /// run never wraps: page 0 is not a data page.
    pub(super) fn free_pages(&mut self, d: u16, n: u32, run: u32) -> Result<Vec<u64>> {
        let total = self.sb.domain_pages;
        let run = u64::from(run.max(1));
        let want = u64::from(n) / run * run;
        let mut pages = Vec::new();
        if want == 0 || total <= 1 || run >= total {
            return Ok(pages);
        }
        let first = self.sb.dbitmap_of(d as u64);
        let bits_pp = crate::layout::BITS_PER_PAGE;
        let start = self
            .page_cursor
            .get(&d)
            .copied()
            .filter(|&c| c >= 1 && c < total)
            .unwrap_or(1);
        let mut held: Option<(u64, crate::media::PageBuf)> = None;
        let mut p = start;
        // Free pages just before `p` not yet handed out (always fewer than `run`).
        let mut free_run = 0u64;
        // Once round the space, and `run - 1` pages more, so that a run straddling the
        // page the search started from is still found.
        let mut left = total - 1 + (run - 1);
        while left > 0 && (pages.len() as u64) < want {
            if p == 1 {
                // Wrapped around: a run cannot continue across the end of the space.
                free_run = 0;
            }
            let pg = first + p / bits_pp;
            if held.as_ref().is_none_or(|h| h.0 != pg) {
                held = Some((pg, self.page(pg, crate::media::Tag::Bitmap)?));
            }
            let b = &held.as_ref().unwrap().1;
            let bit = p % bits_pp;
            // A whole word of 64 pages at once where it is all in use or all free: after
            // a rewind the search crosses long runs of pages in use, and a fresh domain
            // is long runs of free ones. A bitmap page's body is a whole number of
            // words, so a word never straddles two bitmap pages.
            if bit.is_multiple_of(64) && p + 64 < total && left >= 64 {
                let at = (bit / 8) as usize;
                let media = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
                let used = media | self.reserved_pages.word(d, p / 64);
                if used == u64::MAX {
                    free_run = 0;
                    left -= 64;
                    p += 64;
                    continue;
                }
                if used == 0 {
                    // Every run the 64 free pages complete is handed out.
                    let end = p + 64;
                    let mut q = p;
                    while q < end && (pages.len() as u64) < want {
                        let take = (run - free_run).min(end - q);
                        free_run += take;
                        q += take;
                        if free_run == run {
                            pages.extend(q - run..q);
                            free_run = 0;
                        }
                    }
                    left -= 64;
                    p += 64;
                    continue;
                }
            }
            left -= 1;
            let free = b[(bit / 8) as usize] & (1 << (bit % 8)) == 0
                && !self.reserved_pages.contains(d, p);
            if free {
                free_run += 1;
                if free_run == run {
                    pages.extend(p + 1 - run..=p);
                    free_run = 0;
                }
            } else {
                free_run = 0;
            }
            p = if p + 1 >= total { 1 } else { p + 1 };
        }
        if let Some(&last) = pages.last() {
            self.page_cursor
                .insert(d, if last + 1 >= total { 1 } else { last + 1 });
        }
        Ok(pages)
    }
}

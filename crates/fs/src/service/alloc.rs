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
        let inodes = match n_inodes {
            0 => Vec::new(),
            n => self.inodes_for(uid, held_inodes, n)?,
        };
        let pages = match n_pages {
            0 => Vec::new(),
            n => self.pages_for((uid, gid), held_pages, d, n, extent)?,
        };
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

    /// Up to `n` free inodes for a client of user `uid` holding `held` unused ones.
    fn inodes_for(&mut self, uid: u32, held: u64, n: u32) -> Result<Vec<u64>> {
        let room = self.limits.inodes.saturating_sub(held).min(
            self.limits
                .inodes_per_user
                .saturating_sub(self.user_inodes(uid)),
        );
        if room == 0 {
            return Err(FsError::NoSpace(format!(
                "client limit: {held} inodes reserved to this client and not used \
                 (at most {} per client, {} per user)",
                self.limits.inodes, self.limits.inodes_per_user
            )));
        }
        self.free_inodes(u64::from(n).min(room) as u32)
    }

    /// Up to `n` free pages of domain `d` in runs of `extent`, for a client of user
    /// and group `(uid, gid)` holding `held` unused pages; refused unless it may write `d`.
    fn pages_for(
        &mut self,
        (uid, gid): (u32, u32),
        held: u64,
        d: u16,
        n: u32,
        extent: u32,
    ) -> Result<Vec<u64>> {
        let table = self.domain_table()?;
        let Some(dom) = table.get(d as usize).copied().flatten() else {
            return Err(FsError::NotFound(format!("domain {d}")));
        };
        if !access(uid, gid, dom.uid, dom.gid, dom.mode).write {
            return Err(FsError::Denied(format!(
                "uid {uid} may not write domain {d}"
            )));
        }
        let room = self.limits.pages.saturating_sub(held).min(
            self.limits
                .pages_per_user
                .saturating_sub(self.user_pages(uid, d)),
        );
        let run = u64::from(extent.max(1));
        let want = u64::from(n).min(room) / run * run;
        if want == 0 {
            return Err(FsError::NoSpace(format!(
                "client limit: {held} data pages reserved to this client and not used \
                 (at most {} per client, {} per user and domain)",
                self.limits.pages, self.limits.pages_per_user
            )));
        }
        let pages = self.free_pages(d, want as u32, extent)?;
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
        Ok(pages)
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
                    take_free_runs(p..p + 64, run, want, &mut free_run, &mut pages);
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

/// Hands out every run of `run` pages that the free pages `span` complete (after
/// `free_run` free pages just before it), until `pages` holds `want`.
fn take_free_runs(
    span: std::ops::Range<u64>,
    run: u64,
    want: u64,
    free_run: &mut u64,
    pages: &mut Vec<u64>,
) {
    let mut q = span.start;
    while q < span.end && (pages.len() as u64) < want {
        let take = (run - *free_run).min(span.end - q);
        *free_run += take;
        q += take;
        if *free_run == run {
            pages.extend(q - run..q);
            *free_run = 0;
        }
    }
}

//! libFS's pools of inodes and data pages reserved to it, refilled ahead of need.

use super::state::State;
use crate::error::{FsError, Result};
use crate::inode::INODE_SIZE;
use crate::layout::BITS_PER_PAGE;
use crate::media::{MediaRead, PAGE, Tag, seal};
use crate::proto::{Reply, Request};

/// Inodes and pages asked for by the first reservation. Each further reservation asks
/// for twice as many, up to [`RESERVE_MAX`]: a client that creates many files pays for
/// few round trips, one that creates a few does not hoard (reserved resources are lost
/// to others until used or given back at disconnect; the service also caps them).
pub(super) const RESERVE_FIRST: u32 = 32;
/// The largest reservation asked for at once, on a large volume.
const RESERVE_MAX: u32 = 1024;

/// The largest reservation of one of `total` resources (a volume's inodes, or a
/// domain's pages) asked for at once: a 16th of them, between [`RESERVE_FIRST`] and
/// [`RESERVE_MAX`]. A client holds at most the batch it uses and the next, asked for
/// ahead (`refill_due`): an eighth, what the service lets one client hold
/// ([`crate::service::Limits::for_volume`]), so the service's limits, not this, bound
/// hoarding. A smaller cap costs waits with the state held: at a 512th (32 of the
/// 2,384 inodes of webproxy's volume), KVFS webproxy's 100 threads waited for an inode
/// refill every 32 creates, 337 waits in 10,000 iterations, each behind the batches the
/// service was still applying, and every other thread of the process waited too.
pub(super) fn reserve_max(total: u64) -> u32 {
    (total / 16).clamp(u64::from(RESERVE_FIRST), u64::from(RESERVE_MAX)) as u32
}

/// Whether the next batch is due, with `left` of the one before left and batches of
/// `batch` now asked for: once a quarter of it is used, as KVFS asks for extents. The
/// service answers this client's requests in order, after the batches it shipped
/// before; asked for when an eighth was left, a refill of a small volume's batch of 32
/// inodes came four creates ahead of need, and a KVFS put waited on average 4.5 µs
/// of its 11 for the service to finish the batch in front.
fn refill_due(left: u64, batch: u32) -> bool {
    left * 4 <= u64::from(batch) * 3
}

/// A reservation of an extent asked for and not yet answered ([`State::ask_extents`]).
pub struct ExtentAsk {
    id: u64,
    domain: u16,
    pages: u64,
}

impl State {
    /// Sends a reservation request without waiting for the answer.
    fn ask_reserve(&self, inodes: u32, domain: u16, pages: u32, extent: u32) -> Result<u64> {
        let req = Request::Reserve {
            inodes,
            domain,
            pages,
            extent,
        };
        self.conn.send(&req, &[])
    }

    /// Asks for a reservation and waits for it. The service counts what this client's
    /// journal has used but not yet shipped as still reserved, so a refusal for the
    /// client's limit is met by shipping the journal and asking once more.
    fn reserve_now(
        &mut self,
        inodes: u32,
        d: u16,
        pages: u32,
        extent: u32,
    ) -> Result<(Vec<u64>, Vec<u64>)> {
        let id = self.ask_reserve(inodes, d, pages, extent)?;
        match self.collect_reserve(id, d) {
            Err(FsError::NoSpace(m)) if m.contains("client limit") => {
                self.ship()?;
                let id = self.ask_reserve(inodes, d, pages, extent)?;
                self.collect_reserve(id, d)
            }
            r => r,
        }
    }

    /// Waits for the answer to a reservation and adds what it granted to the pools.
    fn collect_reserve(&mut self, id: u64, d: u16) -> Result<(Vec<u64>, Vec<u64>)> {
        match self.conn.wait(id)? {
            (Reply::Reserved { inodes, pages }, _) => {
                self.refresh_reserved(d, &inodes, &pages)?;
                self.inodes.extend(inodes.iter().copied());
                if !pages.is_empty() {
                    self.pages
                        .entry(d)
                        .or_default()
                        .extend(pages.iter().copied());
                }
                Ok((inodes, pages))
            }
            _ => Err(FsError::Protocol("expected a reservation".into())),
        }
    }

    /// What the service reserves is free in the volume as it is now, but this client's
    /// copies of the pages it changed since it last waited for the service may be older:
    /// another client may have freed these pages or inodes since. Their entries in those
    /// copies are brought up to date (a reserved page's bit clear, a reserved inode as
    /// the mapping has it), so that libFS's own check before shipping sees what the
    /// service will check, and does not refuse a put the service would accept. Unchanged
    /// copies of those pages the local check read from the mapping before are
    /// dropped, to be read again.
    fn refresh_reserved(&mut self, d: u16, inodes: &[u64], pages: &[u64]) -> Result<()> {
        let sb = self.sb;
        let mut touched = std::collections::BTreeMap::new();
        let first = sb.dbitmap_of(u64::from(d));
        for &p in pages {
            let pno = first + p / BITS_PER_PAGE;
            self.clean.remove(&pno);
            if let Some(img) = self.overlay.get_mut(&pno) {
                let bit = p % BITS_PER_PAGE;
                img[(bit / 8) as usize] &= !(1u8 << (bit % 8));
                touched.insert(pno, Tag::Bitmap);
            }
        }
        for &ino in inodes {
            let (pno, off) = sb.inode_pos(ino);
            self.clean.remove(&pno);
            if let Some(img) = self.overlay.get_mut(&pno) {
                let mut rec = [0u8; INODE_SIZE];
                self.meta.media_read(pno * PAGE + off as u64, &mut rec)?;
                img[off..off + INODE_SIZE].copy_from_slice(&rec);
                touched.insert(pno, Tag::Inodes);
            }
        }
        for (pno, tag) in &touched {
            if let Some(img) = self.overlay.get_mut(pno) {
                seal(img, *tag);
            }
        }
        self.cache.forget_pages(&sb, touched.into_keys());
        Ok(())
    }

    /// A free inode reserved to this client.
    ///
    /// The next batch is asked for once a quarter of the current one is used
    /// (`refill_due`), and collected when the pool runs dry: a run of creates then
    /// seldom waits for the service, which may be busy applying a batch this client
    /// shipped a moment ago (its requests are served in order). A client that stops
    /// creating holds at most one batch more than it used.
    pub fn take_inode(&mut self) -> Result<u64> {
        if self.inodes.is_empty()
            && let Some(id) = self.inode_refill.take()
        {
            // A refusal (no inode left) is asked again below, and reported from there.
            let _ = self.collect_reserve(id, 0);
        }
        if self.inodes.is_empty() {
            let want = self.next_inode_batch();
            self.reserve_now(want, 0, 0, 1)?;
        }
        if self.inode_refill.is_none() && refill_due(self.inodes.len() as u64, self.inode_batch) {
            let want = self.next_inode_batch();
            self.inode_refill = Some(self.ask_reserve(want, 0, 0, 1)?);
        }
        self.inodes
            .first()
            .copied()
            .ok_or_else(|| FsError::NoSpace("no inode reserved".into()))
    }

    fn next_inode_batch(&mut self) -> u32 {
        let want = self.inode_batch;
        self.inode_batch = (want * 2).min(reserve_max(self.sb.inode_count));
        want
    }

    fn next_page_batch(&mut self) -> u32 {
        let want = self.page_batch;
        self.page_batch = (want * 2).min(reserve_max(self.sb.domain_pages));
        want
    }

    fn pages_left(&self, d: u16) -> u64 {
        self.pages.get(&d).map_or(0, |v| v.len())
    }

    /// Makes sure at least `n` free data pages of domain `d` are reserved to this
    /// client (each holds whatever the domain last held there: libFS zeroes what a file
    /// must read as zeros), and asks for the next batch ahead of need, like the inode
    /// pool ([`State::take_inode`]).
    pub fn reserve_pages(&mut self, d: u16, n: u64) -> Result<()> {
        if self.pages_left(d) < n
            && let Some(id) = self.page_refill.remove(&d)
        {
            let _ = self.collect_reserve(id, d);
        }
        while self.pages_left(d) < n {
            let short = u32::try_from(n - self.pages_left(d)).unwrap_or(u32::MAX);
            let want = self.next_page_batch().max(short);
            let (_, got) = self.reserve_now(0, d, want, 1)?;
            if got.is_empty() {
                return Err(FsError::NoSpace(format!("no page of domain {d}")));
            }
        }
        if !self.page_refill.contains_key(&d) && refill_due(self.pages_left(d), self.page_batch) {
            let want = self.next_page_batch();
            let id = self.ask_reserve(0, d, want, 1)?;
            self.page_refill.insert(d, id);
        }
        Ok(())
    }

    /// A free data page of domain `d`, reserved to this client (see
    /// [`State::reserve_pages`]).
    pub fn take_page(&mut self, d: u16) -> Result<u64> {
        self.reserve_pages(d, 1)?;
        self.pages
            .get(&d)
            .and_then(|v| v.first())
            .ok_or_else(|| FsError::NoSpace(format!("no page of domain {d}")))
    }

    /// `n` free data pages of domain `d` reserved to this client, as runs of
    /// consecutive pages `(first, count)`, lowest first. They stay in the pool until a
    /// recorded operation uses them, so a write plans all its extents first and then
    /// records them in one step.
    pub fn page_runs(&mut self, d: u16, n: u64) -> Result<Vec<(u64, u64)>> {
        self.reserve_pages(d, n)?;
        let mut out = Vec::new();
        let mut need = n;
        for (start, end) in self.pages[&d].runs() {
            if need == 0 {
                break;
            }
            let k = (end - start).min(need);
            out.push((start, k));
            need -= k;
        }
        Ok(out)
    }

    /// Takes the runs `runs` (pages of domain `d` reserved to this client) out of the
    /// pool for a write that copies data into them before it records them: no other
    /// write takes them meanwhile, and the local check still counts them as reserved.
    /// Recording them uses them; [`State::unclaim_pages`] puts back what was not.
    pub fn claim_pages(&mut self, d: u16, runs: &[(u64, u64)]) {
        let pool = self.pages.entry(d).or_default();
        let claimed = self.claimed.entry(d).or_default();
        for &(first, n) in runs {
            pool.move_range(first, first + n, claimed);
        }
    }

    /// Puts the pages of `runs` that are still claimed (no recorded operation used
    /// them) back into the pool.
    pub fn unclaim_pages(&mut self, d: u16, runs: &[(u64, u64)]) {
        let Some(claimed) = self.claimed.get_mut(&d) else {
            return;
        };
        let pool = self.pages.entry(d).or_default();
        for &(first, n) in runs {
            claimed.move_range(first, first + n, pool);
        }
    }

    /// Data pages claimed by writes in flight (see [`State::claim_pages`]).
    pub fn claimed_pages(&self) -> u64 {
        self.claimed.values().map(|p| p.len()).sum()
    }

    /// Up to `count` extents of `n` consecutive free data pages of domain `d`,
    /// reserved to this client: their first pages, at least one.
    pub fn take_extents(&mut self, d: u16, n: u64, count: u64) -> Result<Vec<u64>> {
        let ask = self.ask_extents(d, n, count)?;
        match self.extent_answer(ask) {
            Err(FsError::NoSpace(m)) if m.contains("client limit") => {
                self.ship()?;
                let ask = self.ask_extents(d, n, count)?;
                self.extent_answer(ask)
            }
            r => r,
        }
    }

    /// Asks for up to `count` extents of `n` consecutive free data pages of domain `d`
    /// without waiting; the answer is collected by [`State::extent_answer`] (KVFS asks
    /// for its next objects while it still has some, see `crate::kvfs`). The extents
    /// need not adjoin one another, so an erased object's extent serves again.
    pub fn ask_extents(&mut self, d: u16, n: u64, count: u64) -> Result<ExtentAsk> {
        let pages = u32::try_from(n.saturating_mul(count))
            .map_err(|_| FsError::NoSpace(format!("{count} extents of {n} pages")))?;
        Ok(ExtentAsk {
            id: self.ask_reserve(0, d, pages, n as u32)?,
            domain: d,
            pages: n,
        })
    }

    /// The first pages of the extents `ask` asked for, now reserved to this client.
    pub fn extent_answer(&mut self, ask: ExtentAsk) -> Result<Vec<u64>> {
        let (d, n) = (ask.domain, ask.pages);
        let (_, pages) = self.collect_reserve(ask.id, d)?;
        let whole = pages
            .chunks(n as usize)
            .all(|c| c.len() as u64 == n && c.windows(2).all(|w| w[1] == w[0] + 1));
        if pages.is_empty() || !whole {
            return Err(FsError::Protocol(format!(
                "reservation of {n}-page extents in domain {d} answered with {} pages not in whole extents",
                pages.len()
            )));
        }
        Ok(pages.chunks(n as usize).map(|c| c[0]).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Params, Superblock};
    use crate::service::Limits;

    /// The batch in use and the one asked for ahead fit what the service lets one
    /// client hold, on volumes from small to large, so a busy client is not refused
    /// for its limit because of its own batches.
    #[test]
    fn two_batches_fit_the_service_limit_of_one_client() {
        for inodes in [512, 2_384, 20_384, 100_000, 1 << 20] {
            let sb = Superblock::plan(&Params {
                inodes,
                meta_pages: 4096 + inodes / 8,
                // Domains from 2 MiB to 4 GiB alongside, so both pools are checked
                // across sizes.
                domain_pages: inodes,
                ..Params::default()
            })
            .unwrap();
            let limits = Limits::for_volume(&sb);
            let batch = u64::from(reserve_max(sb.inode_count));
            assert!(
                2 * batch <= limits.inodes,
                "{inodes} inodes: two batches of {batch} exceed the client limit {}",
                limits.inodes
            );
            let batch = u64::from(reserve_max(sb.domain_pages));
            assert!(2 * batch <= limits.pages, "pages: two batches of {batch}");
        }
    }

    /// A client that creates steadily reaches batches large enough to stay ahead of
    /// the service on a small volume (webproxy's 2,384 inodes), not the 32 a 512th gave.
    #[test]
    fn batches_grow_past_the_first_on_a_small_volume() {
        assert!(reserve_max(2_384) >= 4 * RESERVE_FIRST);
        assert_eq!(reserve_max(1 << 30), RESERVE_MAX);
        assert_eq!(reserve_max(100), RESERVE_FIRST);
    }
}

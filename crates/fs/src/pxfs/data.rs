//! PXFS's data path: reads and writes of file data, copied outside libFS's state
//! where the mapping allows (see `client::copies`).

use super::Pxfs;
use crate::client::{Reach, State};
use crate::error::{FsError, Result};
use crate::inode::{Inode, Kind};
use crate::journal::Op;
use crate::media::PAGE;

impl Pxfs {
    pub(super) fn pread_ino(&self, ino: u64, off: u64, buf: &mut [u8]) -> Result<usize> {
        if let Some(r) = self.pread_cached(ino, off, buf) {
            return r;
        }
        let mut s = self.client.leased(ino, false)?;
        let i = s.inode(ino)?;
        let n = read_len(&i, off, buf.len());
        if n == 0 {
            return Ok(0);
        }
        // The pages under the state; the bytes outside it where the mapping allows.
        let first = off / PAGE;
        let pages = s.pages_of(ino, &i, first, (off + n as u64 - 1) / PAGE)?;
        let pieces = pieces(off, n, &pages);
        let Some(copy) = s.begin_copy(i.domain, false, n)? else {
            for pc in pieces {
                match pc.at {
                    Some(at) => s.read_data(i.domain, at, &mut buf[pc.range])?,
                    None => buf[pc.range].fill(0),
                }
            }
            return Ok(n);
        };
        drop(s);
        self.copy_out(copy, i.domain, pieces, buf).map(|()| n)
    }

    /// [`Pxfs::pread_ino`] of a file whose lease is held, under the state shared with
    /// the process's other threads, with its inode and pages cached or, while another
    /// thread holds the state, read from the mapping (see `client::shared`); `None`
    /// leaves the read to the exclusive path.
    fn pread_cached(&self, ino: u64, off: u64, buf: &mut [u8]) -> Option<Result<usize>> {
        let (reach, _reader) = self.client.shared_reach();
        let s = self.client.state_shared();
        if !s.known_covered_shared(ino, false) {
            return None;
        }
        let i = s.inode_within(ino, reach)?;
        let n = read_len(&i, off, buf.len());
        if n == 0 {
            return Some(Ok(0));
        }
        let (first, last) = (off / PAGE, (off + n as u64 - 1) / PAGE);
        let (pages, mapped) = match s.cached_pages(ino, &i, first, last) {
            Some(p) => (p, false),
            None if reach == Reach::Mapping => (s.mapped_pages(&i, first, last)?, true),
            None => return None,
        };
        let copy = s.shared_copy(i.domain, false, n)?;
        let tick = s.cache_tick();
        drop(s);
        if mapped {
            // The pages came from the mapping, and the inode too unless it was cached
            // (cached pages need their inode cached as read).
            let pages = Some((ino, first, pages.as_slice()));
            self.client.remember(tick, &[(ino, i)], pages);
        }
        Some(
            self.copy_out(copy, i.domain, pieces(off, n, &pages), buf)
                .map(|()| n),
        )
    }

    /// Copies `pieces` of a file in domain `d` out into `buf`, outside the state.
    fn copy_out(
        &self,
        copy: crate::client::Copy,
        d: u16,
        pieces: Vec<Piece>,
        buf: &mut [u8],
    ) -> Result<()> {
        self.client.read_outside(copy, d, |copy| {
            pieces.into_iter().try_for_each(|pc| match pc.at {
                Some(at) => copy.read(at, &mut buf[pc.range]),
                None => {
                    buf[pc.range].fill(0);
                    Ok(())
                }
            })
        })
    }

    /// Writes data pages directly into the mapped domain; only new pages and a new size
    /// go through the journal, as one recorded step per write: the holes the write
    /// fills take runs of reserved pages, one extent (map-pages) per run. Returns the
    /// offset after the write.
    pub(super) fn pwrite_ino(&self, ino: u64, off: Option<u64>, data: &[u8]) -> Result<u64> {
        self.client
            .past_claims(|| self.pwrite_with(ino, off, data, true))
    }

    /// [`Pxfs::pwrite_ino`]; with `outside`, the bytes are copied outside the state
    /// where the mapping allows (see `client::copies`), while the process's other
    /// threads go on. Pages the write fills are then claimed first, filled, and only
    /// then recorded, so that no thread of the process sees a page of the file before
    /// its data is there, and a batch that maps the page is never sent before its data
    /// is durable. If the file changed meanwhile (another thread truncated or wrote
    /// it, or a lease went and came back), the write is made again wholly under the
    /// state, as one step after whatever changed it.
    fn pwrite_with(&self, ino: u64, off: Option<u64>, data: &[u8], outside: bool) -> Result<u64> {
        let mut s = self.client.leased(ino, true)?;
        let i = s.inode(ino)?;
        let at = off.unwrap_or(i.size);
        let end = at + data.len() as u64;
        if data.is_empty() {
            return Ok(end);
        }
        if at > i.size {
            zero_gap(&mut s, ino, &i, i.size, at)?;
        }
        let (first, last) = (at / PAGE, (end - 1) / PAGE);
        let pages = s.pages_of(ino, &i, first, last)?;
        let mut filled = pages.clone();
        let (mut ops, runs) = map_holes(&mut s, ino, i.domain, first, &mut filled)?;
        if end > i.size {
            ops.push(Op::SetSize { ino, size: end });
        } else if ops.is_empty() && stamp_due(&i) {
            // An overwrite in place changes no metadata but its timestamps: a size set
            // to what it is stamps the file's mtime and ctime.
            ops.push(Op::SetSize { ino, size: i.size });
        }
        let stores = data_stores(&filled, &pages, at, i.size, data, &ZEROS);
        let d = i.domain;
        let copy = if outside {
            s.begin_copy(d, true, data.len())?
        } else {
            None
        };
        let Some(copy) = copy else {
            let r = if ops.is_empty() {
                Ok(())
            } else {
                s.record_all(ops)
            };
            s.unclaim_pages(d, &runs);
            r?;
            return store_locked(&mut s, d, &stores).map(|()| end);
        };
        drop(s);
        if let Err(e) = copy_in(copy, &stores) {
            let mut s = self.client.state();
            s.drop_mapping(d);
            s.unclaim_pages(d, &runs);
            return Err(e);
        }
        if ops.is_empty() {
            return Ok(end);
        }
        let mut s = match self.client.leased(ino, true) {
            Ok(s) => s,
            Err(e) => {
                self.client.state().unclaim_pages(d, &runs);
                return Err(e);
            }
        };
        let same = file_as_planned(&mut s, ino, &i, first, &pages);
        let r = match same {
            Ok(true) => s.record_all(ops),
            _ => Ok(()),
        };
        s.unclaim_pages(d, &runs);
        r?;
        let same = same?;
        if !same {
            drop(s);
            return self.pwrite_with(ino, off, data, false);
        }
        Ok(end)
    }
}

/// How old a file's mtime may be before an overwrite in place stamps it again. The
/// kernel stamps a write with a clock that moves once a tick (a millisecond or a few);
/// stamping every overwrite would record and ship an operation for each 4 KiB write.
const STAMP_GRANULE_NS: u64 = 1_000_000;

/// Whether an overwrite of file `i` must stamp its timestamps now.
fn stamp_due(i: &Inode) -> bool {
    crate::mkfs::now_ns().saturating_sub(i.mtime) >= STAMP_GRANULE_NS
}

/// A page of zeros that stores of new pages' unwritten parts copy from (a static one:
/// a page zeroed on the stack for every write cost more than the write's own checks).
static ZEROS: [u8; PAGE as usize] = [0; PAGE as usize];

/// Bytes of one page of a read: where they are in the data space (`None`: a hole,
/// read as zeros) and where they go in the caller's buffer.
struct Piece {
    at: Option<u64>,
    range: std::ops::Range<usize>,
}

/// Bytes a read of `want` bytes at `off` of file `i` returns.
fn read_len(i: &Inode, off: u64, want: usize) -> usize {
    if off >= i.size {
        return 0;
    }
    want.min((i.size - off) as usize)
}

/// The pieces of a read of `n` bytes at `off` of a file whose pages `off / PAGE..` are
/// `pages`: where in the data space each page's part lies (None: a hole).
fn pieces(off: u64, n: usize, pages: &[u64]) -> Vec<Piece> {
    let first = off / PAGE;
    let mut pieces = Vec::with_capacity(pages.len());
    let mut done = 0;
    while done < n {
        let pos = off + done as u64;
        let inpg = pos % PAGE;
        let k = (PAGE - inpg).min((n - done) as u64);
        let p = pages[(pos / PAGE - first) as usize];
        pieces.push(Piece {
            at: (p != 0).then_some(p * PAGE + inpg),
            range: done..done + k as usize,
        });
        done += k as usize;
    }
    pieces
}

/// The stores of a write of `data` at byte `at` of a file of `size` bytes whose pages
/// `first..` were `pages` (0: a hole) and are `filled` once its holes are filled:
/// (byte offset in the data space, bytes), the zeros a fresh page needs included.
fn data_stores<'a>(
    filled: &[u64],
    pages: &[u64],
    at: u64,
    size: u64,
    data: &'a [u8],
    zeros: &'a [u8; PAGE as usize],
) -> Vec<(u64, &'a [u8])> {
    let mut stores = Vec::with_capacity(filled.len() + 2);
    let first = at / PAGE;
    let mut done = 0;
    for (k, (&p, &was)) in filled.iter().zip(pages).enumerate() {
        let inpg = ((at + done as u64) % PAGE) as usize;
        let n = (PAGE as usize - inpg).min(data.len() - done);
        if was == 0 {
            // A fresh page comes as the service found it (see `zero_gap`): what this
            // write leaves of it below the end of file is a hole.
            if inpg > 0 {
                stores.push((p * PAGE, &zeros[..inpg]));
            }
            let written_end = (first + k as u64) * PAGE + (inpg + n) as u64;
            if written_end < size && inpg + n < PAGE as usize {
                stores.push((p * PAGE + (inpg + n) as u64, &zeros[inpg + n..]));
            }
        }
        stores.push((p * PAGE + inpg as u64, &data[done..done + n]));
        done += n;
    }
    stores
}

/// Makes `stores` through `copy`, outside the state, durable with one fence.
fn copy_in(copy: crate::client::Copy, stores: &[(u64, &[u8])]) -> Result<()> {
    let r = stores
        .iter()
        .try_for_each(|&(at, bytes)| copy.write(at, bytes));
    copy.fence();
    r
}

/// Makes `stores` into domain `d` through the state, durable with one fence (the
/// writes need no flush: non-temporal stores, see `State::write_data`).
fn store_locked(s: &mut State, d: u16, stores: &[(u64, &[u8])]) -> Result<()> {
    for &(at, bytes) in stores {
        s.write_data(d, at, bytes)?;
    }
    s.fence_data(d)
}

/// Whether file `ino` is still inode `i` with pages `pages` from page `first` on (0: a
/// hole), as a write planned it before letting the state go.
fn file_as_planned(s: &mut State, ino: u64, i: &Inode, first: u64, pages: &[u64]) -> Result<bool> {
    if s.inode(ino)? != *i {
        return Ok(false);
    }
    for (k, &p) in pages.iter().enumerate() {
        if s.page_of(ino, i, first + k as u64)? != p {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A run of consecutive data pages: (first, count).
type Run = (u64, u64);

/// Fills the holes among `pages` (data pages of file pages `first..`, 0 for a hole)
/// with runs of pages reserved to the client in domain `d`, which it claims (see
/// `State::claim_pages`), and returns the map-pages operations that map them (one per
/// run of consecutive holes and pages) and the runs claimed.
fn map_holes(
    s: &mut State,
    ino: u64,
    d: u16,
    first: u64,
    pages: &mut [u64],
) -> Result<(Vec<Op>, Vec<Run>)> {
    let holes = pages.iter().filter(|&&p| p == 0).count() as u64;
    if holes == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
    let runs = s.page_runs(d, holes)?;
    s.claim_pages(d, &runs);
    let mut fresh = runs.iter().flat_map(|&(a, n)| a..a + n);
    let mut ops: Vec<Op> = Vec::new();
    for (k, p) in pages.iter_mut().enumerate() {
        if *p != 0 {
            continue;
        }
        *p = fresh
            .next()
            .ok_or_else(|| FsError::NoSpace(format!("no page of domain {d}")))?;
        let index = first + k as u64;
        match ops.last_mut() {
            Some(Op::MapPages {
                index: i0,
                page: p0,
                count,
                ..
            }) if *i0 + *count == index && *p0 + *count == *p => *count += 1,
            _ => ops.push(Op::MapPages {
                ino,
                index,
                page: *p,
                count: 1,
            }),
        }
    }
    Ok((ops, runs))
}

/// Zeroes the bytes `[from, to)` of file `ino` (inode `i`, whose size is `from`) that
/// lie in pages it already maps, before the file grows over them.
///
/// The service hands out data pages without zeroing them (only clients that can read
/// the whole domain may reserve its pages; see the service's reservation), so a byte
/// past the end of file may hold old data of the domain. POSIX wants the bytes a file
/// gains by growing without being written to read as zeros; libFS gives them that here,
/// lazily, instead of zeroing every page up front. Only the page holding the end of a
/// PXFS file can be mapped past it (shrinking frees the pages wholly past the new end);
/// a KVFS object maps its whole extent.
pub(super) fn zero_gap(s: &mut State, ino: u64, i: &Inode, from: u64, to: u64) -> Result<()> {
    let first = from / PAGE;
    let last = match i.kind {
        Kind::Kv => ((to - 1) / PAGE).min(s.sb().kv_object_pages.saturating_sub(1)),
        _ if from.is_multiple_of(PAGE) => return Ok(()),
        _ => first,
    };
    let zeros = [0u8; PAGE as usize];
    for idx in first..=last {
        let p = s.page_of(ino, i, idx)?;
        if p == 0 {
            continue;
        }
        let lo = from.max(idx * PAGE);
        let hi = to.min((idx + 1) * PAGE);
        if lo >= hi {
            continue;
        }
        let at = p * PAGE + lo % PAGE;
        s.write_data(i.domain, at, &zeros[..(hi - lo) as usize])?;
        s.fence_data(i.domain)?;
    }
    Ok(())
}

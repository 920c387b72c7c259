//! The service's redo log: how a validated batch is applied as one transaction.
//!
//! Commit writes every changed page image into the log, makes them durable, then writes
//! and persists a header carrying the page numbers and a checksum over header, page list
//! and images; only then are the pages written in place. Recovery replays a header whose
//! checksum holds and ignores one whose does not (the commit never completed). This is
//! whole-page physical redo logging, as ext3's journal does for blocks: it is simple to
//! validate and replay, and metadata pages are small.

use crate::error::{FsError, Result};
use crate::layout::Superblock;
use crate::media::{PAGE, le};
use crate::txn::Changes;
use pmlab_spine::Memory;

const REDO_MAGIC: u32 = 0x4f44_4552; // "REDO"
const HDR: usize = 32;

/// Largest number of pages one transaction may change on this volume.
pub fn capacity(sb: &Superblock) -> u64 {
    (sb.log_pages - 1).min(((PAGE as usize - HDR) / 8) as u64)
}

fn checksum(header: &[u8], images: &mut dyn Iterator<Item = &[u8]>) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&header[..24]);
    h.update(&header[HDR..]);
    for i in images {
        h.update(i);
    }
    h.finalize()
}

/// Makes `changes` durable and applies them in place. `seq` numbers the transaction.
pub fn commit<M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    seq: u64,
    changes: &Changes,
) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    write_log(mem, sb, seq, changes)?;
    apply_and_clear(mem, sb, changes.iter().map(|(k, v)| (*k, &v[..])))
}

/// The first half of [`commit`]: makes the transaction durable in the log (after this
/// returns, recovery will replay it) without touching the pages in place.
pub fn write_log<M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    seq: u64,
    changes: &Changes,
) -> Result<()> {
    let n = changes.len() as u64;
    if n > capacity(sb) {
        return Err(FsError::NoSpace(format!(
            "the batch changes {n} metadata pages; the redo log holds {}",
            capacity(sb)
        )));
    }
    for (i, img) in changes.values().enumerate() {
        mem.write((sb.log_first + 1 + i as u64) * PAGE, &img[..])?;
    }
    mem.flush(
        (sb.log_first + 1) * PAGE,
        n * PAGE,
        pmlab_spine::FlushKind::Clwb,
    )?;
    let mut hdr = vec![0u8; PAGE as usize];
    le::put_u32(&mut hdr, 0, REDO_MAGIC);
    le::put_u32(&mut hdr, 4, 1);
    le::put_u64(&mut hdr, 8, seq);
    le::put_u64(&mut hdr, 16, n);
    for (i, pno) in changes.keys().enumerate() {
        le::put_u64(&mut hdr, HDR + 8 * i, *pno);
    }
    let crc = checksum(&hdr, &mut changes.values().map(|p| &p[..]));
    le::put_u32(&mut hdr, 24, crc);
    // The fence orders the images before the header that declares them.
    mem.fence();
    mem.write(sb.log_first * PAGE, &hdr)?;
    mem.persist(sb.log_first * PAGE, PAGE)?;
    Ok(())
}

fn apply_and_clear<'a, M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    pages: impl Iterator<Item = (u64, &'a [u8])>,
) -> Result<()> {
    for (pno, img) in pages {
        mem.write(pno * PAGE, img)?;
        mem.flush(pno * PAGE, PAGE, pmlab_spine::FlushKind::Clwb)?;
    }
    mem.fence();
    mem.write(sb.log_first * PAGE, &[0u8; HDR])?;
    mem.persist(sb.log_first * PAGE, HDR as u64)?;
    Ok(())
}

/// What recovery found in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogState {
    /// No transaction in the log.
    Empty,
    /// A committed transaction of this many pages (replayed by [`recover`]).
    Committed(u64),
    /// A header whose checksum fails: a commit that never completed; ignored.
    Torn,
}

/// Page numbers and images a log declares.
pub type LoggedPages = Vec<(u64, Vec<u8>)>;

/// Reads the log header and the images it declares, without changing anything.
pub fn inspect<R: crate::media::MediaRead + ?Sized>(
    mem: &mut R,
    sb: &Superblock,
) -> Result<(LogState, LoggedPages)> {
    let mut hdr = vec![0u8; PAGE as usize];
    mem.media_read(sb.log_first * PAGE, &mut hdr)?;
    if le::u32_at(&hdr, 0) != REDO_MAGIC || le::u32_at(&hdr, 4) != 1 {
        return Ok((LogState::Empty, Vec::new()));
    }
    let n = le::u64_at(&hdr, 16);
    if n == 0 || n > capacity(sb) {
        return Ok((LogState::Torn, Vec::new()));
    }
    let mut pages = Vec::with_capacity(n as usize);
    for i in 0..n {
        let pno = le::u64_at(&hdr, HDR + 8 * i as usize);
        let mut img = vec![0u8; PAGE as usize];
        mem.media_read((sb.log_first + 1 + i) * PAGE, &mut img)?;
        pages.push((pno, img));
    }
    let crc = checksum(&hdr, &mut pages.iter().map(|(_, p)| &p[..]));
    let ok = crc == le::u32_at(&hdr, 24)
        && pages.iter().all(|(pno, _)| {
            *pno >= sb.domtab
                && *pno < sb.meta_pages
                && !(sb.log_first..sb.log_first + sb.log_pages).contains(pno)
        });
    if !ok {
        return Ok((LogState::Torn, Vec::new()));
    }
    Ok((LogState::Committed(n), pages))
}

/// Replays a committed transaction left by a crash and clears the log.
pub fn recover<M: Memory + ?Sized>(mem: &mut M, sb: &Superblock) -> Result<LogState> {
    let (state, pages) = inspect(mem, sb)?;
    match state {
        LogState::Committed(_) => {
            apply_and_clear(mem, sb, pages.iter().map(|(p, i)| (*p, &i[..])))?;
        }
        LogState::Torn => {
            mem.write(sb.log_first * PAGE, &[0u8; HDR])?;
            mem.persist(sb.log_first * PAGE, HDR as u64)?;
        }
        LogState::Empty => {}
    }
    Ok(state)
}

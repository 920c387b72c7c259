//! The service's redo log: how a validated batch is applied as one transaction.
//!
//! Commit writes every changed page image into the log, makes them durable, then writes
//! and persists a header carrying the page numbers and a checksum over header, page list
//! and images; only then are the pages written in place. Recovery replays a header whose
//! checksum holds and ignores one whose does not (the commit never completed). This is
//! whole-page physical redo logging, as ext3's journal does for blocks: it is simple to
//! validate and replay, and metadata pages are small.
//!
//! [`Protocol`] carries deliberate bugs ([`Fault`]) for crash tests only: the crash
//! explorer on the machine model (`crate::crashtest`) must catch each one that breaks
//! atomicity, which is how we know it would catch a real one.

use crate::error::{FsError, Result};
use crate::layout::Superblock;
use crate::media::{BODY, PAGE, Tag, le, verify};
use crate::txn::Changes;
use pmlab_spine::Memory;

const REDO_MAGIC: u32 = 0x4f44_4552; // "REDO"
const HDR: usize = 32;

/// Largest number of pages one transaction may change on this volume.
pub fn capacity(sb: &Superblock) -> u64 {
    (sb.log_pages - 1).min(((PAGE as usize - HDR) / 8) as u64)
}

/// A deliberate bug in the commit protocol. Never used outside crash tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// No fence between the log images and the commit mark (the header) declaring
    /// them. Alone this is survivable: the header's checksum covers the images and
    /// recovery checks their seals, so a header that became durable before its images
    /// reads as torn.
    SkipImageFence,
    /// The header's checksum covers the header alone (and recovery does not check the
    /// images' seals), so recovery trusts whatever the image pages hold. Alone this is
    /// survivable too: the fence orders the images first.
    HeaderOnlyChecksum,
    /// The pages are written in place while the header is only flushed, not fenced: an
    /// in-place page can become durable before the transaction is.
    SkipCommitFence,
    /// The header is cleared while the pages written in place are only flushed, not
    /// fenced: a crash can find the log empty and the pages half written.
    SkipApplyFence,
}

impl Fault {
    /// Every fault, for tests and command lines.
    pub const ALL: [Fault; 4] = [
        Fault::SkipImageFence,
        Fault::HeaderOnlyChecksum,
        Fault::SkipCommitFence,
        Fault::SkipApplyFence,
    ];

    /// The fault's name on command lines (`skip-image-fence`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Fault::SkipImageFence => "skip-image-fence",
            Fault::HeaderOnlyChecksum => "header-only-checksum",
            Fault::SkipCommitFence => "skip-commit-fence",
            Fault::SkipApplyFence => "skip-apply-fence",
        }
    }

    /// The fault named `name` (see [`Fault::name`]).
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// How the redo log runs its protocol: correct, or with deliberate bugs for crash tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Protocol {
    /// One bit per [`Fault`], by its position in [`Fault::ALL`].
    faults: u8,
}

impl Protocol {
    /// The correct protocol, the only one the service uses.
    pub const CORRECT: Protocol = Protocol { faults: 0 };

    /// The protocol with one deliberate bug.
    pub fn broken(fault: Fault) -> Protocol {
        Protocol::CORRECT.with(fault)
    }

    /// This protocol with one more deliberate bug.
    pub fn with(self, fault: Fault) -> Protocol {
        Protocol {
            faults: self.faults | Self::bit(fault),
        }
    }

    /// Whether `fault` is in this protocol.
    pub fn has(self, fault: Fault) -> bool {
        self.faults & Self::bit(fault) != 0
    }

    /// The faults in this protocol.
    pub fn faults(self) -> impl Iterator<Item = Fault> {
        Fault::ALL.into_iter().filter(move |f| self.has(*f))
    }

    fn bit(fault: Fault) -> u8 {
        1 << Fault::ALL.iter().position(|f| *f == fault).unwrap_or(0)
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.faults == 0 {
            return write!(f, "correct");
        }
        let names: Vec<&str> = self.faults().map(Fault::name).collect();
        write!(f, "{}", names.join("+"))
    }
}

/// The commit mark's checksum: the header (but its checksum field) and every image.
///
/// Each image is hashed without its own CRC field. Every image is a sealed page, whose
/// trailer holds the CRC-32 of its body, and a CRC-32 over data followed by that data's
/// own CRC-32 is the same for all data (the CRC residue): hashed whole, every sealed
/// page of a kind looks alike, and a stale image — an older version of the same page
/// left in the log slot by an earlier commit — passes for the new one. The crash test
/// found exactly that (`Fault::SkipImageFence` replayed stale inode pages).
fn checksum(header: &[u8], images: &mut dyn Iterator<Item = &[u8]>, protocol: Protocol) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&header[..24]);
    h.update(&header[HDR..]);
    if !protocol.has(Fault::HeaderOnlyChecksum) {
        for i in images {
            h.update(&i[..BODY]);
            h.update(&i[BODY + 4..]);
        }
    }
    h.finalize()
}

/// Whether `img` is a sound sealed page (its trailer's CRC matches its body), the
/// part of each image the commit mark's checksum leaves out.
fn sealed(img: &[u8], pno: u64) -> bool {
    let Ok(page) = <&[u8; PAGE as usize]>::try_from(img) else {
        return false;
    };
    let tag = le::u32_at(img, BODY + 4);
    Tag::from_u32(tag).is_some_and(|t| verify(page, pno, t).is_ok())
}

/// Makes `changes` durable and applies them in place. `seq` numbers the transaction.
pub fn commit<M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    seq: u64,
    changes: &Changes,
) -> Result<()> {
    commit_with(mem, sb, seq, changes, Protocol::CORRECT)
}

/// [`commit`] under `protocol` (crash tests pass a broken one).
pub fn commit_with<M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    seq: u64,
    changes: &Changes,
    protocol: Protocol,
) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    write_log_with(mem, sb, seq, changes, protocol)?;
    apply_and_clear(mem, sb, changes.iter().map(|(k, v)| (*k, &v[..])), protocol)
}

/// The first half of [`commit`]: makes the transaction durable in the log (after this
/// returns, recovery will replay it) without touching the pages in place.
pub fn write_log<M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    seq: u64,
    changes: &Changes,
) -> Result<()> {
    write_log_with(mem, sb, seq, changes, Protocol::CORRECT)
}

fn write_log_with<M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    seq: u64,
    changes: &Changes,
    protocol: Protocol,
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
    let crc = checksum(&hdr, &mut changes.values().map(|p| &p[..]), protocol);
    le::put_u32(&mut hdr, 24, crc);
    // The fence orders the images before the header that declares them. The checksum
    // would also reject a header that overtook its images, but a torn header costs the
    // whole transaction, and the fence is one per commit.
    if !protocol.has(Fault::SkipImageFence) {
        mem.fence();
    }
    mem.write(sb.log_first * PAGE, &hdr)?;
    mem.flush(sb.log_first * PAGE, PAGE, pmlab_spine::FlushKind::Clwb)?;
    // Until this fence the transaction is not durable, so nothing may be written in place.
    if !protocol.has(Fault::SkipCommitFence) {
        mem.fence();
    }
    Ok(())
}

fn apply_and_clear<'a, M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    pages: impl Iterator<Item = (u64, &'a [u8])>,
    protocol: Protocol,
) -> Result<()> {
    for (pno, img) in pages {
        mem.write(pno * PAGE, img)?;
        mem.flush(pno * PAGE, PAGE, pmlab_spine::FlushKind::Clwb)?;
    }
    // The pages must be durable in place before the log stops vouching for them.
    if !protocol.has(Fault::SkipApplyFence) {
        mem.fence();
    }
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
    inspect_with(mem, sb, Protocol::CORRECT)
}

fn inspect_with<R: crate::media::MediaRead + ?Sized>(
    mem: &mut R,
    sb: &Superblock,
    protocol: Protocol,
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
    let crc = checksum(&hdr, &mut pages.iter().map(|(_, p)| &p[..]), protocol);
    let trusting = protocol.has(Fault::HeaderOnlyChecksum);
    let ok = crc == le::u32_at(&hdr, 24)
        && pages.iter().all(|(pno, img)| {
            *pno >= sb.domtab
                && *pno < sb.meta_pages
                && !(sb.log_first..sb.log_first + sb.log_pages).contains(pno)
                && (trusting || sealed(img, *pno))
        });
    if !ok {
        return Ok((LogState::Torn, Vec::new()));
    }
    Ok((LogState::Committed(n), pages))
}

/// Replays a committed transaction left by a crash and clears the log.
pub fn recover<M: Memory + ?Sized>(mem: &mut M, sb: &Superblock) -> Result<LogState> {
    recover_with(mem, sb, Protocol::CORRECT)
}

/// [`recover`] under `protocol`: a log written with [`Fault::HeaderOnlyChecksum`] is
/// read with the same checksum, as its (broken) recovery would.
pub fn recover_with<M: Memory + ?Sized>(
    mem: &mut M,
    sb: &Superblock,
    protocol: Protocol,
) -> Result<LogState> {
    let (state, pages) = inspect_with(mem, sb, protocol)?;
    match state {
        LogState::Committed(_) => {
            // Recovery itself runs the correct protocol: only the commit path is broken.
            apply_and_clear(
                mem,
                sb,
                pages.iter().map(|(p, i)| (*p, &i[..])),
                Protocol::CORRECT,
            )?;
        }
        LogState::Torn => {
            mem.write(sb.log_first * PAGE, &[0u8; HDR])?;
            mem.persist(sb.log_first * PAGE, HDR as u64)?;
        }
        LogState::Empty => {}
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_carry_their_faults_and_names() {
        assert_eq!(Protocol::CORRECT.faults().count(), 0);
        assert_eq!(Protocol::CORRECT.to_string(), "correct");
        let p = Protocol::broken(Fault::SkipImageFence).with(Fault::HeaderOnlyChecksum);
        assert!(p.has(Fault::SkipImageFence) && p.has(Fault::HeaderOnlyChecksum));
        assert!(!p.has(Fault::SkipCommitFence));
        assert_eq!(p.to_string(), "skip-image-fence+header-only-checksum");
        for f in Fault::ALL {
            assert_eq!(Fault::from_name(f.name()), Some(f));
        }
        assert_eq!(Fault::from_name("skip-everything"), None);
    }

    #[test]
    fn the_commit_checksum_tells_sealed_pages_apart() {
        let mut old = crate::media::zero_page();
        let mut new = crate::media::zero_page();
        old[40] = 1;
        new[40] = 2;
        crate::media::seal(&mut old, Tag::Inodes);
        crate::media::seal(&mut new, Tag::Inodes);
        // The CRC residue: a CRC-32 over whole sealed pages cannot tell them apart.
        assert_eq!(crc32fast::hash(&old[..]), crc32fast::hash(&new[..]));
        let hdr = vec![0u8; PAGE as usize];
        let sum = |img: &[u8]| checksum(&hdr, &mut std::iter::once(img), Protocol::CORRECT);
        assert_ne!(sum(&old[..]), sum(&new[..]));
        assert!(sealed(&new[..], 9));
        new[BODY] ^= 1;
        assert!(!sealed(&new[..], 9));
    }
}

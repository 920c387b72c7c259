//! Permission domains: every file's data lives in the data space of one domain, and all
//! files of a domain share owner, group and permission bits. A client is handed a mapping
//! of a domain's data space writable only if it may write every file in it, which is how
//! the kernel, not the library, enforces file permissions on data (the paper's "rely on
//! hardware protection to enforce file-system permissions").
//!
//! The paper leaves the grouping open; we group by (owner, group, mode) so that a chmod
//! or chown moves a file between domains rather than re-protecting pages one by one (the
//! cost it names as an open problem).
//!
//! Each entry of the table (32 bytes) is: in use (u32, 1 or 0), owner, group, mode
//! (u32 each), then zeros. How many objects live in a domain is not kept on the media:
//! every create would then change the table's page, which libFS's overlay would hold
//! while the service adds other clients' domains to it. The service counts them in
//! memory instead (from the inode table when it starts, then from every batch), which
//! is what lets it free a domain nobody uses any more: the table has room for few
//! domains, and a client could otherwise fill it for good by asking for domains of
//! every mode.

use crate::error::{FsError, Result};
use crate::layout::DOMAIN_ENTRY;
use crate::media::{Tag, le, zero_page};
use crate::txn::Txn;
use crate::view::PageSource;

/// One permission domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Domain {
    /// Owner of every file in the domain.
    pub uid: u32,
    /// Group of every file in the domain.
    pub gid: u32,
    /// Permission bits of every file in the domain.
    pub mode: u32,
}

fn entry_at(p: &[u8], i: usize) -> Option<Domain> {
    let e = &p[i * DOMAIN_ENTRY..(i + 1) * DOMAIN_ENTRY];
    (le::u32_at(e, 0) == 1).then(|| Domain {
        uid: le::u32_at(e, 4),
        gid: le::u32_at(e, 8),
        mode: le::u32_at(e, 12),
    })
}

/// Entry `d` of the domain table: `None` if unused or beyond the table. A create reads
/// this one entry, not the whole table decoded.
pub fn entry<S: PageSource + ?Sized>(src: &mut S, d: u16) -> Result<Option<Domain>> {
    let sb = *src.sb();
    if u64::from(d) >= sb.max_domains {
        return Ok(None);
    }
    let p = src.page(sb.domtab, Tag::Domains)?;
    Ok(entry_at(&p[..], d as usize))
}

/// The domain table: `None` for unused entries.
pub fn read_table<S: PageSource + ?Sized>(src: &mut S) -> Result<Vec<Option<Domain>>> {
    let sb = *src.sb();
    let p = src.page(sb.domtab, Tag::Domains)?;
    Ok((0..sb.max_domains as usize)
        .map(|i| entry_at(&p[..], i))
        .collect())
}

/// The domain of `d`, adding it to the table if it is new. Returns its number and
/// whether it was added (the caller must then create its data space afresh).
pub fn find_or_add<R: crate::media::MediaRead + ?Sized>(
    txn: &mut Txn<'_, R>,
    d: Domain,
) -> Result<(u16, bool)> {
    let table = read_table(txn)?;
    if let Some(i) = table.iter().position(|e| *e == Some(d)) {
        return Ok((i as u16, false));
    }
    let Some(i) = table.iter().position(|e| e.is_none()) else {
        return Err(FsError::NoSpace(format!(
            "all {} permission domains are in use",
            table.len()
        )));
    };
    let sb = *txn.sb();
    let p = txn.page_mut(sb.domtab, Tag::Domains)?;
    let e = &mut p[i * DOMAIN_ENTRY..(i + 1) * DOMAIN_ENTRY];
    e.fill(0);
    le::put_u32(e, 0, 1);
    le::put_u32(e, 4, d.uid);
    le::put_u32(e, 8, d.gid);
    le::put_u32(e, 12, d.mode);
    Ok((i as u16, true))
}

/// Frees entry `d`, which must be in use (the caller knows it holds no object).
pub fn free<R: crate::media::MediaRead + ?Sized>(txn: &mut Txn<'_, R>, d: u16) -> Result<()> {
    let sb = *txn.sb();
    if read_table(txn)?
        .get(d as usize)
        .copied()
        .flatten()
        .is_none()
    {
        return Err(FsError::Refused(format!("domain {d} is not in use")));
    }
    let p = txn.page_mut(sb.domtab, Tag::Domains)?;
    p[d as usize * DOMAIN_ENTRY..(d as usize + 1) * DOMAIN_ENTRY].fill(0);
    Ok(())
}

/// An empty domain table page.
pub fn empty_table() -> crate::media::PageBuf {
    zero_page()
}

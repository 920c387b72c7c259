//! Permission domains: every file's data lives in the data space of one domain, and all
//! files of a domain share owner, group and permission bits. A client is handed a mapping
//! of a domain's data space writable only if it may write every file in it, which is how
//! the kernel, not the library, enforces file permissions on data (the paper's "rely on
//! hardware protection to enforce file-system permissions").
//!
//! The paper leaves the grouping open; we group by (owner, group, mode) so that a chmod
//! or chown moves a file between domains rather than re-protecting pages one by one (the
//! cost it names as an open problem).

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

/// The domain table: `None` for unused entries.
pub fn read_table<S: PageSource + ?Sized>(src: &mut S) -> Result<Vec<Option<Domain>>> {
    let sb = *src.sb();
    let p = src.page(sb.domtab, Tag::Domains)?;
    Ok((0..sb.max_domains as usize)
        .map(|i| {
            let e = &p[i * DOMAIN_ENTRY..(i + 1) * DOMAIN_ENTRY];
            (le::u32_at(e, 0) == 1).then(|| Domain {
                uid: le::u32_at(e, 4),
                gid: le::u32_at(e, 8),
                mode: le::u32_at(e, 12),
            })
        })
        .collect())
}

/// The domain of `d`, adding it to the table if it is new. Returns its number and
/// whether it was added (the caller must then create its data space).
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
    let mut p = txn.page(sb.domtab, Tag::Domains)?;
    let e = &mut p[i * DOMAIN_ENTRY..(i + 1) * DOMAIN_ENTRY];
    le::put_u32(e, 0, 1);
    le::put_u32(e, 4, d.uid);
    le::put_u32(e, 8, d.gid);
    le::put_u32(e, 12, d.mode);
    txn.put_page(sb.domtab, p, Tag::Domains);
    Ok((i as u16, true))
}

/// An empty domain table page.
pub fn empty_table() -> crate::media::PageBuf {
    zero_page()
}

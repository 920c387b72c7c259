//! What the service tells the validator about a client ([`Authority`]), and how the
//! service reads its own metadata ([`Trusted`]).

use pmlab_spine::{Addr, SpineError};
use rustc_hash::FxHashMap;

use super::conn::Conn;
use crate::apply::Authority;
use crate::lease::Leases;
use crate::map::Writable;
use crate::media::{BODY, MediaRead, PageBuf, Tag, le, read_raw, verify};

/// The service's metadata space, read as the service's own: every page in it was
/// written by the service through its redo log (the space's file is the service's
/// alone, mode 0600) and checked when the log was recovered at start, so a page read
/// back is checked for its kind only, not checksummed again on every read (which cost
/// a checksum of 4 KiB per page each batch read). Debug builds still verify every seal,
/// so a broken invariant stops a test run where it broke.
pub(crate) struct Trusted<'a>(&'a mut Writable);

impl<'a> Trusted<'a> {
    pub(crate) fn new(m: &'a mut Writable) -> Self {
        Trusted(m)
    }
}

impl MediaRead for Trusted<'_> {
    fn media_size(&self) -> u64 {
        pmlab_spine::Memory::size(self.0)
    }
    fn media_read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        pmlab_spine::Memory::read(self.0, addr, buf)
    }
    fn checked_page(&mut self, pno: u64, tag: Tag) -> crate::error::Result<PageBuf> {
        let p = read_raw(self, pno)?;
        if le::u32_at(&p[..], BODY + 4) != tag as u32 || cfg!(debug_assertions) {
            verify(&p, pno, tag)?;
        }
        Ok(p)
    }
}

/// A client's rights, as the service knows them.
pub(super) struct Auth<'a> {
    pub client: u64,
    pub c: &'a Conn,
    pub leases: &'a Leases,
    pub open_count: &'a FxHashMap<u64, u32>,
    pub now: u64,
}

impl Authority for Auth<'_> {
    fn cred(&self) -> (u32, u32) {
        (self.c.uid, self.c.gid)
    }
    fn holds_lease(&self, ino: u64) -> bool {
        self.leases.holds(self.client, ino, true)
    }
    fn inode_reserved(&self, ino: u64) -> bool {
        self.c.inodes.contains(&ino)
    }
    fn page_reserved(&self, d: u16, p: u64) -> bool {
        self.c.pages.get(&d).is_some_and(|v| v.contains(p))
    }
    fn first_unreserved(&self, d: u16, first: u64, count: u64) -> Option<u64> {
        match self.c.pages.get(&d) {
            Some(v) => v.first_missing(first, count),
            None => (count > 0).then_some(first),
        }
    }
    fn is_open(&self, ino: u64) -> bool {
        self.open_count.contains_key(&ino)
    }
    fn now(&self) -> u64 {
        self.now
    }
}

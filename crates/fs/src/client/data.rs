//! Reaching file data: the mappings of domains' data spaces (or, for a domain the
//! client may only write, the service), and changes of attributes, which move data.

use std::sync::Arc;

use super::copies::{COPY_OUTSIDE_MIN, Copy};
use super::state::{DataSpace, State};
use crate::apply::AttrChange;
use crate::error::{FsError, Result};
use crate::map::Map;
use crate::proto::{DataAccess, Reply, Request};

impl State {
    /// The domain for this client's new files with permission bits `mode`.
    pub fn domain_for(&mut self, mode: u32) -> Result<u16> {
        let mode = mode & 0o777;
        if let Some(&d) = self.my_domains.get(&mode) {
            return Ok(d);
        }
        let req = Request::Domain {
            uid: self.uid,
            gid: self.gid,
            mode,
        };
        let r = match self.conn.call(&req, &[]) {
            // The service bounds the domains without files a user may have; the creates
            // this client has journalled may be what would fill them.
            Err(FsError::NoSpace(m)) if m.contains("client limit") => {
                self.ship()?;
                self.conn.call(&req, &[])?
            }
            r => r?,
        };
        let d = self.install_domain(r)?;
        // The service may have added the domain to the table: read it afresh.
        self.clean.remove(&self.sb.domtab);
        self.my_domains.insert(mode, d);
        Ok(d)
    }

    /// Installs the data space a domain reply carries; returns the domain.
    fn install_domain(&mut self, (r, fds): (Reply, Vec<std::os::fd::OwnedFd>)) -> Result<u16> {
        let Reply::Domain { domain, access } = r else {
            return Err(FsError::Protocol("expected a domain".into()));
        };
        let space = match (access, fds.into_iter().next()) {
            (DataAccess::WriteOnly, _) => DataSpace::WriteOnly,
            (a, Some(fd)) => {
                let f = std::fs::File::from(fd);
                DataSpace::Mapped(Arc::new(Map::of_data_file(&f, a == DataAccess::ReadWrite)?))
            }
            (_, None) => return Err(FsError::Protocol("expected a domain descriptor".into())),
        };
        self.domains.insert(domain, space);
        Ok(domain)
    }

    fn space(&mut self, d: u16) -> Result<&mut DataSpace> {
        if !self.domains.contains_key(&d) {
            let r = self.conn.call(&Request::MapDomain { domain: d }, &[])?;
            let got = self.install_domain(r)?;
            if got != d {
                return Err(FsError::Protocol(format!(
                    "asked for domain {d}, the service answered domain {got}"
                )));
            }
        }
        Ok(self.domains.get_mut(&d).expect("installed"))
    }

    /// The mapping of domain `d`'s data space (writable only if the service allowed
    /// it); refused for a domain this client may only write, which it cannot map.
    /// Waits for the copies in flight, which share the mapping.
    pub fn data(&mut self, d: u16) -> Result<&mut Map> {
        self.copies.wait_idle();
        match self.space(d)? {
            // A copy drops its share of the mapping before it leaves `copies`.
            DataSpace::Mapped(m) => Ok(Arc::get_mut(m).expect("no copy in flight")),
            DataSpace::WriteOnly => Err(FsError::Denied(format!(
                "domain {d} is write-only to this client: it has no mapping of it"
            ))),
        }
    }

    /// A copy of file data of domain `d` (into it if `write`) to run once the state is
    /// let go (see `client::copies`), or `None` where the data must be reached
    /// through the state, which also refuses what the client may not do: a write-only
    /// domain (written through the service, never read), a write to a read-only
    /// mapping, or a mapping whose writes need its own state ([`Map::shares_copies`]).
    /// Called once the operation has found its pages, with the leases covering them
    /// held.
    ///
    /// A write of fewer than [`COPY_OUTSIDE_MIN`] bytes is made through the state too:
    /// it must take the state again to record its pages, and letting the state go and
    /// taking it again costs more than such a copy when other threads wait for it. A
    /// read takes the state only once, so every read copies outside it.
    pub fn begin_copy(&mut self, d: u16, write: bool, bytes: usize) -> Result<Option<Copy>> {
        if write && bytes < COPY_OUTSIDE_MIN {
            return Ok(None);
        }
        self.space(d)?;
        Ok(self.copy_through(d, write))
    }

    /// A copy through domain `d`'s mapping if the client has mapped it and the mapping
    /// allows one (see [`State::begin_copy`]). Needs the state shared only.
    pub(super) fn copy_through(&self, d: u16, write: bool) -> Option<Copy> {
        match self.domains.get(&d)? {
            DataSpace::Mapped(m) if m.shares_copies() && (m.writable() || !write) => {
                Some(Copy::new(m.clone(), &self.copies))
            }
            _ => None,
        }
    }

    /// The populating signals of the data spaces this client maps (see
    /// [`Map::populated`]).
    pub(super) fn populated_signals(&self) -> Vec<crate::map::Populated> {
        self.domains
            .values()
            .filter_map(|s| match s {
                DataSpace::Mapped(m) => m.populated(),
                DataSpace::WriteOnly => None,
            })
            .collect()
    }

    /// Forgets domain `d`'s mapping after a read or write through it failed (another
    /// client cut its file short): the next access maps it afresh.
    pub fn drop_mapping(&mut self, d: u16) {
        self.domains.remove(&d);
    }

    /// Reads bytes at byte `off` of domain `d`'s data space.
    pub fn read_data(&mut self, d: u16, off: u64, buf: &mut [u8]) -> Result<()> {
        // Reading needs no exclusive use of the mapping: no wait for the copies in
        // flight, which may be long with many threads.
        let r = match self.space(d)? {
            DataSpace::Mapped(m) => m.read_data(off, buf),
            DataSpace::WriteOnly => Err(FsError::Denied(format!(
                "domain {d} is write-only to this client: it has no mapping of it"
            ))),
        };
        if r.is_err() {
            self.drop_mapping(d);
        }
        r
    }

    /// Writes bytes at byte `off` of domain `d`'s data space: into the writable
    /// mapping, durable at the next [`State::fence_data`] (written with non-temporal
    /// stores, [`Map::write_streaming`], so no line needs a flush: a data write goes to
    /// memory once instead of being read into the cache and written back), or through
    /// the service for a write-only domain (durable when this returns). Refused if the
    /// client may not write the domain.
    pub fn write_data(&mut self, d: u16, off: u64, bytes: &[u8]) -> Result<()> {
        let copies = self.copies.clone();
        let r = match self.space(d)? {
            // As a copy outside the state writes (see `Copy::write`), without waiting
            // for the copies in flight: with many threads copying, waiting here kept
            // every other thread from the state meanwhile.
            // SAFETY: as for `Copy::write`; the pages are this operation's file's, and
            // the state is held, so no request that frees them is sent meanwhile.
            DataSpace::Mapped(m) if m.writable() && m.shares_copies() => {
                let stored = unsafe { m.write_streaming_shared(off, bytes) };
                stored.map(|s| debug_assert!(s, "a writable mapping that shares copies"))
            }
            DataSpace::Mapped(m) if m.writable() => {
                copies.wait_idle();
                Arc::get_mut(m)
                    .expect("no copy in flight")
                    .write_streaming(off, bytes)
            }
            DataSpace::Mapped(_) => Err(FsError::Denied(format!("domain {d} is mapped read-only"))),
            DataSpace::WriteOnly => {
                let req = Request::WriteData {
                    domain: d,
                    offset: off,
                };
                self.conn.call(&req, bytes).map(|_| ())
            }
        };
        if matches!(r, Err(FsError::Io { .. })) {
            self.drop_mapping(d);
        }
        r
    }

    /// Makes every write of domain `d`'s data through [`State::write_data`] so far
    /// durable: one fence (sfence), which orders the non-temporal stores and flushes
    /// those writes issued.
    pub fn fence_data(&mut self, d: u16) -> Result<()> {
        let copies = self.copies.clone();
        if let DataSpace::Mapped(m) = self.space(d)? {
            if m.shares_copies() {
                m.fence_shared();
            } else {
                // A mode whose fence needs the region's state (`msync`).
                copies.wait_idle();
                Arc::get_mut(m).expect("no copy in flight").fence();
            }
        }
        Ok(())
    }

    /// Whether this client may write domain `d`'s data.
    pub fn can_write(&mut self, d: u16) -> Result<bool> {
        Ok(match self.space(d)? {
            DataSpace::Mapped(m) => m.writable(),
            DataSpace::WriteOnly => true,
        })
    }

    /// Changes the attributes of `ino` through the service, which moves a file's data
    /// to the domain of its new owner, group and mode. The journal goes first, so the
    /// service sees every change this client made to the object before.
    pub fn set_attr(&mut self, ino: u64, change: AttrChange) -> Result<()> {
        self.ship()?;
        self.conn.call(&Request::SetAttr { ino, change }, &[])?;
        // The inode, the domain table and bitmaps changed behind the caches: the
        // inode's page and tree go, and every page read from the mapping.
        self.clean.clear();
        let sb = self.sb;
        let (pno, _) = sb.inode_pos(ino);
        self.cache.forget_pages(&sb, std::iter::once(pno));
        self.cache.forget_leaves(ino);
        Ok(())
    }
}

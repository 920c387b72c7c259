//! Attaching VASes and segments to this process, and switching between them.

use std::collections::BTreeMap;

use rustix::mm::ProtFlags;

use super::mapped::{GLOBAL_OFFSET, Mapped, map_fixed, remap, remap_private};
use super::protect::{self, Mechanism};
use super::segfile::{FLAG_LOCKABLE, SegHeader};
use super::{Handle, Holder, NativeSpaces, PRIVATE_ID, SegLock, SwitchCounters};
use crate::api::{Access, SegId, SwitchReport, VasHandle, VasId};
use crate::error::VasError;

fn prot_of(a: Access) -> ProtFlags {
    match a {
        Access::ReadOnly => ProtFlags::READ,
        Access::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
    }
}

impl NativeSpaces {
    /// A protection key for a new mapping (pkeys path), tagging the range with it.
    pub(super) fn new_pkey(
        &self,
        base: u64,
        size: u64,
        writable: bool,
    ) -> Result<Option<u32>, VasError> {
        if self.mechanism != Mechanism::Pkeys {
            return Ok(None);
        }
        // Out of keys (15 per process): this segment falls back to mprotect.
        let Some(k) = protect::pkey_alloc() else {
            return Ok(None);
        };
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: [base, base + size) is the mapping just made.
        unsafe { protect::pkey_mprotect(base, size, prot, k) }
            .map_err(|e| VasError::io("pkey_mprotect", "segment", e))?;
        Ok(Some(k))
    }

    /// Maps global segment `sid` (or adds a user), upgrading to a writable descriptor
    /// if `access` needs one: the kernel decides whether this process may have it.
    /// `header`: its header and flags if the caller just read them (else read here).
    fn use_segment(
        &mut self,
        sid: SegId,
        access: Access,
        header: Option<(SegHeader, u32)>,
    ) -> Result<(), VasError> {
        let need_rw = access == Access::ReadWrite;
        if let Some(m) = self.mapped.get_mut(&sid) {
            if need_rw && !m.writable {
                let p = self.reg.seg_path(&m.name);
                let fd = open_seg(&p, true)?;
                remap(&fd, m.base, m.size, m.offset, m.prot, &p)?;
                m.fd = fd;
                m.writable = true;
            }
            m.users += 1;
            return self.make_resident(sid);
        }
        if sid.0 & PRIVATE_ID != 0 {
            return Err(VasError::NotFound {
                kind: "segment",
                name: sid.to_string(),
            });
        }
        let (h, flags) = match header {
            Some(hf) => hf,
            None => {
                let (h, flags, _) = self.reg.read_seg(&self.seg_name(sid)?)?;
                (h, flags)
            }
        };
        let name = h.name.clone();
        if let Some((_, other)) = self
            .mapped
            .iter()
            .find(|(_, m)| m.base < h.base + h.size && h.base < m.base + m.size)
        {
            return Err(VasError::AddressTaken {
                base: h.base,
                end: h.base + h.size,
                by: format!("segment {} mapped in this process", other.name),
            });
        }
        let p = self.reg.seg_path(&name);
        let fd = open_seg(&p, need_rw)?;
        map_fixed(&fd, h.base, h.size, GLOBAL_OFFSET, &p)?;
        let lock = match SegLock::open(&self.reg.lock_path(&name)) {
            Ok(l) => Some(l),
            Err(e) => {
                // SAFETY: the mapping just made is ours and unused.
                let _ = unsafe { rustix::mm::munmap(h.base as *mut _, h.size as usize) };
                return Err(e);
            }
        };
        let pkey = self.new_pkey(h.base, h.size, need_rw)?;
        self.mapped.insert(
            sid,
            Mapped {
                name,
                base: h.base,
                size: h.size,
                fd,
                writable: need_rw,
                offset: GLOBAL_OFFSET,
                prot: ProtFlags::empty(),
                users: 1,
                lock,
                lockable: flags & FLAG_LOCKABLE != 0,
                pkey,
                private: false,
                zap: false,
                unmapped: false,
            },
        );
        self.make_resident(sid)
    }

    /// The `resident` mechanism: gives segment `sid` its attach-time rights for good —
    /// read-write exactly when its descriptor is writable (the kernel granted it),
    /// read-only otherwise. Nothing on the other mechanisms.
    pub(super) fn make_resident(&mut self, sid: SegId) -> Result<(), VasError> {
        if self.mechanism != Mechanism::Resident {
            return Ok(());
        }
        let broken = self.broken_resident_writable;
        let m = self.mapped.get_mut(&sid).expect("mapped");
        if broken && !m.writable {
            // The deliberately broken variant: a private, writable copy of a segment
            // the kernel let this process only read.
            let p = std::path::PathBuf::from(&m.name);
            return remap_private(&m.fd, m.base, m.size, m.offset, &p).map(|()| {
                m.prot = ProtFlags::READ | ProtFlags::WRITE;
            });
        }
        let rights = if m.writable {
            ProtFlags::READ | ProtFlags::WRITE
        } else {
            ProtFlags::READ
        };
        m.protect(rights).map(drop)
    }

    /// Drops one user of `sid`; unmaps a global segment nobody uses any more.
    fn unuse_segment(&mut self, sid: SegId) {
        let Some(m) = self.mapped.get_mut(&sid) else {
            return;
        };
        m.users -= 1;
        if m.users == 0 && !m.private {
            let mut m = self.mapped.remove(&sid).expect("present");
            m.unmap();
            if let Some(k) = m.pkey {
                protect::pkey_free(k);
            }
        }
    }

    fn pkru_of(&self, segs: &[(SegId, Access)]) -> u32 {
        protect::pkru_allowing(
            segs.iter()
                .filter_map(|(s, a)| Some((self.mapped.get(s)?.pkey?, *a == Access::ReadWrite))),
        )
    }

    pub(super) fn attach_vas(&mut self, vid: VasId) -> Result<VasHandle, VasError> {
        let rec = self.vas_record(vid)?;
        let mut segs: Vec<(SegId, Access)> = Vec::new();
        for e in &rec.segments {
            // Read once: the header found by name is the one mapped.
            let (h, flags, _) = self.reg.read_seg(&e.segment)?;
            let sid = SegId(h.id);
            if let Err(err) = self.use_segment(sid, e.access, Some((h, flags))) {
                for &(s, _) in &segs {
                    self.unuse_segment(s);
                }
                return Err(err);
            }
            segs.push((sid, e.access));
        }
        segs.sort();
        let pkru = self.pkru_of(&segs);
        let id = self.next_handle;
        self.next_handle += 1;
        self.handles.insert(
            id,
            Handle {
                vid,
                segs: segs.into(),
                pkru,
            },
        );
        Ok(VasHandle(id))
    }

    pub(super) fn detach_vas(&mut self, vh: VasHandle) -> Result<(), VasError> {
        self.handle(vh)?;
        if self.current == Some(vh.0) {
            self.leave_for_detach(vh.0)?;
        }
        let h = self.handles.remove(&vh.0).expect("checked");
        for &(s, _) in h.segs.iter() {
            self.unuse_segment(s);
        }
        Ok(())
    }

    /// Leaves handle `id`, the current one, because it is being detached. Segments no
    /// other handle of this process holds are unmapped at once rather than first made
    /// inaccessible: an `mprotect` walks every page-table entry the process filled,
    /// as dear as the unmap itself, so leaving a large, widely read segment would pay
    /// twice (a process that runs one operation and exits). They are unmapped before
    /// their locks are released, so nothing of this process reaches them once another
    /// may take the lock.
    fn leave_for_detach(&mut self, id: u32) -> Result<(), VasError> {
        let h = self.handle(VasHandle(id))?.clone();
        for (s, _) in h.segs.iter() {
            if let Some(m) = self
                .mapped
                .get_mut(s)
                .filter(|m| m.users == 1 && !m.private)
            {
                m.unmap();
            }
        }
        self.switch_to(None).map(drop)
    }

    pub(super) fn attach_seg_to_handle(
        &mut self,
        vh: VasHandle,
        sid: SegId,
        access: Access,
    ) -> Result<(), VasError> {
        let h = self.handle(vh)?.clone();
        if h.segs.iter().any(|(s, _)| *s == sid) {
            return Err(VasError::Exists {
                kind: "attachment of segment",
                name: format!("{sid} in handle {}", vh.0),
            });
        }
        let was_current = self.current == Some(vh.0);
        if was_current {
            self.switch_to(None)?;
        }
        self.use_segment(sid, access, None)?;
        let mut segs = h.segs.to_vec();
        segs.push((sid, access));
        segs.sort();
        let pkru = self.pkru_of(&segs);
        self.handles.insert(
            vh.0,
            Handle {
                vid: h.vid,
                segs: segs.into(),
                pkru,
            },
        );
        if was_current {
            self.switch_to(Some(vh.0))?;
        }
        Ok(())
    }

    pub(super) fn detach_seg_from_handle(
        &mut self,
        vh: VasHandle,
        sid: SegId,
    ) -> Result<(), VasError> {
        let h = self.handle(vh)?.clone();
        if !h.segs.iter().any(|(s, _)| *s == sid) {
            return Err(VasError::NotFound {
                kind: "attachment of segment",
                name: format!("{sid} in handle {}", vh.0),
            });
        }
        let was_current = self.current == Some(vh.0);
        if was_current {
            self.switch_to(None)?;
        }
        let segs: Vec<_> = h.segs.iter().copied().filter(|(s, _)| *s != sid).collect();
        let pkru = self.pkru_of(&segs);
        self.handles.insert(
            vh.0,
            Handle {
                vid: h.vid,
                segs: segs.into(),
                pkru,
            },
        );
        self.unuse_segment(sid);
        if was_current {
            self.switch_to(Some(vh.0))?;
        }
        Ok(())
    }

    /// Switches out of the current handle (if any) and into `to` (home when `None`).
    ///
    /// The handles' segment lists are borrowed in place, not cloned: a clone of their
    /// shared list is two locked instructions per handle per switch, which a request
    /// that switches in and out four times pays on every request.
    pub(super) fn switch_to(&mut self, to: Option<u32>) -> Result<SwitchReport, VasError> {
        let mut report = SwitchReport::default();
        if to == self.current {
            return Ok(report);
        }
        let me = self.me();
        let NativeSpaces {
            handles,
            mapped,
            counters,
            current,
            mechanism,
            ..
        } = self;
        // Each handle is looked up once: the target's segments and PKRU value together.
        let (new, pkru) = match to {
            Some(id) => {
                let h = handles.get(&id).ok_or_else(|| VasError::NotFound {
                    kind: "handle",
                    name: id.to_string(),
                })?;
                (&h.segs[..], h.pkru)
            }
            None => (&[][..], protect::pkru_allowing([])),
        };
        let old = current
            .and_then(|c| handles.get(&c))
            .map_or(&[][..], |h| &h.segs[..]);
        counters.switches += 1;
        release_locks(mapped, me, old)?;
        *current = None;
        if let Err(e) = take_locks(mapped, me, new, counters, &mut report) {
            set_access(*mechanism, mapped, counters, old, &[], 0)?;
            return Err(e);
        }
        set_access(*mechanism, mapped, counters, old, new, pkru)?;
        *current = to;
        Ok(report)
    }
}

/// Releases the locks of `segs`' lockable segments (reverse order).
fn release_locks(
    mapped: &BTreeMap<SegId, Mapped>,
    me: Holder,
    segs: &[(SegId, Access)],
) -> Result<(), VasError> {
    for (s, a) in segs.iter().rev() {
        let m = &mapped[s];
        if let (true, Some(l)) = (m.lockable, &m.lock) {
            l.release(me, *a == Access::ReadWrite)?;
        }
    }
    Ok(())
}

/// Takes the locks of `segs` in id order (a global order: no deadlock between
/// switchers); on failure, releases what it took.
fn take_locks(
    mapped: &BTreeMap<SegId, Mapped>,
    me: Holder,
    segs: &[(SegId, Access)],
    counters: &mut SwitchCounters,
    report: &mut SwitchReport,
) -> Result<(), VasError> {
    for (i, (s, a)) in segs.iter().enumerate() {
        let m = &mapped[s];
        let (true, Some(l)) = (m.lockable, &m.lock) else {
            continue;
        };
        match l.acquire(me, *a == Access::ReadWrite) {
            Ok(dead) => {
                counters.lock_acquires += 1;
                counters.dead_holders_cleared += dead.len() as u64;
                report.dead_holders.extend(dead);
            }
            Err(e) => {
                release_locks(mapped, me, &segs[..i])?;
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Makes `old` segments inaccessible and `new` ones accessible as attached.
fn set_access(
    mechanism: Mechanism,
    mapped: &mut BTreeMap<SegId, Mapped>,
    counters: &mut SwitchCounters,
    old: &[(SegId, Access)],
    new: &[(SegId, Access)],
    pkru: u32,
) -> Result<(), VasError> {
    if mechanism == Mechanism::Resident {
        // Every segment keeps its attach-time rights: nothing to change.
        return Ok(());
    }
    if mechanism == Mechanism::Pkeys {
        // SAFETY: the Pkeys mechanism is chosen only where CPUID reports OSPKE.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            protect::wrpkru(pkru)
        };
        counters.pkru_writes += 1;
    }
    for (s, _) in old {
        if new.iter().any(|(n, _)| n == s) {
            continue;
        }
        if let Some(m) = mapped.get_mut(s).filter(|m| m.pkey.is_none()) {
            counters.mprotects += u64::from(m.protect(ProtFlags::empty())?);
        }
    }
    for (s, a) in new {
        if let Some(m) = mapped.get_mut(s).filter(|m| m.pkey.is_none()) {
            counters.mprotects += u64::from(m.protect(prot_of(*a))?);
        }
    }
    Ok(())
}

/// Opens a segment file read-write (kernel-checked) or read-only.
fn open_seg(p: &std::path::Path, rw: bool) -> Result<std::os::fd::OwnedFd, VasError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(rw)
        .open(p)
        .map_err(|e| {
            if rw && e.kind() == std::io::ErrorKind::PermissionDenied {
                VasError::PermissionDenied {
                    what: "attach segment read-write".into(),
                    path: p.to_path_buf(),
                }
            } else {
                VasError::io("open segment", p, e)
            }
        })?;
    Ok(f.into())
}

//! Creating, finding, cloning and controlling VASes and segments in the registry.

use std::os::unix::fs::PermissionsExt;

use super::registry::{FileOwner, VasEntry, VasRecord};
use super::segfile::{FLAG_LOCKABLE, SegHeader};
use super::{Mapped, NativeSpaces, PRIVATE_HI, PRIVATE_ID};
use crate::api::{Access, Mode, SegCtl, SegId, SegInfo, VasCtl, VasId, VasInfo, check_name};
use crate::error::VasError;

/// Highest user address a segment may end at (x86-64, 4-level paging).
const USER_TOP: u64 = 0x7fff_ffff_f000;

fn vas_info(rec: &VasRecord, o: FileOwner) -> VasInfo {
    VasInfo {
        id: VasId(rec.id),
        name: rec.name.clone(),
        uid: o.uid,
        gid: o.gid,
        mode: o.mode,
        tlb_tag: rec.tlb_tag,
        segments: rec
            .segments
            .iter()
            .map(|e| (e.segment.clone(), e.access))
            .collect(),
    }
}

impl NativeSpaces {
    /// The name of VAS `vid` (a scan of the registry).
    pub fn vas_name(&self, vid: VasId) -> Result<String, VasError> {
        for n in self.reg.vas_names()? {
            if let Ok((r, _)) = self.reg.read_vas(&n) {
                if r.id == vid.0 {
                    return Ok(n);
                }
            }
        }
        Err(VasError::NotFound {
            kind: "VAS",
            name: vid.to_string(),
        })
    }

    /// The name of global segment `sid` (a scan of the registry).
    pub fn seg_name(&self, sid: SegId) -> Result<String, VasError> {
        if let Some(m) = self.mapped.get(&sid) {
            return Ok(m.name.clone());
        }
        for n in self.reg.seg_names()? {
            if let Ok((h, _, _)) = self.reg.read_seg(&n) {
                if h.id == sid.0 {
                    return Ok(n);
                }
            }
        }
        Err(VasError::NotFound {
            kind: "segment",
            name: sid.to_string(),
        })
    }

    /// Describes VAS `vid`.
    pub fn vas_describe(&self, vid: VasId) -> Result<VasInfo, VasError> {
        let (r, o) = self.reg.read_vas(&self.vas_name(vid)?)?;
        Ok(vas_info(&r, o))
    }

    /// Describes segment `sid`.
    pub fn seg_describe(&self, sid: SegId) -> Result<SegInfo, VasError> {
        if let Some(m) = self.mapped.get(&sid).filter(|m| m.private) {
            return Ok(SegInfo {
                id: sid,
                name: m.name.clone(),
                base: m.base,
                size: m.size,
                uid: rustix::process::getuid().as_raw(),
                gid: rustix::process::getgid().as_raw(),
                mode: Mode(0o600),
                lockable: false,
                private: true,
            });
        }
        let (h, flags, o) = self.reg.read_seg(&self.seg_name(sid)?)?;
        Ok(SegInfo {
            id: SegId(h.id),
            name: h.name,
            base: h.base,
            size: h.size,
            uid: o.uid,
            gid: o.gid,
            mode: o.mode,
            lockable: flags & FLAG_LOCKABLE != 0,
            private: false,
        })
    }

    pub(super) fn create_vas(
        &mut self,
        name: &str,
        mode: Mode,
        segments: Vec<VasEntry>,
        tlb_tag: bool,
    ) -> Result<VasId, VasError> {
        check_name(name)?;
        let _l = self.reg.change_lock()?;
        if self.reg.vas_path(name).exists() {
            return Err(VasError::Exists {
                kind: "VAS",
                name: name.into(),
            });
        }
        let rec = VasRecord {
            format: "pmlab-vas 1".into(),
            id: self.reg.next_id()?,
            name: name.into(),
            tlb_tag,
            segments,
        };
        self.reg.write_vas(&rec, mode)?;
        Ok(VasId(rec.id))
    }

    pub(super) fn clone_vas(&mut self, vid: VasId, name: &str) -> Result<VasId, VasError> {
        let (r, o) = self.reg.read_vas(&self.vas_name(vid)?)?;
        self.create_vas(name, o.mode, r.segments, r.tlb_tag)
    }

    pub(super) fn ctl_vas(&mut self, vid: VasId, cmd: VasCtl) -> Result<VasInfo, VasError> {
        let name = self.vas_name(vid)?;
        let p = self.reg.vas_path(&name);
        match cmd {
            VasCtl::Info => {}
            VasCtl::SetMode(m) => {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m.0))
                    .map_err(|e| VasError::io("chmod VAS", &p, e))?
            }
            VasCtl::SetOwner { uid, gid } => std::os::unix::fs::chown(&p, Some(uid), Some(gid))
                .map_err(|e| VasError::io("chown VAS", &p, e))?,
            VasCtl::TlbTag(on) => {
                let _l = self.reg.change_lock()?;
                let (mut r, o) = self.reg.read_vas(&name)?;
                r.tlb_tag = on;
                self.check_owner(o, &p)?;
                self.reg.write_vas(&r, o.mode)?;
            }
            VasCtl::Remove => {
                let (r, o) = self.reg.read_vas(&name)?;
                std::fs::remove_file(&p).map_err(|e| VasError::io("remove VAS", &p, e))?;
                return Ok(vas_info(&r, o));
            }
        }
        self.vas_describe(vid)
    }

    /// Changing a VAS's description replaces its file: only its owner (or root) may, as
    /// the sticky registry directory enforces; checked here too for a clear error.
    fn check_owner(&self, o: FileOwner, p: &std::path::Path) -> Result<(), VasError> {
        let uid = rustix::process::geteuid().as_raw();
        if uid != 0 && uid != o.uid {
            return Err(VasError::PermissionDenied {
                what: "change VAS (not its owner)".into(),
                path: p.to_path_buf(),
            });
        }
        Ok(())
    }

    pub(super) fn attach_seg_to_vas(
        &mut self,
        vid: VasId,
        sid: SegId,
        access: Access,
    ) -> Result<(), VasError> {
        if sid.0 & PRIVATE_ID != 0 {
            return Err(VasError::Invalid {
                field: "segment",
                problem: "a process-private segment attaches to a handle only".into(),
            });
        }
        let seg = self.seg_name(sid)?;
        let (h, _, _) = self.reg.read_seg(&seg)?;
        let _l = self.reg.change_lock()?;
        let name = self.vas_name(vid)?;
        let (mut r, o) = self.reg.read_vas(&name)?;
        self.check_owner(o, &self.reg.vas_path(&name))?;
        if r.segments.iter().any(|e| e.segment == seg) {
            return Err(VasError::Exists {
                kind: "attachment of segment",
                name: format!("{seg} in VAS {name}"),
            });
        }
        for e in &r.segments {
            let (other, _, _) = self.reg.read_seg(&e.segment)?;
            if other.base < h.base + h.size && h.base < other.base + other.size {
                return Err(VasError::AddressTaken {
                    base: h.base,
                    end: h.base + h.size,
                    by: format!("segment {} in VAS {name}", other.name),
                });
            }
        }
        r.segments.push(VasEntry {
            segment: seg,
            access,
        });
        self.reg.write_vas(&r, o.mode)
    }

    pub(super) fn detach_seg_from_vas(&mut self, vid: VasId, sid: SegId) -> Result<(), VasError> {
        let seg = self.seg_name(sid)?;
        let _l = self.reg.change_lock()?;
        let name = self.vas_name(vid)?;
        let (mut r, o) = self.reg.read_vas(&name)?;
        self.check_owner(o, &self.reg.vas_path(&name))?;
        let before = r.segments.len();
        r.segments.retain(|e| e.segment != seg);
        if r.segments.len() == before {
            return Err(VasError::NotFound {
                kind: "attachment of segment",
                name: format!("{seg} in VAS {name}"),
            });
        }
        self.reg.write_vas(&r, o.mode)
    }

    pub(super) fn alloc_global(
        &mut self,
        name: &str,
        base: Option<u64>,
        size: u64,
        mode: Mode,
        clone_of: Option<&SegHeader>,
    ) -> Result<SegId, VasError> {
        check_name(name)?;
        let page = rustix::param::page_size() as u64;
        if size == 0 || size % page != 0 {
            return Err(VasError::Invalid {
                field: "size",
                problem: format!("{size} is not a positive multiple of the {page}-byte page"),
            });
        }
        let _l = self.reg.change_lock()?;
        if self.reg.seg_path(name).exists() {
            return Err(VasError::Exists {
                kind: "segment",
                name: name.into(),
            });
        }
        let base = match (clone_of, base) {
            (Some(orig), _) => orig.base,
            (None, Some(b)) => {
                if b % page != 0 || b.checked_add(size).is_none_or(|e| e > USER_TOP) || b == 0 {
                    return Err(VasError::Invalid {
                        field: "base",
                        problem: format!(
                            "{b:#x}: must be page-aligned, non-zero and end below {USER_TOP:#x}"
                        ),
                    });
                }
                if (super::PRIVATE_LO..PRIVATE_HI).contains(&b) {
                    return Err(VasError::AddressTaken {
                        base: b,
                        end: b + size,
                        by: "the process-private segment range".into(),
                    });
                }
                if let Some(o) = self.reg.overlapping(b, size, None)? {
                    return Err(VasError::AddressTaken {
                        base: b,
                        end: b + size,
                        by: format!("segment {}", o.name),
                    });
                }
                b
            }
            (None, None) => self.reg.place(size)?,
        };
        let h = SegHeader {
            id: self.reg.next_id()?,
            base,
            size,
            clone_of: clone_of.map_or(0, |o| if o.clone_of != 0 { o.clone_of } else { o.id }),
            name: name.into(),
        };
        let source = clone_of.map(|o| self.reg.seg_path(&o.name));
        self.reg.create_seg(&h, mode, true, source.as_deref())?;
        Ok(SegId(h.id))
    }

    pub(super) fn clone_seg(&mut self, sid: SegId, name: &str) -> Result<SegId, VasError> {
        let (h, _, o) = self.reg.read_seg(&self.seg_name(sid)?)?;
        self.alloc_global(name, None, h.size, o.mode, Some(&h))
    }

    pub(super) fn alloc_private(&mut self, name: &str, size: u64) -> Result<SegId, VasError> {
        check_name(name)?;
        let page = rustix::param::page_size() as u64;
        if size == 0 || size % page != 0 {
            return Err(VasError::Invalid {
                field: "size",
                problem: format!("{size} is not a positive multiple of the {page}-byte page"),
            });
        }
        if self.mapped.values().any(|m| m.private && m.name == name) {
            return Err(VasError::Exists {
                kind: "private segment",
                name: name.into(),
            });
        }
        let base = self.next_private_base;
        if base + size > PRIVATE_HI {
            return Err(VasError::Refused(
                "the process-private segment range is full".into(),
            ));
        }
        let fd = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)
            .map_err(|e| VasError::io("memfd_create", name, e.into()))?;
        rustix::fs::ftruncate(&fd, size)
            .map_err(|e| VasError::io("size private segment", name, e.into()))?;
        super::mapped::map_fixed(&fd, base, size, 0, std::path::Path::new(name))?;
        self.next_private_base = (base + size).next_multiple_of(super::registry::PLACE_ALIGN);
        let id = SegId(PRIVATE_ID | self.next_private);
        self.next_private += 1;
        self.mapped.insert(
            id,
            Mapped {
                name: name.into(),
                base,
                size,
                fd,
                writable: true,
                offset: 0,
                prot: rustix::mm::ProtFlags::empty(),
                users: 1,
                lock: None,
                lockable: false,
                pkey: self.new_pkey(base, size, true)?,
                private: true,
                zap: false,
                unmapped: false,
            },
        );
        self.make_resident(id)?;
        Ok(id)
    }

    pub(super) fn ctl_seg(&mut self, sid: SegId, cmd: SegCtl) -> Result<SegInfo, VasError> {
        if sid.0 & PRIVATE_ID != 0 {
            return match cmd {
                SegCtl::Info => self.seg_describe(sid),
                _ => Err(VasError::Invalid {
                    field: "segment",
                    problem: "a process-private segment has no registry entry to change".into(),
                }),
            };
        }
        let name = self.seg_name(sid)?;
        let (p, lp) = (self.reg.seg_path(&name), self.reg.lock_path(&name));
        match cmd {
            SegCtl::Info => {}
            SegCtl::SetMode(m) => {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m.0))
                    .map_err(|e| VasError::io("chmod segment", &p, e))?;
                std::fs::set_permissions(
                    &lp,
                    std::fs::Permissions::from_mode(super::registry::lock_mode(m)),
                )
                .map_err(|e| VasError::io("chmod lock", &lp, e))?;
            }
            SegCtl::SetOwner { uid, gid } => {
                for f in [&p, &lp] {
                    std::os::unix::fs::chown(f, Some(uid), Some(gid))
                        .map_err(|e| VasError::io("chown segment", f, e))?;
                }
            }
            SegCtl::SetLockable(on) => self
                .reg
                .set_seg_flags(&name, if on { FLAG_LOCKABLE } else { 0 })?,
            SegCtl::Remove => {
                let _l = self.reg.change_lock()?;
                for v in self.reg.vas_names()? {
                    if let Ok((r, _)) = self.reg.read_vas(&v) {
                        if r.segments.iter().any(|e| e.segment == name) {
                            return Err(VasError::Refused(format!(
                                "segment {name} is still in VAS {v}: detach it first"
                            )));
                        }
                    }
                }
                let info = self.seg_describe(sid)?;
                std::fs::remove_file(&p).map_err(|e| VasError::io("remove segment", &p, e))?;
                let _ = std::fs::remove_file(&lp);
                return Ok(info);
            }
        }
        self.seg_describe(sid)
    }
}

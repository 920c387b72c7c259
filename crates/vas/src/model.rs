//! SpaceJMP on the machine model: every attached VAS is an address space of the OS
//! model with its own radix page table (`pmlab_os::vas`), whose entries point to the
//! frames its segments reserved when they were created. Attaching builds entries and
//! detaching tears them down, charged per entry and table page; `vas_switch` is a
//! system call plus a CR3 load, which keeps the TLB's entries only when the VAS asked
//! for a tag (`vas_ctl(TlbTag)`, §4.4) and the machine's TLB is tagged.
//!
//! The model is one CPU running one process, so a lock that is taken cannot be waited
//! for: a conflicting switch is refused instead. Unlike the native backend, segments
//! may share addresses (only segments of one VAS must not overlap): that is what lets a
//! process use more memory than its virtual address bits reach (§2.1).

use std::collections::BTreeMap;

use pmlab_model::{Machine, MachineConfig, SharedSegments, dinero_hierarchy};
use pmlab_os::vas::{SegmentSpaces, TableWork};
use pmlab_spine::{Asid, PageSize};

use crate::api::*;
use crate::error::VasError;

/// The model's address-space parameters.
#[derive(Clone, Debug)]
pub struct ModelVasConfig {
    /// The machine (its memory size is physical memory; `translation.tlb.tagged` says
    /// whether CR3 loads may keep entries).
    pub machine: MachineConfig,
    /// Virtual address bits of every address space.
    pub va_bits: u32,
}

#[derive(Clone, Debug)]
struct Vas {
    name: String,
    mode: Mode,
    tlb_tag: bool,
    segments: Vec<(SegId, Access)>,
}

#[derive(Clone, Debug)]
struct Seg {
    name: String,
    key: u32,
    base: u64,
    size: u64,
    mode: Mode,
    lockable: bool,
    private: bool,
    readers: u32,
    writer: bool,
}

#[derive(Clone, Debug)]
struct Handle {
    vid: VasId,
    asid: Asid,
    segs: Vec<(SegId, Access)>,
}

/// SpaceJMP on a [`Machine`] of the model.
pub struct ModelSpaces {
    machine: Machine,
    tables: SharedSegments,
    vases: BTreeMap<u64, Vas>,
    segs: BTreeMap<u64, Seg>,
    handles: BTreeMap<u32, Handle>,
    next_id: u64,
    next_asid: Asid,
    current: Option<u32>,
}

impl ModelSpaces {
    /// A machine with empty physical memory and no VAS.
    pub fn new(config: ModelVasConfig) -> Result<Self, VasError> {
        let mut mc = config.machine;
        mc.translation.identity = false;
        let page = mc.translation.page_size;
        let frames = mc.memory_size / page.bytes();
        let tables = SharedSegments::new(SegmentSpaces::new(page, config.va_bits, frames));
        tables.lock().create_space(0);
        let bad = |e: pmlab_model::ConfigError| VasError::Invalid {
            field: "machine",
            problem: e.to_string(),
        };
        let caches: Box<dyn pmlab_model::CacheLevels> = if mc.caches.is_empty() {
            Box::new(pmlab_model::Uncached::default())
        } else {
            Box::new(dinero_hierarchy(&mc.caches, mc.cache_seed).map_err(bad)?)
        };
        let image = vec![0; mc.memory_size as usize];
        let machine =
            Machine::with_parts(mc, image, caches, Box::new(tables.clone())).map_err(bad)?;
        Ok(ModelSpaces {
            machine,
            tables,
            vases: BTreeMap::new(),
            segs: BTreeMap::new(),
            handles: BTreeMap::new(),
            next_id: 1,
            next_asid: 1,
            current: None,
        })
    }

    /// The machine: loads and stores through it use the current VAS's addresses.
    pub fn machine(&mut self) -> &mut Machine {
        &mut self.machine
    }

    /// The machine, read-only.
    pub fn machine_ref(&self) -> &Machine {
        &self.machine
    }

    /// Page-table work so far, over all address spaces.
    pub fn table_work(&self) -> TableWork {
        self.tables.lock().work()
    }

    /// The page size.
    pub fn page_size(&self) -> PageSize {
        self.tables.lock().page_size()
    }

    fn charge(&mut self, w: TableWork) {
        self.machine
            .charge_table_work(w.entry_writes, w.tables_allocated + w.tables_freed);
    }

    fn seg(&self, sid: SegId) -> Result<&Seg, VasError> {
        self.segs.get(&sid.0).ok_or(VasError::NotFound {
            kind: "segment",
            name: sid.to_string(),
        })
    }

    fn vas(&self, vid: VasId) -> Result<&Vas, VasError> {
        self.vases.get(&vid.0).ok_or(VasError::NotFound {
            kind: "VAS",
            name: vid.to_string(),
        })
    }

    fn handle(&self, vh: VasHandle) -> Result<&Handle, VasError> {
        self.handles.get(&vh.0).ok_or(VasError::NotFound {
            kind: "handle",
            name: vh.0.to_string(),
        })
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    fn name_free(&self, name: &str) -> Result<(), VasError> {
        check_name(name)?;
        if self.vases.values().any(|v| v.name == name) || self.segs.values().any(|s| s.name == name)
        {
            return Err(VasError::Exists {
                kind: "object",
                name: name.into(),
            });
        }
        Ok(())
    }

    fn attach_tables(&mut self, asid: Asid, sid: SegId, access: Access) -> Result<(), VasError> {
        let key = self.seg(sid)?.key;
        let w = self
            .tables
            .lock()
            .attach(asid, key, access == Access::ReadWrite)?;
        self.charge(w);
        Ok(())
    }

    fn lock_all(&mut self, segs: &[(SegId, Access)]) -> Result<(), VasError> {
        for (i, &(s, a)) in segs.iter().enumerate() {
            let seg = self.segs.get_mut(&s.0).expect("attached segments exist");
            if !seg.lockable {
                continue;
            }
            let free = !seg.writer && (a == Access::ReadOnly || seg.readers == 0);
            if !free {
                let name = seg.name.clone();
                self.unlock_all(&segs[..i]);
                return Err(VasError::Refused(format!(
                    "segment {name} is locked: the model's single CPU cannot wait"
                )));
            }
            match a {
                Access::ReadOnly => seg.readers += 1,
                Access::ReadWrite => seg.writer = true,
            }
        }
        Ok(())
    }

    fn unlock_all(&mut self, segs: &[(SegId, Access)]) {
        for &(s, a) in segs {
            if let Some(seg) = self.segs.get_mut(&s.0).filter(|g| g.lockable) {
                match a {
                    Access::ReadOnly => seg.readers -= 1,
                    Access::ReadWrite => seg.writer = false,
                }
            }
        }
    }

    fn switch_to(&mut self, to: Option<u32>) -> Result<(), VasError> {
        self.machine.syscall();
        if to == self.current {
            return Ok(());
        }
        if let Some(o) = self
            .current
            .and_then(|c| self.handles.get(&c))
            .map(|h| h.segs.clone())
        {
            self.unlock_all(&o);
        }
        let (asid, keep) = match to {
            Some(id) => {
                let h = self.handle(VasHandle(id))?.clone();
                if let Err(e) = self.lock_all(&h.segs) {
                    self.current = None;
                    self.machine.load_cr3(0, false);
                    return Err(e);
                }
                (h.asid, self.vas(h.vid)?.tlb_tag)
            }
            None => (0, false),
        };
        self.machine.load_cr3(asid, keep);
        self.current = to;
        Ok(())
    }
}

impl SpaceJmp for ModelSpaces {
    fn vas_create(&mut self, name: &str, mode: Mode) -> Result<VasId, VasError> {
        self.name_free(name)?;
        self.machine.syscall();
        let id = self.fresh_id();
        self.vases.insert(
            id,
            Vas {
                name: name.into(),
                mode,
                tlb_tag: false,
                segments: Vec::new(),
            },
        );
        Ok(VasId(id))
    }
    fn vas_find(&self, name: &str) -> Result<VasId, VasError> {
        self.vases
            .iter()
            .find(|(_, v)| v.name == name)
            .map(|(&k, _)| VasId(k))
            .ok_or(VasError::NotFound {
                kind: "VAS",
                name: name.into(),
            })
    }
    fn vas_attach(&mut self, vid: VasId) -> Result<VasHandle, VasError> {
        let mut segs = self.vas(vid)?.segments.clone();
        segs.sort();
        self.machine.syscall();
        let asid = self.next_asid;
        self.next_asid = self
            .next_asid
            .checked_add(1)
            .ok_or(VasError::Refused("out of address-space ids".into()))?;
        self.tables.lock().create_space(asid);
        self.machine.charge_table_work(0, 1); // the root table
        for &(s, a) in &segs {
            if let Err(e) = self.attach_tables(asid, s, a) {
                let w = self.tables.lock().destroy_space(asid)?;
                self.charge(w);
                return Err(e);
            }
        }
        let id = self.handles.keys().last().map_or(1, |k| k + 1);
        self.handles.insert(id, Handle { vid, asid, segs });
        Ok(VasHandle(id))
    }
    fn vas_detach(&mut self, vh: VasHandle) -> Result<(), VasError> {
        let asid = self.handle(vh)?.asid;
        if self.current == Some(vh.0) {
            self.switch_to(None)?;
        }
        self.handles.remove(&vh.0);
        let w = self.tables.lock().destroy_space(asid)?;
        self.charge(w);
        Ok(())
    }
    fn vas_switch(&mut self, vh: VasHandle) -> Result<SwitchReport, VasError> {
        self.switch_to(Some(vh.0)).map(|_| SwitchReport::default())
    }
    fn vas_switch_home(&mut self) -> Result<(), VasError> {
        self.switch_to(None)
    }
    fn vas_clone(&mut self, vid: VasId, name: &str) -> Result<VasId, VasError> {
        let v = self.vas(vid)?.clone();
        self.name_free(name)?;
        let id = self.fresh_id();
        self.vases.insert(
            id,
            Vas {
                name: name.into(),
                ..v
            },
        );
        Ok(VasId(id))
    }
    fn vas_ctl(&mut self, vid: VasId, cmd: VasCtl) -> Result<VasInfo, VasError> {
        let v = self.vases.get_mut(&vid.0).ok_or(VasError::NotFound {
            kind: "VAS",
            name: vid.to_string(),
        })?;
        match cmd {
            VasCtl::Info | VasCtl::SetOwner { .. } => {}
            VasCtl::SetMode(m) => v.mode = m,
            VasCtl::TlbTag(on) => v.tlb_tag = on,
            VasCtl::Remove => {}
        }
        let v = v.clone();
        if cmd == VasCtl::Remove {
            self.vases.remove(&vid.0);
        }
        let segments = v
            .segments
            .iter()
            .map(|&(s, a)| {
                (
                    self.segs
                        .get(&s.0)
                        .map_or_else(|| s.to_string(), |g| g.name.clone()),
                    a,
                )
            })
            .collect();
        Ok(VasInfo {
            id: vid,
            name: v.name,
            uid: 0,
            gid: 0,
            mode: v.mode,
            tlb_tag: v.tlb_tag,
            segments,
        })
    }
    fn seg_alloc(
        &mut self,
        name: &str,
        base: Option<u64>,
        size: u64,
        mode: Mode,
    ) -> Result<SegId, VasError> {
        self.name_free(name)?;
        self.machine.syscall();
        let page = self.page_size().bytes();
        let base = base.unwrap_or_else(|| {
            self.segs
                .values()
                .map(|s| s.base + s.size)
                .max()
                .unwrap_or(page)
                .next_multiple_of(page)
        });
        let key = self.tables.lock().create_segment(base, size)?;
        let id = self.fresh_id();
        self.segs.insert(
            id,
            Seg {
                name: name.into(),
                key,
                base,
                size,
                mode,
                lockable: true,
                private: false,
                readers: 0,
                writer: false,
            },
        );
        Ok(SegId(id))
    }
    fn seg_alloc_private(&mut self, name: &str, size: u64) -> Result<SegId, VasError> {
        let sid = self.seg_alloc(name, None, size, Mode(0o600))?;
        let s = self.segs.get_mut(&sid.0).expect("just made");
        s.private = true;
        s.lockable = false;
        Ok(sid)
    }
    fn seg_find(&self, name: &str) -> Result<SegId, VasError> {
        self.segs
            .iter()
            .find(|(_, s)| s.name == name)
            .map(|(&k, _)| SegId(k))
            .ok_or(VasError::NotFound {
                kind: "segment",
                name: name.into(),
            })
    }
    fn seg_attach(&mut self, to: AttachTo, sid: SegId, access: Access) -> Result<(), VasError> {
        self.seg(sid)?;
        self.machine.syscall();
        match to {
            AttachTo::Vas(vid) => {
                if self.seg(sid)?.private {
                    return Err(VasError::Invalid {
                        field: "segment",
                        problem: "a process-private segment attaches to a handle only".into(),
                    });
                }
                let v = self.vases.get_mut(&vid.0).ok_or(VasError::NotFound {
                    kind: "VAS",
                    name: vid.to_string(),
                })?;
                v.segments.push((sid, access));
                Ok(())
            }
            AttachTo::Handle(vh) => {
                let asid = self.handle(vh)?.asid;
                self.attach_tables(asid, sid, access)?;
                let h = self.handles.get_mut(&vh.0).expect("checked");
                h.segs.push((sid, access));
                h.segs.sort();
                Ok(())
            }
        }
    }
    fn seg_detach(&mut self, from: AttachTo, sid: SegId) -> Result<(), VasError> {
        self.machine.syscall();
        match from {
            AttachTo::Vas(vid) => {
                let v = self.vases.get_mut(&vid.0).ok_or(VasError::NotFound {
                    kind: "VAS",
                    name: vid.to_string(),
                })?;
                v.segments.retain(|&(s, _)| s != sid);
                Ok(())
            }
            AttachTo::Handle(vh) => {
                let asid = self.handle(vh)?.asid;
                let key = self.seg(sid)?.key;
                let w = self.tables.lock().detach(asid, key)?;
                self.charge(w);
                // The unmapped translations are shot down.
                self.machine.flush_tlb();
                self.handles
                    .get_mut(&vh.0)
                    .expect("checked")
                    .segs
                    .retain(|&(s, _)| s != sid);
                Ok(())
            }
        }
    }
    fn seg_clone(&mut self, sid: SegId, name: &str) -> Result<SegId, VasError> {
        let s = self.seg(sid)?.clone();
        let new = self.seg_alloc(name, Some(s.base), s.size, s.mode)?;
        // Copy through a scratch address space holding only the clone (it shares the
        // original's addresses, so the two cannot be mapped together).
        const SCRATCH: Asid = Asid::MAX;
        let frames = self
            .tables
            .lock()
            .segment(s.key)
            .expect("exists")
            .frames
            .clone();
        let page = self.page_size().bytes() as usize;
        let bytes: Vec<u8> = frames
            .iter()
            .flat_map(|&f| self.machine.current_image()[f as usize * page..][..page].to_vec())
            .collect();
        self.tables.lock().create_space(SCRATCH);
        self.attach_tables(SCRATCH, new, Access::ReadWrite)?;
        let back = self.current.map_or(0, |c| self.handles[&c].asid);
        self.machine.load_cr3(SCRATCH, false);
        let copied = pmlab_spine::Memory::write(&mut self.machine, s.base, &bytes);
        self.machine.load_cr3(back, false);
        let w = self.tables.lock().destroy_space(SCRATCH)?;
        self.charge(w);
        copied.map_err(|e| VasError::Refused(format!("copying segment {}: {e}", s.name)))?;
        Ok(new)
    }
    fn seg_ctl(&mut self, sid: SegId, cmd: SegCtl) -> Result<SegInfo, VasError> {
        let s = self.segs.get_mut(&sid.0).ok_or(VasError::NotFound {
            kind: "segment",
            name: sid.to_string(),
        })?;
        match cmd {
            SegCtl::SetMode(m) => s.mode = m,
            SegCtl::SetLockable(on) => s.lockable = on,
            _ => {}
        }
        let info = SegInfo {
            id: sid,
            name: s.name.clone(),
            base: s.base,
            size: s.size,
            uid: 0,
            gid: 0,
            mode: s.mode,
            lockable: s.lockable,
            private: s.private,
        };
        if cmd == SegCtl::Remove {
            if self
                .vases
                .values()
                .any(|v| v.segments.iter().any(|&(x, _)| x == sid))
            {
                return Err(VasError::Refused(format!(
                    "segment {} is still in a VAS",
                    info.name
                )));
            }
            let key = s.key;
            self.tables.lock().destroy_segment(key)?;
            self.segs.remove(&sid.0);
        }
        Ok(info)
    }
    fn current(&self) -> Option<VasHandle> {
        self.current.map(VasHandle)
    }
}

//! SpaceJMP natively on Linux: segments are files in a registry directory (tmpfs by
//! default, a DAX file system where one is mounted), each mapped at one fixed, globally
//! unique address in every process that attaches it (`MAP_FIXED_NOREPLACE`), so that
//! pointers stored inside a segment are valid everywhere.
//!
//! A process attaches a VAS: all its segments are mapped, inaccessible. `vas_switch`
//! makes the target's segments accessible (read-only or read-write as attached) and
//! the previous VAS's inaccessible, releasing the old VAS's segment locks and taking
//! the new one's. Linux has one page table per process, so the native switch changes
//! protections rather than CR3 (the KVM guest, `pmlab-kvmguest`, switches CR3 for
//! real); which mechanism ran is reported ([`Mechanism`]).
//!
//! Asked for explicitly, the `resident` mechanism changes no protection at all: every
//! attached segment stays mapped with the rights the kernel granted at attach
//! (read-only unless the process may write the segment file), and a switch only moves
//! the active VAS and its locks. It gives up one thing — a switched-out segment stays
//! reachable from the same process — which [`protect`]'s docs explain and every report
//! names.

mod attach;
pub mod check;
mod holder;
pub mod lock;
mod mapped;
mod objects;
pub mod protect;
pub mod registry;
pub mod segfile;
mod vasrec;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use holder::Holder;
pub use lock::{LockState, SegLock};
pub use protect::{Mechanism, MechanismChoice, PkuSupport, pku_support};
pub use registry::Registry;

use crate::api::{
    Access, AttachTo, Mode, SegCtl, SegId, SegInfo, SpaceJmp, SwitchReport, VasCtl, VasHandle,
    VasId, VasInfo,
};
use crate::error::VasError;
use mapped::Mapped;

/// Ids of process-private segments have this bit set (registry ids never do).
const PRIVATE_ID: u64 = 1 << 63;
/// Private segments live in [PRIVATE_LO, PRIVATE_HI), disjoint from global ones.
const PRIVATE_LO: u64 = 0x3000_0000_0000;
const PRIVATE_HI: u64 = 0x3800_0000_0000;

/// The default registry directory: `$PMLAB_VAS_DIR`, else `/dev/shm/pmlab-vas`.
pub fn default_dir() -> PathBuf {
    std::env::var_os("PMLAB_VAS_DIR")
        .map_or_else(|| PathBuf::from("/dev/shm/pmlab-vas"), PathBuf::from)
}

/// One of this process's attachments of a VAS.
#[derive(Clone, Debug)]
struct Handle {
    vid: VasId,
    /// Segments and access, sorted by id (the lock order); shared so that a switch
    /// takes a handle's list without copying it.
    segs: std::sync::Arc<[(SegId, Access)]>,
    /// The PKRU value that opens exactly these segments (pkeys path).
    pkru: u32,
}

/// Counts of what switches did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SwitchCounters {
    /// Switches (into a VAS or home).
    pub switches: u64,
    /// `mprotect` calls they made.
    pub mprotects: u64,
    /// `WRPKRU`s they made.
    pub pkru_writes: u64,
    /// Locks taken.
    pub lock_acquires: u64,
    /// Dead holders cleared on the way in.
    pub dead_holders_cleared: u64,
}

/// A VAS record as `vas_find` read it, kept for the `vas_attach` that follows, so that
/// reaching a VAS reads its file once. It is used only while the file is the one read:
/// every change of a VAS is a new file renamed into place, and a chmod or chown
/// changes the file's change time, so a stat that finds the same stamp finds the same
/// record (and the same permission decision).
#[derive(Debug)]
struct FoundVas {
    id: VasId,
    stamp: registry::FileStamp,
    rec: registry::VasRecord,
}

/// SpaceJMP on this machine's kernel for this process.
#[derive(Debug)]
pub struct NativeSpaces {
    reg: Registry,
    /// This process as lock slots name it; read from `/proc` on the first lock
    /// operation, not when the registry is opened (a process that takes no lock never
    /// pays for it).
    me: std::sync::OnceLock<Holder>,
    /// The VAS record `vas_find` read last (see [`FoundVas`]).
    found_vas: std::sync::Mutex<Option<FoundVas>>,
    mechanism: Mechanism,
    mapped: BTreeMap<SegId, Mapped>,
    handles: BTreeMap<u32, Handle>,
    next_handle: u32,
    current: Option<u32>,
    next_private: u64,
    next_private_base: u64,
    counters: SwitchCounters,
    /// The deliberately broken `resident` variant (tests only): read-only segments
    /// get a private writable mapping.
    broken_resident_writable: bool,
}

impl NativeSpaces {
    /// Opens (creating if needed) the registry in `dir` with the fastest mechanism.
    pub fn open(dir: &Path) -> Result<Self, VasError> {
        Self::open_with(dir, MechanismChoice::Auto, true)
    }

    /// Opens the registry in `dir` (`create`: make it if missing) with `choice`.
    pub fn open_with(dir: &Path, choice: MechanismChoice, create: bool) -> Result<Self, VasError> {
        let mechanism = protect::decide(choice).map_err(|p| VasError::Invalid {
            field: "mechanism",
            problem: p,
        })?;
        Ok(NativeSpaces {
            reg: Registry::open(dir, create)?,
            me: std::sync::OnceLock::new(),
            found_vas: std::sync::Mutex::new(None),
            mechanism,
            mapped: BTreeMap::new(),
            handles: BTreeMap::new(),
            next_handle: 1,
            current: None,
            next_private: 1,
            next_private_base: PRIVATE_LO,
            counters: SwitchCounters::default(),
            broken_resident_writable: false,
        })
    }

    /// The deliberately broken variant of the `resident` mechanism, for the security
    /// tests that must catch it: segments attached afterwards that the kernel let this
    /// process only read are given a private, writable mapping instead of a read-only one.
    #[doc(hidden)]
    pub fn break_resident_rights_for_tests(&mut self) {
        self.broken_resident_writable = true;
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.reg
    }

    /// The mechanism switches use.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// What switches did so far.
    pub fn counters(&self) -> SwitchCounters {
        self.counters
    }

    /// The address of segment `sid`'s first byte, if it is mapped in this process. It is
    /// accessible only while a VAS holding it is switched in (on `resident`, from attach
    /// to detach with the rights granted at attach).
    pub fn segment_base(&self, sid: SegId) -> Option<*mut u8> {
        self.mapped.get(&sid).map(|m| m.base as *mut u8)
    }

    /// The size of mapped segment `sid`.
    pub fn segment_size(&self, sid: SegId) -> Option<u64> {
        self.mapped.get(&sid).map(|m| m.size)
    }

    /// Whether switching away from a VAS holding segment `sid` also drops the
    /// segment's page-table entries (`madvise(MADV_DONTNEED)`; its pages stay in the
    /// file). The `mprotect` path changes every entry present, so a switch over a
    /// large, widely touched segment costs in proportion to the pages touched since it
    /// was mapped; with this set, a switch changes only the entries touched since the
    /// last one, as a CR3 switch changes none — at the price of a minor fault on the
    /// first touch of each page after every switch. For clients that touch a few pages
    /// per visit (a key-value store's GET and SET). No effect on the pkeys path.
    pub fn set_zap_on_switch(&mut self, sid: SegId, zap: bool) -> Result<(), VasError> {
        let m = self.mapped.get_mut(&sid).ok_or(VasError::NotFound {
            kind: "mapped segment",
            name: sid.to_string(),
        })?;
        if self.mechanism == Mechanism::Resident {
            // No switch changes its entries, so there is nothing to drop; read-around
            // on first touch stays useful.
            return Ok(());
        }
        m.zap = zap;
        // Without read-around, a fault maps only the page touched, so the next switch
        // away has only those entries to drop.
        let advice = if zap {
            rustix::mm::Advice::Random
        } else {
            rustix::mm::Advice::Normal
        };
        // SAFETY: the range is this segment's mapping; the advice changes no contents.
        unsafe { rustix::mm::madvise(m.base as *mut _, m.size as usize, advice) }
            .map_err(|e| VasError::io("madvise", std::path::Path::new(&m.name), e.into()))?;
        Ok(())
    }

    /// This process as lock slots name it.
    fn me(&self) -> Holder {
        *self.me.get_or_init(Holder::me)
    }

    /// VAS `vid`'s record: the one `vas_find` just read if its file is unchanged, else
    /// read again (by the name found, then by a scan of the registry).
    fn vas_record(&self, vid: VasId) -> Result<registry::VasRecord, VasError> {
        let found = self
            .found_vas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|f| f.id == vid)
            .map(|f| (f.stamp, f.rec.clone()));
        if let Some((stamp, rec)) = found {
            if self.reg.vas_stamp(&rec.name) == Some(stamp) {
                return Ok(rec);
            }
            if let Ok((r, _)) = self.reg.read_vas(&rec.name) {
                if r.id == vid.0 {
                    return Ok(r);
                }
            }
        }
        Ok(self.reg.read_vas(&self.vas_name(vid)?)?.0)
    }

    /// The segment named `name` among those handle `vh` attaches, if any: what a
    /// process that just attached a VAS asks without reading the registry again.
    pub fn segment_in(&self, vh: VasHandle, name: &str) -> Option<SegId> {
        let h = self.handles.get(&vh.0)?;
        h.segs
            .iter()
            .map(|&(s, _)| s)
            .find(|s| self.mapped.get(s).is_some_and(|m| m.name == name))
    }

    /// The VAS that handle `vh` attaches.
    pub fn handle_vas(&self, vh: VasHandle) -> Option<VasId> {
        self.handles.get(&vh.0).map(|h| h.vid)
    }

    /// Whether segment `sid` is accessible now, and how.
    pub fn active_access(&self, sid: SegId) -> Option<Access> {
        let h = self.handles.get(&self.current?)?;
        h.segs.iter().find(|(s, _)| *s == sid).map(|&(_, a)| a)
    }

    fn handle(&self, vh: VasHandle) -> Result<&Handle, VasError> {
        // The error is built only when needed: every switch looks its handle up, and
        // naming it formats and allocates a string.
        self.handles.get(&vh.0).ok_or_else(|| VasError::NotFound {
            kind: "handle",
            name: vh.0.to_string(),
        })
    }
}

impl SpaceJmp for NativeSpaces {
    fn vas_create(&mut self, name: &str, mode: Mode) -> Result<VasId, VasError> {
        self.create_vas(name, mode, Vec::new(), false)
    }
    fn vas_find(&self, name: &str) -> Result<VasId, VasError> {
        let (rec, _, stamp) = self.reg.read_vas_stamped(name)?;
        let id = VasId(rec.id);
        *self.found_vas.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(FoundVas { id, stamp, rec });
        Ok(id)
    }
    fn vas_attach(&mut self, vid: VasId) -> Result<VasHandle, VasError> {
        self.attach_vas(vid)
    }
    fn vas_detach(&mut self, vh: VasHandle) -> Result<(), VasError> {
        self.detach_vas(vh)
    }
    fn vas_switch(&mut self, vh: VasHandle) -> Result<SwitchReport, VasError> {
        self.switch_to(Some(vh.0))
    }
    fn vas_switch_home(&mut self) -> Result<(), VasError> {
        self.switch_to(None).map(|_| ())
    }
    fn vas_clone(&mut self, vid: VasId, name: &str) -> Result<VasId, VasError> {
        self.clone_vas(vid, name)
    }
    fn vas_ctl(&mut self, vid: VasId, cmd: VasCtl) -> Result<VasInfo, VasError> {
        self.ctl_vas(vid, cmd)
    }
    fn seg_alloc(
        &mut self,
        name: &str,
        base: Option<u64>,
        size: u64,
        mode: Mode,
    ) -> Result<SegId, VasError> {
        self.alloc_global(name, base, size, mode, None)
    }
    fn seg_alloc_private(&mut self, name: &str, size: u64) -> Result<SegId, VasError> {
        self.alloc_private(name, size)
    }
    fn seg_find(&self, name: &str) -> Result<SegId, VasError> {
        if let Some((&id, _)) = self
            .mapped
            .iter()
            .find(|(_, m)| m.private && m.name == name)
        {
            return Ok(id);
        }
        Ok(SegId(self.reg.read_seg(name)?.0.id))
    }
    fn seg_attach(&mut self, to: AttachTo, sid: SegId, access: Access) -> Result<(), VasError> {
        match to {
            AttachTo::Vas(vid) => self.attach_seg_to_vas(vid, sid, access),
            AttachTo::Handle(vh) => self.attach_seg_to_handle(vh, sid, access),
        }
    }
    fn seg_detach(&mut self, from: AttachTo, sid: SegId) -> Result<(), VasError> {
        match from {
            AttachTo::Vas(vid) => self.detach_seg_from_vas(vid, sid),
            AttachTo::Handle(vh) => self.detach_seg_from_handle(vh, sid),
        }
    }
    fn seg_clone(&mut self, sid: SegId, name: &str) -> Result<SegId, VasError> {
        self.clone_seg(sid, name)
    }
    fn seg_ctl(&mut self, sid: SegId, cmd: SegCtl) -> Result<SegInfo, VasError> {
        self.ctl_seg(sid, cmd)
    }
    fn current(&self) -> Option<VasHandle> {
        self.current.map(VasHandle)
    }
}

impl Drop for NativeSpaces {
    fn drop(&mut self) {
        let _ = self.switch_to(None);
        for m in self.mapped.values_mut() {
            m.unmap();
            if let Some(k) = m.pkey {
                protect::pkey_free(k);
            }
        }
    }
}

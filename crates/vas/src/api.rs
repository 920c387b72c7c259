//! The SpaceJMP interface (Figure 3 of the paper), one trait for both backends.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::VasError;

/// A virtual address space's id (`vasid_t`): names a VAS in the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VasId(pub u64);

/// A segment's id (`segid_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SegId(pub u64);

/// A process's attachment of a VAS (`vhandle_t`): what it switches into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VasHandle(pub u32);

impl fmt::Display for VasId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vas#{}", self.0)
    }
}

impl fmt::Display for SegId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seg#{}", self.0)
    }
}

/// How a segment is mapped in an address space, which also decides its lock mode on
/// switch (§3.1): read-only takes the lock shared, read-write exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Mapped read-only; lock taken shared.
    #[serde(rename = "ro")]
    ReadOnly,
    /// Mapped read-write; lock taken exclusive.
    #[serde(rename = "rw")]
    ReadWrite,
}

impl Access {
    /// `ro` or `rw`.
    pub fn name(self) -> &'static str {
        match self {
            Access::ReadOnly => "ro",
            Access::ReadWrite => "rw",
        }
    }
}

impl std::str::FromStr for Access {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ro" => Ok(Access::ReadOnly),
            "rw" => Ok(Access::ReadWrite),
            _ => Err(format!("access {s:?} is neither ro nor rw")),
        }
    }
}

/// Where `seg_attach` installs a segment (§3.2): into the VAS itself, for every process
/// that attaches it (global), or into one process's attachment only (process-private,
/// e.g. its stack, code or a scratch heap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachTo {
    /// `seg_attach(vid, sid)`: recorded in the VAS, seen by every attaching process.
    Vas(VasId),
    /// `seg_attach(vh, sid)`: only this process's attachment.
    Handle(VasHandle),
}

/// Permission bits as in Unix (`0o660`): the paper reuses the OS's security model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Mode(pub u32);

impl Mode {
    /// Owner and group read-write (`0o660`, the paper's Figure 4).
    pub const OWNER_GROUP_RW: Mode = Mode(0o660);

    /// Parses octal digits (`660`, `0o640`, `0644`).
    pub fn parse(s: &str) -> Result<Mode, String> {
        let digits = s.trim_start_matches("0o");
        match u32::from_str_radix(digits, 8) {
            Ok(m) if m <= 0o777 => Ok(Mode(m)),
            _ => Err(format!(
                "mode {s:?} is not octal permission bits (e.g. 660)"
            )),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:03o}", self.0)
    }
}

/// `vas_ctl` commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VasCtl {
    /// Only report the VAS's description.
    Info,
    /// New permission bits.
    SetMode(Mode),
    /// New owner and group (privileged, as `chown`).
    SetOwner {
        /// User id.
        uid: u32,
        /// Group id.
        gid: u32,
    },
    /// Hint that switches into this VAS should keep TLB entries (§4.4: a tag is
    /// assigned on request; tag 0, the default, flushes).
    TlbTag(bool),
    /// Delete the VAS (its segments stay).
    Remove,
}

/// `seg_ctl` commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegCtl {
    /// Only report the segment's description.
    Info,
    /// New permission bits.
    SetMode(Mode),
    /// New owner and group.
    SetOwner {
        /// User id.
        uid: u32,
        /// Group id.
        gid: u32,
    },
    /// Whether switching into a VAS holding it takes its lock.
    SetLockable(bool),
    /// Delete the segment (refused while a VAS still lists it).
    Remove,
}

/// A VAS as `vas_ctl` and `pmlab vas inspect` describe it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VasInfo {
    /// Its id.
    pub id: VasId,
    /// Its name.
    pub name: String,
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
    /// Permission bits.
    pub mode: Mode,
    /// TLB tag requested.
    pub tlb_tag: bool,
    /// Its global segments and how each is mapped.
    pub segments: Vec<(String, Access)>,
}

/// A segment as `seg_ctl` and `pmlab vas inspect` describe it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SegInfo {
    /// Its id.
    pub id: SegId,
    /// Its name.
    pub name: String,
    /// Fixed virtual start address.
    pub base: u64,
    /// Size in bytes.
    pub size: u64,
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
    /// Permission bits.
    pub mode: Mode,
    /// Whether switching takes its lock.
    pub lockable: bool,
    /// Process-private (not in the registry).
    pub private: bool,
}

/// What a switch did: the holders of the target's locks found dead and recovered
/// (the paper's locks are not robust; pmlab's are, so a killed holder is learned of).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchReport {
    /// Process ids of dead holders whose hold was cleared on the way in.
    pub dead_holders: Vec<u32>,
}

/// The SpaceJMP API (Figure 3): VASes for applications, segments for library writers.
///
/// Both backends implement it: [`crate::native::NativeSpaces`] on this machine's
/// kernel and [`crate::model::ModelSpaces`] on the machine model.
pub trait SpaceJmp {
    /// `vas_create(name, perms) -> vid`: a new, empty VAS.
    fn vas_create(&mut self, name: &str, mode: Mode) -> Result<VasId, VasError>;
    /// `vas_find(name) -> vid`.
    fn vas_find(&self, name: &str) -> Result<VasId, VasError>;
    /// `vas_attach(vid) -> vh`: this process's instance of the VAS, with its global
    /// segments mapped (but not accessible until switched in).
    fn vas_attach(&mut self, vid: VasId) -> Result<VasHandle, VasError>;
    /// `vas_detach(vh)`: switches home first if `vh` is current.
    fn vas_detach(&mut self, vh: VasHandle) -> Result<(), VasError>;
    /// `vas_switch(vh)`: out of the current VAS (its locks released), into `vh` (its
    /// lockable segments' locks taken, shared or exclusive by access).
    fn vas_switch(&mut self, vh: VasHandle) -> Result<SwitchReport, VasError>;
    /// Back to the process's own address space (no VAS segment accessible).
    fn vas_switch_home(&mut self) -> Result<(), VasError>;
    /// `vas_clone(vid) -> vid`: a new VAS `name` with the same segments; the caller
    /// owns it and may change its permissions with `vas_ctl`.
    fn vas_clone(&mut self, vid: VasId, name: &str) -> Result<VasId, VasError>;
    /// `vas_ctl(cmd, vid[, arg])`.
    fn vas_ctl(&mut self, vid: VasId, cmd: VasCtl) -> Result<VasInfo, VasError>;
    /// `seg_alloc(name, base, size, perms) -> sid`: a global segment at a fixed
    /// address (`base`, or one the registry chooses when `None`).
    fn seg_alloc(
        &mut self,
        name: &str,
        base: Option<u64>,
        size: u64,
        mode: Mode,
    ) -> Result<SegId, VasError>;
    /// A process-private segment (never in the registry), in an address range disjoint
    /// from global segments (§4.1), attachable only to this process's handles.
    fn seg_alloc_private(&mut self, name: &str, size: u64) -> Result<SegId, VasError>;
    /// `seg_find(name) -> sid`.
    fn seg_find(&self, name: &str) -> Result<SegId, VasError>;
    /// `seg_attach(vid | vh, sid)` with the access the mapping (and lock) takes.
    fn seg_attach(&mut self, to: AttachTo, sid: SegId, access: Access) -> Result<(), VasError>;
    /// `seg_detach(vid | vh, sid)`.
    fn seg_detach(&mut self, from: AttachTo, sid: SegId) -> Result<(), VasError>;
    /// `seg_clone(sid) -> sid`: a copy `name` of the contents at the same fixed address,
    /// so that pointers inside it stay valid (it cannot be mapped beside the original
    /// in one process).
    fn seg_clone(&mut self, sid: SegId, name: &str) -> Result<SegId, VasError>;
    /// `seg_ctl(sid, cmd[, arg])`.
    fn seg_ctl(&mut self, sid: SegId, cmd: SegCtl) -> Result<SegInfo, VasError>;
    /// The handle currently switched in, if any.
    fn current(&self) -> Option<VasHandle>;
}

/// Checks a registry name: 1 to 64 of `[A-Za-z0-9._-]`, not starting with a dot.
pub fn check_name(name: &str) -> Result<(), VasError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(VasError::Invalid {
            field: "name",
            problem: format!("{name:?}: use 1-64 of A-Z a-z 0-9 . _ -, not starting with a dot"),
        })
    }
}

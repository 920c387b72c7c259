//! Which transaction protocols the drivers run, and how they get instances of them.
//!
//! [`Harness`] is the drivers' one view of a protocol: how to format it over the
//! machine model, attach it to a machine after a crash, and attach it to a crash image
//! to recover it. The software protocols implement it here ([`RedoHarness`],
//! [`UndoHarness`]); a hardware protocol of the machine model (`crates/hwtx`, to come)
//! implements it with `Live` and `Image` both its own type over `pmlab_model::Machine`
//! (recovering an image on `Machine::with_image`), and every driver runs it unchanged.

use pmlab_model::Machine;
use pmlab_spine::{Memory, VecMemory};
use pmlab_tx::{Area, Fault, FaultPlan, Protocol, RedoProtocol, TxError, UndoProtocol};

/// The software protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProtocolKind {
    /// pmlab-tx's redo (write-ahead) log: 2 fences per transaction.
    Redo,
    /// pmlab-tx's undo log (PMDK's scheme): k + 2 fences.
    Undo,
}

impl ProtocolKind {
    /// Both.
    pub const ALL: [ProtocolKind; 2] = [ProtocolKind::Redo, ProtocolKind::Undo];

    /// The name on command lines, in pools and in results.
    pub fn name(self) -> &'static str {
        match self {
            ProtocolKind::Redo => "redo",
            ProtocolKind::Undo => "undo",
        }
    }

    /// Parses [`ProtocolKind::name`].
    pub fn from_name(s: &str) -> Option<ProtocolKind> {
        ProtocolKind::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The protocol's deliberately broken variants.
    pub fn faults(self) -> &'static [Fault] {
        match self {
            ProtocolKind::Redo => &Fault::REDO_PROTOCOL,
            ProtocolKind::Undo => &Fault::UNDO_PROTOCOL,
        }
    }

    /// The protocol whose broken variant `fault` is.
    pub fn of_fault(fault: Fault) -> Option<ProtocolKind> {
        ProtocolKind::ALL
            .into_iter()
            .find(|p| p.faults().contains(&fault))
    }
}

impl std::fmt::Display for ProtocolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How the drivers make instances of one protocol (see the module documentation).
pub trait Harness {
    /// The protocol running on the machine model.
    type Live: Protocol<Mem = Machine>;
    /// The protocol recovering a crash image.
    type Image: Protocol;

    /// The protocol's name (as the pool records it).
    fn name(&self) -> &'static str;

    /// A freshly formatted instance over `m`.
    fn format(&self, m: Machine, log: Area, data: Area) -> Result<Self::Live, TxError>;

    /// An instance attached to a machine holding a crashed run (not yet recovered).
    fn attach_live(&self, m: Machine, log: Area, data: Area) -> Result<Self::Live, TxError>;

    /// An instance attached to a crash image (not yet recovered).
    fn attach_image(&self, image: &[u8], log: Area, data: Area) -> Result<Self::Image, TxError>;
}

fn image_memory(image: &[u8]) -> VecMemory {
    let mut m = VecMemory::new(image.len());
    m.write(0, image)
        .expect("an image fits a memory of its own size");
    m
}

/// The redo log, correct or with a deliberate fault.
#[derive(Clone, Copy, Debug, Default)]
pub struct RedoHarness(pub FaultPlan);

impl Harness for RedoHarness {
    type Live = RedoProtocol<Machine>;
    type Image = RedoProtocol<VecMemory>;

    fn name(&self) -> &'static str {
        "redo"
    }

    fn format(&self, m: Machine, log: Area, data: Area) -> Result<Self::Live, TxError> {
        Ok(RedoProtocol::format(m, log, data)?.with_faults(self.0))
    }

    fn attach_live(&self, m: Machine, log: Area, data: Area) -> Result<Self::Live, TxError> {
        Ok(RedoProtocol::attach(m, log, data)?.with_faults(self.0))
    }

    fn attach_image(&self, image: &[u8], log: Area, data: Area) -> Result<Self::Image, TxError> {
        Ok(RedoProtocol::attach(image_memory(image), log, data)?.with_faults(self.0))
    }
}

/// The undo log, correct or with a deliberate fault.
#[derive(Clone, Copy, Debug, Default)]
pub struct UndoHarness(pub FaultPlan);

impl Harness for UndoHarness {
    type Live = UndoProtocol<Machine>;
    type Image = UndoProtocol<VecMemory>;

    fn name(&self) -> &'static str {
        "undo"
    }

    fn format(&self, m: Machine, log: Area, data: Area) -> Result<Self::Live, TxError> {
        Ok(UndoProtocol::format(m, log, data)?.with_faults(self.0))
    }

    fn attach_live(&self, m: Machine, log: Area, data: Area) -> Result<Self::Live, TxError> {
        Ok(UndoProtocol::attach(m, log, data)?.with_faults(self.0))
    }

    fn attach_image(&self, image: &[u8], log: Area, data: Area) -> Result<Self::Image, TxError> {
        Ok(UndoProtocol::attach(image_memory(image), log, data)?.with_faults(self.0))
    }
}

/// A software protocol over any memory: what the native drivers make pools with.
pub trait Software<M: Memory>: Protocol<Mem = M> + Sized {
    /// Formats the protocol's log over `m`.
    fn format(m: M, log: Area, data: Area) -> Result<Self, TxError>;
    /// Attaches to the log in `m` (not yet recovered).
    fn attach(m: M, log: Area, data: Area) -> Result<Self, TxError>;
    /// Runs with `faults`.
    fn faulty(self, faults: FaultPlan) -> Self;
}

impl<M: Memory> Software<M> for RedoProtocol<M> {
    fn format(m: M, log: Area, data: Area) -> Result<Self, TxError> {
        RedoProtocol::format(m, log, data)
    }
    fn attach(m: M, log: Area, data: Area) -> Result<Self, TxError> {
        RedoProtocol::attach(m, log, data)
    }
    fn faulty(self, faults: FaultPlan) -> Self {
        self.with_faults(faults)
    }
}

impl<M: Memory> Software<M> for UndoProtocol<M> {
    fn format(m: M, log: Area, data: Area) -> Result<Self, TxError> {
        UndoProtocol::format(m, log, data)
    }
    fn attach(m: M, log: Area, data: Area) -> Result<Self, TxError> {
        UndoProtocol::attach(m, log, data)
    }
    fn faulty(self, faults: FaultPlan) -> Self {
        self.with_faults(faults)
    }
}

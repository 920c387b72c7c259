//! Protocol options, including the deliberately broken variants that prove the crash
//! tests can fail.

/// A deliberate protocol bug. Never set outside tests: each one breaks crash
/// consistency, and the crash explorer must catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Redo: apply the writes in place without the fence that makes the log (and its
    /// commit checksum) durable first.
    RedoSkipLogFence,
    /// Undo: store in place without the fence that makes the undo record durable first.
    UndoSkipSnapshotFence,
    /// Undo: write the commit mark without the fence that makes the data durable first.
    UndoSkipDataFence,
    /// Allocator: update the allocation state without the fence that makes the intent
    /// record durable first.
    AllocSkipIntentFence,
}

/// How a log or allocator runs its protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Protocol {
    /// A deliberate bug, for crash-test validation only; `None` in real use.
    pub fault: Option<Fault>,
}

impl Protocol {
    /// The correct protocol.
    pub const CORRECT: Protocol = Protocol { fault: None };

    /// The protocol with one deliberate bug.
    pub fn broken(fault: Fault) -> Protocol {
        Protocol { fault: Some(fault) }
    }

    pub(crate) fn has(self, fault: Fault) -> bool {
        self.fault == Some(fault)
    }
}

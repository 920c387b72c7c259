//! Fault plans: the deliberately broken variants of the logs and the allocator that
//! prove the crash tests can fail. (A *protocol* in pmlab is a transaction protocol,
//! [`crate::Protocol`]; a fault plan says which deliberate bug, if any, a protocol's
//! implementation runs with.)

/// A deliberate protocol bug. Never set outside tests: each one breaks crash
/// consistency, and the crash explorer must catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Redo: apply the writes in place without the fence that makes the log (and its
    /// commit checksum) durable first.
    RedoSkipLogFence,
    /// Redo: return from commit without the fence that makes the in-place writes
    /// durable. The log still vouches for them until the next transaction overwrites
    /// it — and that transaction's log can become durable before these writes do.
    RedoSkipApplyFence,
    /// Redo: the checksum covers the header alone, and recovery checks it the same
    /// way, so a header that became durable before its body passes for a committed
    /// transaction and recovery replays whatever the body lines hold.
    RedoHeaderOnlyChecksum,
    /// Redo: write the log without flushing its lines (the fence that follows orders
    /// nothing), so the in-place writes can reach memory before the log does.
    RedoSkipLogFlush,
    /// Redo recovery: find the committed log but skip replaying it, trusting that the
    /// commit had finished writing in place.
    RedoRecoverySkipsReplay,
    /// Undo: store in place without the fence that makes the undo record durable first.
    UndoSkipSnapshotFence,
    /// Undo: write the undo records without flushing their lines.
    UndoSkipSnapshotFlush,
    /// Undo recovery: mark the interrupted transaction finished without rolling its
    /// stores back.
    UndoRecoverySkipsRollback,
    /// Undo: write the commit mark without the fence that makes the data durable first.
    UndoSkipDataFence,
    /// Allocator: update the allocation state without the fence that makes the intent
    /// record durable first.
    AllocSkipIntentFence,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 10] = [
        Fault::RedoSkipLogFence,
        Fault::RedoSkipApplyFence,
        Fault::RedoHeaderOnlyChecksum,
        Fault::RedoSkipLogFlush,
        Fault::RedoRecoverySkipsReplay,
        Fault::UndoSkipSnapshotFence,
        Fault::UndoSkipDataFence,
        Fault::UndoSkipSnapshotFlush,
        Fault::UndoRecoverySkipsRollback,
        Fault::AllocSkipIntentFence,
    ];

    /// The faults of the redo log's commit (the file system's crash test injects these).
    pub const REDO: [Fault; 3] = [
        Fault::RedoSkipLogFence,
        Fault::RedoSkipApplyFence,
        Fault::RedoHeaderOnlyChecksum,
    ];

    /// The faults of [`crate::RedoProtocol`]: missing fences, a log not flushed, a
    /// recovery that skips a step.
    pub const REDO_PROTOCOL: [Fault; 5] = [
        Fault::RedoSkipLogFence,
        Fault::RedoSkipApplyFence,
        Fault::RedoHeaderOnlyChecksum,
        Fault::RedoSkipLogFlush,
        Fault::RedoRecoverySkipsReplay,
    ];

    /// The faults of [`crate::UndoProtocol`]: missing fences, records not flushed, a
    /// recovery that skips a step.
    pub const UNDO_PROTOCOL: [Fault; 4] = [
        Fault::UndoSkipSnapshotFence,
        Fault::UndoSkipDataFence,
        Fault::UndoSkipSnapshotFlush,
        Fault::UndoRecoverySkipsRollback,
    ];

    /// The fault's name on command lines (`skip-log-fence`, ...). Names are unique
    /// across structures.
    pub fn name(self) -> &'static str {
        match self {
            Fault::RedoSkipLogFence => "skip-log-fence",
            Fault::RedoSkipApplyFence => "skip-apply-fence",
            Fault::RedoHeaderOnlyChecksum => "header-only-checksum",
            Fault::RedoSkipLogFlush => "skip-log-flush",
            Fault::RedoRecoverySkipsReplay => "recovery-skips-replay",
            Fault::UndoSkipSnapshotFence => "skip-snapshot-fence",
            Fault::UndoSkipDataFence => "skip-data-fence",
            Fault::UndoSkipSnapshotFlush => "skip-snapshot-flush",
            Fault::UndoRecoverySkipsRollback => "recovery-skips-rollback",
            Fault::AllocSkipIntentFence => "skip-intent-fence",
        }
    }

    /// The fault named `name` (see [`Fault::name`]).
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Which deliberate bug, if any, a log or allocator runs with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// A deliberate bug, for crash-test validation only; `None` in real use.
    pub fault: Option<Fault>,
}

impl FaultPlan {
    /// No fault: the correct implementation.
    pub const CORRECT: FaultPlan = FaultPlan { fault: None };

    /// One deliberate bug.
    pub fn broken(fault: Fault) -> FaultPlan {
        FaultPlan { fault: Some(fault) }
    }

    /// Whether this plan carries `fault`.
    pub fn has(self, fault: Fault) -> bool {
        self.fault == Some(fault)
    }
}

impl std::fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.fault {
            None => write!(f, "correct"),
            Some(fault) => write!(f, "{}", fault.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_names_round_trip_and_are_unique() {
        for f in Fault::ALL {
            assert_eq!(Fault::from_name(f.name()), Some(f));
        }
        let mut names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Fault::ALL.len());
        assert_eq!(Fault::from_name("skip-everything"), None);
        assert_eq!(FaultPlan::CORRECT.to_string(), "correct");
        assert_eq!(
            FaultPlan::broken(Fault::RedoSkipApplyFence).to_string(),
            "skip-apply-fence"
        );
    }
}

//! Where a protocol instance is in its life (the transaction interface's states).

use pmlab_tx::TxError;

/// The states of an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Attached to memory that may have crashed: recover first.
    NeedsRecovery,
    /// Ready for `begin`.
    Idle,
    /// A transaction is running.
    InTx,
}

impl Phase {
    /// Checks that a transaction may begin.
    pub(crate) fn check_begin(self) -> Result<(), TxError> {
        match self {
            Phase::NeedsRecovery => Err(TxError::NeedsRecovery),
            Phase::Idle => Ok(()),
            Phase::InTx => Err(TxError::InTransaction),
        }
    }

    /// Checks that `op` runs inside a transaction.
    pub(crate) fn check_in_tx(self, op: &'static str) -> Result<(), TxError> {
        match self {
            Phase::InTx => Ok(()),
            _ => Err(TxError::NoTransaction { op }),
        }
    }

    /// Checks that reads may run: anywhere but before recovery.
    pub(crate) fn check_read(self) -> Result<(), TxError> {
        match self {
            Phase::NeedsRecovery => Err(TxError::NeedsRecovery),
            _ => Ok(()),
        }
    }
}

//! How the consistent state table becomes durable: the two ways of paper 000 §2.4,
//! behind one dispatch.

use pmlab_model::Machine;
use pmlab_tx::TxError;
use rustc_hash::FxHashMap;

use super::config::OspFault;
use super::journal::Journal;
use super::state::State;
use super::superpage::SuperPage;
use crate::flushes::Source;

/// A change of the consistent state table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    /// A transaction committed `updated` on page `vpn` (frames `p0`, `p1`): its new
    /// committed bitmap is `cb_after`.
    Commit {
        vpn: u64,
        p0: u64,
        p1: u64,
        updated: u64,
        cb_after: u64,
    },
    /// Page `vpn` was consolidated into frame `target` and has one frame again.
    Consolidate { vpn: u64, target: u64 },
}

/// A tuple `<V, P0, P1, CB>` of the consistent state table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tuple {
    pub p0: u64,
    pub p1: u64,
    pub cb: u64,
}

/// What recovery finds durable: the tuples and the page map, and how many journal
/// records (or table lines) it read.
pub(crate) struct Durable {
    pub tuples: FxHashMap<u64, Tuple>,
    pub pte: Vec<u64>,
    pub replayed: u64,
}

/// The durability mechanism.
pub(crate) enum Backend {
    Journal(Journal),
    SuperPage(SuperPage),
}

impl Backend {
    /// Makes a transaction's records durable, atomically with the consolidations
    /// still waiting; counted to the journal.
    pub fn commit(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        records: &[Record],
        fault: Option<OspFault>,
    ) -> Result<(), TxError> {
        match self {
            Backend::Journal(j) => j.commit(m, st, records),
            Backend::SuperPage(s) => s.commit(m, st, records, fault),
        }
    }

    /// Makes the waiting consolidations durable (to free their frames); counted to
    /// `source`.
    pub fn drain(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        source: Source,
        fault: Option<OspFault>,
    ) -> Result<(), TxError> {
        match self {
            Backend::Journal(j) => j.drain(m, st, source),
            Backend::SuperPage(s) => s.drain(m, st, source, fault),
        }
    }

    /// Page `vpn` was consolidated; `named`: the durable table names its old frame;
    /// `moved`: the page map changed. Whether the old frame must wait in limbo for
    /// the next durable point.
    pub fn consolidated(
        &mut self,
        m: &mut Machine,
        st: &mut State,
        vpn: u64,
        named: bool,
        moved: bool,
        fault: Option<OspFault>,
    ) -> bool {
        let stale = fault == Some(OspFault::StaleTableOnEviction);
        match self {
            Backend::Journal(j) => {
                if !named || stale {
                    return false;
                }
                let target = st.pte_of(vpn);
                j.push(Record::Consolidate { vpn, target });
                true
            }
            Backend::SuperPage(s) => s.consolidated(m, st, vpn, named, moved, stale),
        }
    }

    /// After recovery consolidated every page: an empty table, durably.
    pub fn reset(&mut self, m: &mut Machine, st: &mut State) -> Result<(), TxError> {
        match self {
            Backend::Journal(j) => j.reset(m, st),
            Backend::SuperPage(s) => s.reset(m, st),
        }
    }
}

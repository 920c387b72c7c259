//! Crash exploration of the paper's workloads under both hardware protocols (and
//! their broken variants), on pmlab-txcheck's one explorer: every crash point of every
//! recorded transaction, with every subset of the pending write-backs up to eight,
//! recovered and held against the workload's checker and a committed-prefix oracle;
//! and recovery itself crashed at every point for a few images per transaction.

use pmlab_hwtx::{HwUndoFault, OspConfig, OspFault, OspProtocol};
use pmlab_tx::PoolLayout;
use pmlab_txcheck::crash::{self, Config, Report};
use pmlab_workloads::{Params, Workload};

use super::harness::{HwUndoHarness, OspHarness};
use super::paper::PaperWorkload;

/// A protocol to explore.
#[derive(Clone, Debug)]
pub enum Subject {
    /// The hardware undo log, correct or broken.
    Undo(Option<HwUndoFault>),
    /// OSP with a configuration.
    Osp(OspConfig),
}

impl Subject {
    /// A name for tables.
    pub fn name(&self) -> String {
        match self {
            Subject::Undo(None) => "hw-undo".into(),
            Subject::Undo(Some(f)) => format!("hw-undo/{}", f.name()),
            Subject::Osp(c) => {
                let mut s = format!("osp/{}/{}", c.atomicity.name(), c.consolidation.name());
                if let Some(f) = c.fault {
                    s += &format!("/{}", f.name());
                }
                s
            }
        }
    }

    /// OSP's crash-test machine: a TLB of two entries, so that nearly every
    /// transaction evicts and consolidates pages and the journal checkpoints often.
    pub fn osp_small(fault: Option<OspFault>) -> OspConfig {
        OspConfig {
            fault,
            ..OspConfig::small(2)
        }
    }
}

/// The explorer's configuration for `w` under `s`: the CI-sized structure of
/// pmlab-txcheck, at least eight pages (so pages leave OSP's TLB), `txs`
/// transactions.
pub fn config(w: PaperWorkload, s: &Subject, txs: u64, seed: u64) -> Config {
    let mut c = Config::small(w.kind, seed);
    c.params.dist = w.dist;
    c.txs = txs;
    let pages = |p: &Params| Workload::footprint(w.kind, p).div_ceil(4096);
    while pages(&c.params) < 8 {
        c.params.elements *= 2;
    }
    if let Subject::Osp(o) = s {
        let data = PoolLayout::needed(0, Workload::footprint(w.kind, &c.params)) - 4096;
        c.log_len = OspProtocol::meta_len(data, o);
    }
    c
}

/// Explores `w` under `s`.
pub fn explore(
    w: PaperWorkload,
    s: &Subject,
    txs: u64,
    seed: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<Report, crash::Error> {
    let c = config(w, s, txs, seed);
    match s {
        Subject::Undo(f) => crash::explore(&HwUndoHarness(*f), &c, progress),
        Subject::Osp(o) => crash::explore(&OspHarness(o.clone()), &c, progress),
    }
}

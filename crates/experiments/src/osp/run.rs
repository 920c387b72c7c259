//! One measured run: a workload's structure, bulk-loaded once, boots a machine per
//! protocol; each protocol runs the same seeded operation stream (warm-up, then the
//! measured transactions) and its CPU flushes, TLB counters and OSP's page-management
//! counters are taken over the measured transactions only.

use pmlab_hwtx::{CpuFlushes, HwUndoProtocol, OspConfig, OspProtocol, OspStats};
use pmlab_model::{Machine, MachineConfig, TlbStats};
use pmlab_tx::{Area, PoolLayout, Protocol, TxError};
use pmlab_workloads::{Ops, Params, Workload, WorkloadError};

use super::bulk::BulkLoad;
use super::paper::PaperWorkload;

/// Bytes of the hardware undo log's area: room for 8,191 logged lines.
pub const UNDO_LOG: u64 = 1 << 20;

/// A protocol measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The hardware undo log (the paper's baseline).
    Undo,
    /// OSP with a configuration.
    Osp(OspConfig),
}

impl Variant {
    /// Its name in tables and JSON.
    pub fn name(&self) -> String {
        match self {
            Variant::Undo => "undo".into(),
            Variant::Osp(c) => {
                let mut s = "osp".to_string();
                if c.atomicity != pmlab_hwtx::Atomicity::Journal {
                    s += &format!("-{}", c.atomicity.name());
                }
                if c.consolidation != pmlab_hwtx::Consolidation::OnEviction {
                    s += &format!("-{}", c.consolidation.name());
                }
                s
            }
        }
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The machine configuration.
    #[error(transparent)]
    Machine(#[from] pmlab_model::ConfigError),
    /// A protocol.
    #[error(transparent)]
    Tx(#[from] TxError),
    /// The workload.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The structure failed its checker after the run.
    #[error("{workload} under {protocol}: the structure after the run: {message}")]
    Check {
        /// The workload.
        workload: &'static str,
        /// The protocol.
        protocol: String,
        /// The checker's message.
        message: String,
    },
}

/// A structure built once, as bytes to boot machines with.
pub struct Prepared {
    /// The workload.
    pub workload: PaperWorkload,
    /// Its size.
    pub params: Params,
    /// Where the pool's parts are.
    pub layout: PoolLayout,
    /// The memory image.
    pub image: Vec<u8>,
}

/// Bulk-loads `w` with `elements` elements in a pool whose log area has `log_len`
/// bytes.
pub fn prepare(w: PaperWorkload, elements: u64, log_len: u64) -> Result<Prepared, RunError> {
    let params = Params {
        elements,
        dist: w.dist,
        ops_per_tx: 1,
    };
    let footprint = Workload::footprint(w.kind, &params);
    let size = PoolLayout::needed(log_len, footprint);
    let layout = PoolLayout::plan(size, "osp", w.kind.name(), log_len, footprint)?;
    let mut bulk = BulkLoad::new(size, layout.data);
    Workload::format(&mut bulk, w.kind, &params, layout.data)?;
    layout.write(bulk.memory_mut())?;
    let image = bulk.into_memory().bytes().to_vec();
    Ok(Prepared {
        workload: w,
        params,
        layout,
        image,
    })
}

/// What one protocol did over the measured transactions.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// The workload (paper name).
    pub workload: &'static str,
    /// The protocol.
    pub protocol: String,
    /// Measured transactions.
    pub txs: u64,
    /// CPU flushes by source.
    pub flushes: CpuFlushes,
    /// TLB lookups that hit and missed.
    pub tlb: TlbStats,
    /// OSP's counters (zero for the undo log).
    pub osp: OspStats,
    /// Lines written to NVM (the device's write count).
    pub nvm_writes: u64,
}

impl Measurement {
    /// TLB misses per lookup.
    pub fn tlb_miss_ratio(&self) -> f64 {
        let n = self.tlb.hits + self.tlb.misses;
        if n == 0 {
            0.0
        } else {
            self.tlb.misses as f64 / n as f64
        }
    }

    /// CPU flushes per transaction.
    pub fn per_tx(&self, n: u64) -> f64 {
        n as f64 / self.txs.max(1) as f64
    }
}

/// The machine every protocol is measured on: the model's three-level hierarchy
/// (32 KiB, 256 KiB, 1 MiB; paper 000 gives no cache sizes), 4 KiB pages; the
/// protocols install their own TLB (OSP's) or keep the same one (the undo log).
pub fn machine(size: u64, tlb: &OspConfig) -> MachineConfig {
    let mut c = MachineConfig::loc(size);
    c.translation.tlb = Some(tlb.tlb.clone());
    c
}

/// How many transactions to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Transactions before the counters are read (TLB and structure warm).
    pub warmup: u64,
    /// Measured transactions.
    pub txs: u64,
    /// Seed of the operation stream (the same for every protocol).
    pub seed: u64,
    /// Operations per transaction (1 in the paper's workloads).
    pub ops_per_tx: u32,
}

/// Runs `v` on a machine booted from `prep`; `progress` is told of each transaction.
pub fn measure(
    prep: &Prepared,
    v: &Variant,
    tlb: &OspConfig,
    sched: Schedule,
    progress: &mut dyn FnMut(),
) -> Result<Measurement, RunError> {
    let m = Machine::with_image(machine(prep.image.len() as u64, tlb), prep.image.clone())?;
    let (log, data) = (prep.layout.log, prep.layout.data);
    match v {
        Variant::Undo => {
            let p = HwUndoProtocol::format(m, log, data)?;
            drive(prep, v, p, sched, progress, |p| {
                (p.flushes(), OspStats::default())
            })
        }
        Variant::Osp(c) => {
            let p = OspProtocol::format(m, log, data, c.clone())?;
            drive(prep, v, p, sched, progress, |p| {
                (p.flushes(), p.osp_stats())
            })
        }
    }
}

fn drive<P: Protocol<Mem = Machine>>(
    prep: &Prepared,
    v: &Variant,
    mut p: P,
    sched: Schedule,
    progress: &mut dyn FnMut(),
    counters: impl Fn(&P) -> (CpuFlushes, OspStats),
) -> Result<Measurement, RunError> {
    let w = prep.workload;
    let data: Area = prep.layout.data;
    let mut wl = Workload::open(&mut p, w.kind, data)?;
    let params = Params {
        ops_per_tx: sched.ops_per_tx,
        ..prep.params
    };
    let mut ops = Ops::new(sched.seed, &wl, &params);
    for _ in 0..sched.warmup {
        wl.run_tx(&mut p, &mut ops)?;
        progress();
    }
    let (f0, o0) = counters(&p);
    let (s0, d0) = (p.memory().stats(), p.memory().device().writes());
    for _ in 0..sched.txs {
        wl.run_tx(&mut p, &mut ops)?;
        progress();
    }
    let (f1, o1) = counters(&p);
    let s1 = p.memory().stats();
    let tlb = TlbStats {
        hits: s1.tlb.hits - s0.tlb.hits,
        misses: s1.tlb.misses - s0.tlb.misses,
        flushes: s1.tlb.flushes - s0.tlb.flushes,
        evictions: s1.tlb.evictions - s0.tlb.evictions,
    };
    let nvm_writes = p.memory().device().writes() - d0;
    wl.check(&mut p).map_err(|e| RunError::Check {
        workload: w.name,
        protocol: v.name(),
        message: e.to_string(),
    })?;
    Ok(Measurement {
        workload: w.name,
        protocol: v.name(),
        txs: sched.txs,
        flushes: f1.since(&f0),
        tlb,
        osp: o1.since(&o0),
        nvm_writes,
    })
}

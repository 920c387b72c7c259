//! One run: a workload built once (natively, on plain memory, by pmlab-tx's redo log),
//! then, for each protocol and memory latency, loaded into a machine of LOC's Table I,
//! warmed up and measured.

use std::sync::Arc;
use std::time::Instant;

use pmlab_hwtx::{CycleLedger, EngineStats, HwConfig, HwProtocol};
use pmlab_model::{Machine, MachineConfig};
use pmlab_spine::VecMemory;
use pmlab_tx::{Area, Protocol, RedoProtocol};
use pmlab_workloads::{Kind, NodeReads, Ops, Params, Workload};
use serde::Serialize;

use super::LocError;

/// Where the protocols' log (or Kiln's NV-LLC state) lives: 32 MiB, the paper's memory
/// log area (§IV-B), after a 64 KiB page of nothing.
pub const LOG: Area = Area::new(64 << 10, 32 << 20);

/// A workload made once, as a memory image every run starts from.
#[derive(Clone, Debug)]
pub struct Built {
    /// The workload.
    pub kind: Kind,
    /// Its parameters.
    pub params: Params,
    /// The data area.
    pub data: Area,
    /// Bytes of the structure (its footprint).
    pub footprint: u64,
    /// The machine's memory: log area zero, data area holding the structure.
    pub image: Arc<Vec<u8>>,
}

/// Makes `kind` with `params` (its first elements inserted by transactions of the redo
/// log over plain memory, so the machine never simulates the fill).
pub fn build(kind: Kind, params: Params) -> Result<Built, LocError> {
    let footprint = Workload::footprint(kind, &params);
    let data = Area::new(LOG.end(), footprint.div_ceil(4096) * 4096);
    let size = data.end();
    let mem = VecMemory::new(size as usize);
    // The redo log borrows the start of the (later zeroed) log area.
    let redo_log = Area::new(LOG.base, 16 << 20);
    let mut redo = RedoProtocol::format(mem, redo_log, data)?;
    Workload::format(&mut redo, kind, &params, data)?;
    let mut image = redo.into_memory().bytes().to_vec();
    image[LOG.base as usize..LOG.end() as usize].fill(0);
    Ok(Built {
        kind,
        params,
        data,
        footprint,
        image: Arc::new(image),
    })
}

/// What one run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunResult {
    /// Simulated cycles of the measured transactions (and the `TxFlush` that makes the
    /// last of them persistent).
    pub cycles: u64,
    /// Transactions measured (all commit).
    pub committed_tx: u64,
    /// Line accesses the core made in the measured part.
    pub accesses: u64,
    /// Of them, those that went to memory (measured part).
    pub memory_reads: u64,
    /// Cycles the core stalled on persistence in the measured part.
    pub persist_stall_cycles: u64,
    /// Data lines the protocol logged in the measured part.
    pub log_lines: u64,
    /// Cycles the core's memory reads waited for a busy bank (measured part).
    pub read_queue_cycles: u64,
    /// Cycles `TxBegin` waited for the previous speculation window (measured part).
    pub window_wait_cycles: u64,
    /// Of `log_lines`, those logged by an LLC eviction (measured part).
    pub evicted_log_lines: u64,
    /// Older versions sent to the log by a full set (measured part).
    pub version_overflows: u64,
    /// Writes of data home (measured part).
    pub home_writes: u64,
    /// Where the measured part's cycles went (its total is `cycles`, exactly).
    pub ledger: CycleLedger,
    /// Wall-clock seconds of the measured part.
    pub wall_s: f64,
    /// The protocol's counters over the whole run (warm-up included).
    pub stats: EngineStats,
}

impl RunResult {
    /// Committed transactions per simulated cycle.
    pub fn throughput(&self) -> f64 {
        self.committed_tx as f64 / self.cycles.max(1) as f64
    }
}

/// Runs `warmup` then `txs` transactions of `b` under `hw` on LOC's machine with memory
/// latency `latency_ns`, the operations drawn from `seed`.
pub fn run(
    b: &Built,
    hw: HwConfig,
    latency_ns: u64,
    warmup: u64,
    txs: u64,
    seed: u64,
) -> Result<RunResult, LocError> {
    let mut mc = MachineConfig::loc(b.image.len() as u64);
    mc.device.read_ns = latency_ns;
    mc.device.write_ns = latency_ns;
    run_on(b, hw, mc, NodeReads::Whole, warmup, txs, seed)
}

/// [`run`] on machine `mc` (LOC's Table I changed by the caller), the B+-tree and the
/// table reading the nodes they search as `reads` says.
pub fn run_on(
    b: &Built,
    hw: HwConfig,
    mut mc: MachineConfig,
    reads: NodeReads,
    warmup: u64,
    txs: u64,
    seed: u64,
) -> Result<RunResult, LocError> {
    // Table I has no TLB; the protocols' core translates nothing.
    mc.translation.tlb = None;
    let (image, spare) = buffers(&b.image);
    let m = Machine::with_image_reusing(mc, image, spare)?;
    let mut p = HwProtocol::format(m, LOG, b.data, hw)?;
    let mut w = Workload::open(&mut p, b.kind, b.data)?;
    w.set_node_reads(reads);
    let mut ops = Ops::new(seed, &w, &b.params);
    for _ in 0..warmup {
        w.run_tx(&mut p, &mut ops)?;
    }
    let c0 = p.memory().cycles();
    let before = p.engine().map(|e| {
        (
            e.core().stats().clone(),
            e.stats(),
            e.core().ledger().clone(),
        )
    });
    let t = Instant::now();
    for _ in 0..txs {
        w.run_tx(&mut p, &mut ops)?;
    }
    p.flush()?;
    let wall_s = t.elapsed().as_secs_f64();
    let e = p.engine().expect("a formatted protocol runs");
    let (core0, e0, ledger0) = before.expect("a formatted protocol runs");
    let core = e.core().stats();
    let es = e.stats();
    let result = RunResult {
        cycles: p.memory().cycles() - c0,
        committed_tx: txs,
        accesses: core.accesses - core0.accesses,
        memory_reads: core.memory_reads - core0.memory_reads,
        persist_stall_cycles: core.persist_stall_cycles - core0.persist_stall_cycles,
        log_lines: es.log_lines - e0.log_lines,
        read_queue_cycles: core.read_queue_cycles - core0.read_queue_cycles,
        window_wait_cycles: es.window_wait_cycles - e0.window_wait_cycles,
        evicted_log_lines: es.evicted_log_lines - e0.evicted_log_lines,
        version_overflows: es.version_overflows - e0.version_overflows,
        home_writes: es.home_writes - e0.home_writes,
        ledger: e.core().ledger().since(&ledger0),
        wall_s,
        stats: es,
    };
    give_back(p.into_memory());
    Ok(result)
}

thread_local! {
    /// Image buffers of this thread's finished runs, for the next run to reuse: a
    /// run's machine holds two copies of memory (durable and current), tens of MB
    /// each, and allocating them afresh for every run cost as much system time (page
    /// faults) as the simulation itself.
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Two buffers for a machine over `image`: the image copied into a reused buffer (or a
/// new one), and a spare for the current image.
fn buffers(image: &[u8]) -> (Vec<u8>, Vec<u8>) {
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        let mut first = s.pop().unwrap_or_default();
        first.clear();
        first.extend_from_slice(image);
        (first, s.pop().unwrap_or_default())
    })
}

/// Keeps a finished machine's image buffers for this thread's next run.
fn give_back(m: Machine) {
    let (durable, current) = m.into_images();
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        s.clear();
        s.push(durable);
        s.push(current);
    });
}

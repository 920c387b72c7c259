//! OSP, paper 000's optimized shadow paging, as a machine feature behind the
//! transaction interface.
//!
//! A virtual page being updated has two frames, P0 and P1, and two bitmaps with one
//! bit per line held with its TLB entry: *committed* (line `i`'s committed version is
//! in P1 if set) and *updated* (the running transaction wrote line `i`). Reads go to
//! `P[committed ^ updated]`; a transactional store goes to `P[committed ^ 1]` and sets
//! the updated bit, the first one copying the line there (§2.1, §2.3). Commit writes
//! the updated lines back, makes the new committed bitmaps durable atomically across
//! pages — through the lightweight journal or the super page — and then applies
//! `committed ^= updated`, `updated = 0`; abort clears `updated` (§2.3, §2.4). When a
//! page's entry leaves the TLB its lines are consolidated into one frame (§2.2).
//! Regular (non-transactional) stores ([`OspProtocol::write_regular`]) go through the
//! same entries to the current version of each line.
//!
//! The consistent state table `<V, P0, P1, CB>` is the OS's: it changes on TLB misses
//! and evictions (a tuple whose committed bitmap is zero says no more than the page
//! table, so a miss writes nothing to NVM; an eviction's consolidation is recorded)
//! and at commits (§2.4). OSP runs as the machine's software TLB miss handler
//! ([`pmlab_model::TlbMissHandler`]), on the machine's own TLB.

mod backend;
mod config;
mod consolidate;
mod engine;
mod journal;
mod layout;
mod recover;
mod state;
mod superpage;

use pmlab_model::Machine;
use pmlab_spine::{Addr, Memory};
use pmlab_tx::{Area, Protocol, Recovery, TxError, TxId, TxStats};

use backend::Backend;
use engine::Osp;
use journal::Journal;
use superpage::SuperPage;

pub use config::{Atomicity, Consolidation, OspConfig, OspFault};
pub use layout::{LINES, Layout, PAGE};
pub use state::OspStats;

use crate::flushes::CpuFlushes;
use crate::phase::Phase;

/// OSP behind the transaction interface (see the module documentation).
pub struct OspProtocol {
    m: Machine,
    layout: Layout,
    data: Area,
    cfg: OspConfig,
    phase: Phase,
    committed: TxId,
    stats: TxStats,
}

fn config_error(meta: Area, problem: String) -> TxError {
    TxError::BadArea {
        structure: "OSP machine",
        addr: meta.base,
        problem,
    }
}

/// Checks `cfg` against the machine and installs its TLB (empty).
fn prepare(m: &mut Machine, meta: Area, cfg: &OspConfig) -> Result<(), TxError> {
    let page = m.config().translation.page_size.bytes();
    if page != PAGE {
        return Err(config_error(
            meta,
            format!("OSP needs 4 KiB pages, the machine has {page}"),
        ));
    }
    let two = cfg.tlb.entries + cfg.consolidation.queue() as u64 + cfg.max_tx_pages;
    if cfg.atomicity == Atomicity::SuperPage && two > layout::SUPER_TUPLES {
        return Err(config_error(
            meta,
            format!(
                "{two} pages may hold two frames, more than the super page's {} tuples",
                layout::SUPER_TUPLES
            ),
        ));
    }
    m.set_miss_handler(None);
    m.reconfigure_tlb(Some(cfg.tlb.clone()))
        .map_err(|e| config_error(meta, e.to_string()))
}

impl OspProtocol {
    /// Bytes of the state area (the pool's log area) OSP needs for a data area of
    /// `data_len` bytes under `cfg`.
    pub fn meta_len(data_len: u64, cfg: &OspConfig) -> u64 {
        Layout::meta_len(data_len, cfg.spare_frames(), cfg.journal_lines)
    }

    /// Formats OSP's state in `meta` for `data` (identity-mapped as it is) on `m`.
    pub fn format(mut m: Machine, meta: Area, data: Area, cfg: OspConfig) -> Result<Self, TxError> {
        prepare(&mut m, meta, &cfg)?;
        let layout = Layout::plan(meta, data, cfg.spare_frames(), cfg.journal_lines)?;
        layout.format(&mut m)?;
        let pte = (layout.first_vpn..layout.first_vpn + layout.pages).collect();
        let backend = match cfg.atomicity {
            Atomicity::Journal => Backend::Journal(Journal::fresh()),
            Atomicity::SuperPage => Backend::SuperPage(SuperPage::fresh(0)),
        };
        let osp = Osp {
            cfg: cfg.clone(),
            st: state::State::new(layout, pte),
            backend,
            recovering: false,
        };
        m.set_miss_handler(Some(Box::new(osp)));
        Ok(Self::new(m, layout, data, cfg, Phase::Idle))
    }

    /// Attaches to OSP state formatted earlier on `m` (checking its superblock;
    /// writing nothing). [`Protocol::recover`] must run before the first transaction.
    pub fn attach(mut m: Machine, meta: Area, data: Area, cfg: OspConfig) -> Result<Self, TxError> {
        prepare(&mut m, meta, &cfg)?;
        let layout = Layout::plan(meta, data, cfg.spare_frames(), cfg.journal_lines)?;
        layout.check(&mut m)?;
        Ok(Self::new(m, layout, data, cfg, Phase::NeedsRecovery))
    }

    fn new(m: Machine, layout: Layout, data: Area, cfg: OspConfig, phase: Phase) -> Self {
        OspProtocol {
            m,
            layout,
            data,
            cfg,
            phase,
            committed: 0,
            stats: TxStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &OspConfig {
        &self.cfg
    }

    /// Where OSP's state lives.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    fn osp(&self) -> &Osp {
        self.m
            .miss_handler::<Osp>()
            .expect("OSP's handler is installed")
    }

    /// CPU flushes so far, by source (data, journal, consolidation).
    pub fn flushes(&self) -> CpuFlushes {
        self.osp().st.flushes
    }

    /// Page-management counters.
    pub fn osp_stats(&self) -> OspStats {
        self.osp().st.stats
    }

    /// Free spare frames, and frames waiting in limbo.
    pub fn frames(&self) -> (usize, usize) {
        let f = &self.osp().st.frames;
        (f.free_count(), f.limbo_count())
    }

    /// Runs `f` on OSP's state and the machine.
    fn run<R>(&mut self, f: impl FnOnce(&mut Osp, &mut Machine) -> R) -> R {
        self.m
            .with_miss_handler(f)
            .expect("OSP's handler is installed")
    }

    /// A regular (non-transactional) store (§2.3): through the same TLB entries, to
    /// the current version of each line, with no crash-consistency guarantee.
    pub fn write_regular(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        self.phase.check_read()?;
        self.check_data("write", addr, data.len() as u64)?;
        Ok(self.m.write(addr, data)?)
    }

    fn check_data(&self, op: &'static str, addr: Addr, len: u64) -> Result<(), TxError> {
        if self.data.contains(addr, len) {
            return Ok(());
        }
        Err(TxError::OutsideData {
            op,
            addr,
            len,
            lo: self.data.base,
            hi: self.data.end(),
        })
    }

    /// The background work of asynchronous consolidation, as between transactions.
    fn background(&mut self) {
        self.run(|o, m| o.background(m));
    }
}

impl Protocol for OspProtocol {
    type Mem = Machine;

    fn name(&self) -> &'static str {
        "osp"
    }

    fn recover(&mut self) -> Result<Recovery, TxError> {
        if self.phase == Phase::InTx {
            return Err(TxError::InTransaction);
        }
        prepare(&mut self.m, self.layout.meta, &self.cfg)?;
        let (osp, rec) = recover::recover(&mut self.m, &self.cfg, self.layout)?;
        self.m.set_miss_handler(Some(Box::new(osp)));
        self.phase = Phase::Idle;
        Ok(rec)
    }

    fn begin(&mut self) -> Result<(), TxError> {
        self.phase.check_begin()?;
        self.phase = Phase::InTx;
        Ok(())
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), TxError> {
        self.phase.check_read()?;
        self.check_data("read", addr, buf.len() as u64)?;
        Ok(self.m.read(addr, buf)?)
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), TxError> {
        self.phase.check_in_tx("write")?;
        let len = data.len() as u64;
        self.check_data("write", addr, len)?;
        if len == 0 {
            return Ok(());
        }
        let vpns: Vec<u64> = (addr / PAGE..=(addr + len - 1) / PAGE).collect();
        self.run(|o, m| o.ensure_frames(m, &vpns))?;
        self.m.write_marked(addr, data)?;
        self.stats.writes += 1;
        self.stats.write_bytes += len;
        Ok(())
    }

    fn commit(&mut self) -> Result<TxId, TxError> {
        self.phase.check_in_tx("commit")?;
        self.run(|o, m| o.commit(m))?;
        self.phase = Phase::Idle;
        self.committed += 1;
        self.stats.commits += 1;
        self.background();
        Ok(self.committed)
    }

    fn abort(&mut self) -> Result<(), TxError> {
        self.phase.check_in_tx("abort")?;
        self.run(|o, m| o.abort(m));
        self.phase = Phase::Idle;
        self.stats.aborts += 1;
        self.background();
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TxError> {
        Ok(())
    }

    fn durable(&self) -> TxId {
        self.committed
    }

    fn in_transaction(&self) -> bool {
        self.phase == Phase::InTx
    }

    fn stats(&self) -> TxStats {
        self.stats
    }

    fn memory(&self) -> &Machine {
        &self.m
    }

    fn memory_mut(&mut self) -> &mut Machine {
        &mut self.m
    }

    /// The machine, with OSP's handler removed and its TLB emptied (attach again to
    /// continue: recovery consolidates what the handler held).
    fn into_memory(mut self) -> Machine {
        self.m.set_miss_handler(None);
        let tlb = self.m.config().translation.tlb.clone();
        self.m
            .reconfigure_tlb(tlb)
            .expect("the TLB's own configuration is valid");
        self.m
    }
}

//! The machine: CPU timing, TLB, page tables, caches, memory device and persistence
//! domain behind the spine's [`Memory`] interface.

mod mmu;
mod persistence;
mod phys;
mod port;
mod switch;

pub use switch::SwitchCost;

pub use mmu::TlbMissHandler;
pub use persistence::DEFAULT_RECORDING_LIMIT;
pub use phys::Phys;

use pmlab_spine::Asid;
use pmlab_spine::{Addr, FlushKind, LINE, Memory, PersistCounters, SpineError, check_bounds};
use pmlab_trace::Kind;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::adapters::dinero_hierarchy;
use crate::cache_levels::{CacheLevels, Uncached};
use crate::config::MachineConfig;
use crate::device::{Device, Endurance};
use crate::error::ConfigError;
use crate::memctl::MemoryController;
use crate::os_pages::OsPages;
use crate::paging::{DemandPages, IdentityPages, PageTables};
use crate::persist::{DurableState, Event, LineSet, PendingFlush, PointKind};
use crate::tlb::{Departed, Tlb, TlbStats};

/// Everything the machine counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineStats {
    /// CPU cycles.
    pub cycles: u64,
    /// Instructions: one per line-sized load or store, flush and fence, plus
    /// [`Machine::advance_instructions`].
    pub instructions: u64,
    /// Line-sized loads.
    pub loads: u64,
    /// Line-sized stores.
    pub stores: u64,
    /// `served[i]`: accesses served by cache level `i`; the last entry is memory.
    pub served: Vec<u64>,
    /// TLB counters (zero without a TLB).
    pub tlb: TlbStats,
    /// Line flushes by kind: `clflush`, `clflushopt`, `clwb`.
    pub flushes_by_kind: [u64; 3],
    /// Flushes that wrote a dirty line back.
    pub flush_writebacks: u64,
    /// Fences.
    pub fences: u64,
    /// Write requests that reached the device by eviction or write-through.
    pub eviction_writes: u64,
    /// Write-backs made by chaos mode.
    pub chaos_writebacks: u64,
    /// Line-sized non-temporal stores ([`Machine::write_nt`]).
    pub nt_stores: u64,
    /// Fences that drained at least one non-temporal store: write-combining buffer
    /// flushes, which OSP counts among its CPU flushes (paper 000 §3.1).
    #[serde(default)]
    pub nt_drains: u64,
    /// CR3 loads ([`Machine::load_cr3`], [`Machine::vas_switch`]).
    pub cr3_loads: u64,
    /// System calls ([`Machine::syscall`]).
    pub syscalls: u64,
    /// Page-table entries written by the OS ([`Machine::charge_table_work`]).
    pub table_entry_writes: u64,
    /// Read requests served by the device.
    pub device_reads: u64,
    /// Write requests served by the device (all causes).
    pub device_writes: u64,
}

struct Chaos {
    rng: Xoshiro256PlusPlus,
    probability: f64,
}

/// The simulated machine.
///
/// Addresses given to [`Memory`] are virtual addresses of the current address space
/// ([`Machine::switch_space`]); with the identity translation (the default) they are
/// physical addresses of a flat persistent space. The images ([`Machine::crash`],
/// [`Machine::current_image`]) are physical memory.
pub struct Machine {
    config: MachineConfig,
    level_latency: Vec<u64>,
    /// Cycles of looking in every cache level, paid before a miss reaches memory.
    levels_cycles: u64,
    /// The memory controller: per-bank queues in front of the device.
    ctl: MemoryController,
    page_shift: u32,
    asid: Asid,
    tlb: Option<Tlb>,
    pages: Box<dyn PageTables>,
    caches: Box<dyn CacheLevels>,
    device: Device,
    current: Vec<u8>,
    durable: DurableState,
    dirty: LineSet,
    /// The cycle the last write a fence orders (a `clwb`, `clflushopt`, non-temporal
    /// store or port write) completes.
    outstanding_until: u64,
    /// Port writes queued at the memory controller and not yet landed, by completion.
    inflight: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64)>>,
    /// Non-temporal stores since the last fence (a fence that drains them is a
    /// write-combining buffer flush, which paper 000 counts as a CPU flush).
    outstanding_nt: u64,
    chaos: Option<Chaos>,
    recording: Option<Vec<Event>>,
    recording_base: Option<DurableState>,
    /// Bytes of events in the current recording, and the most it may hold.
    recorded_bytes: u64,
    recording_limit: u64,
    /// Set when the current recording reached its limit and stopped.
    recording_overflow: Option<crate::recording::RecordingOverflow>,
    stats: MachineStats,
    wbuf: Vec<(u64, u32)>,
    /// The software TLB miss handler, if one is installed ([`TlbMissHandler`]).
    miss_handler: Option<Box<dyn TlbMissHandler>>,
    /// Set while the handler is out of its slot, running.
    handler_running: bool,
    /// Entries that left the TLB, waiting to be told to the handler.
    departed: Vec<Departed>,
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Machine")
            .field("config", &self.config)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Machine {
    /// A machine with zeroed memory, `pmlab-cache`'s Dinero IV-exact hierarchy and the
    /// page tables the configuration names.
    pub fn new(config: MachineConfig) -> Result<Self, ConfigError> {
        let image = vec![0; config.memory_size as usize];
        Self::with_image(config, image)
    }

    /// A machine that boots with `image` as its memory contents (both durable and
    /// current; caches and TLB cold) — e.g. the image a crash left, for recovery.
    pub fn with_image(config: MachineConfig, image: Vec<u8>) -> Result<Self, ConfigError> {
        Self::with_image_reusing(config, image, Vec::new())
    }

    /// [`Machine::with_image`], keeping the current image in `spare`, a buffer given
    /// back by [`Machine::into_images`]: a run after run then allocates, and faults in,
    /// no new memory for its images (which dominated the system time of many short
    /// runs over large memories). The same machine as [`Machine::with_image`] makes.
    pub fn with_image_reusing(
        config: MachineConfig,
        image: Vec<u8>,
        spare: Vec<u8>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let frames = config.memory_size / config.translation.page_size.bytes();
        let pages: Box<dyn PageTables> = if config.translation.identity {
            Box::new(IdentityPages::new(frames))
        } else if let Some(os) = OsPages::from_config(&config)? {
            Box::new(os)
        } else {
            Box::new(DemandPages::new(frames))
        };
        // pmlab-cache needs at least one level.
        let caches: Box<dyn CacheLevels> = if config.caches.is_empty() {
            Box::new(Uncached::default())
        } else {
            Box::new(dinero_hierarchy(&config.caches, config.cache_seed)?)
        };
        Self::with_parts_spare(config, image, spare, caches, pages)
    }

    /// The durable and the current image, giving the machine up (buffers for
    /// [`Machine::with_image_reusing`]).
    pub fn into_images(self) -> (Vec<u8>, Vec<u8>) {
        (self.durable.into_image(), self.current)
    }

    /// A machine built around another cache hierarchy (e.g. `pmlab-cache`'s) and other
    /// page tables (e.g. the OS model's). `caches` must have as many levels as
    /// `config.caches`, whose latencies the machine charges.
    pub fn with_parts(
        config: MachineConfig,
        image: Vec<u8>,
        caches: Box<dyn CacheLevels>,
        pages: Box<dyn PageTables>,
    ) -> Result<Self, ConfigError> {
        Self::with_parts_spare(config, image, Vec::new(), caches, pages)
    }

    fn with_parts_spare(
        config: MachineConfig,
        image: Vec<u8>,
        spare: Vec<u8>,
        caches: Box<dyn CacheLevels>,
        pages: Box<dyn PageTables>,
    ) -> Result<Self, ConfigError> {
        check_parts(&config, &image, caches.as_ref())?;
        // An access served by level i pays every level it looked in on the way down.
        let mut level_latency = Vec::new();
        let mut sum = 0;
        for c in &config.caches {
            sum += c.latency_cycles;
            level_latency.push(sum);
        }
        let ctl = MemoryController::new(
            config.device.banks,
            config.cpu.ns_to_cycles(config.device.read_ns),
            config.cpu.ns_to_cycles(config.device.write_ns),
        );
        let chaos = config.chaos.as_ref().map(|c| Chaos {
            rng: Xoshiro256PlusPlus::seed_from_u64(c.seed),
            probability: c.probability,
        });
        Ok(Self {
            level_latency,
            levels_cycles: sum,
            ctl,
            page_shift: config.translation.page_size.shift(),
            asid: 0,
            tlb: config.translation.tlb.clone().map(Tlb::new),
            pages,
            caches,
            device: Device::new(config.device.clone(), config.memory_size),
            current: {
                let mut current = spare;
                current.clear();
                current.extend_from_slice(&image);
                current
            },
            durable: DurableState::new(image),
            dirty: LineSet::new(config.memory_size.div_ceil(LINE)),
            outstanding_until: 0,
            inflight: std::collections::BinaryHeap::new(),
            outstanding_nt: 0,
            chaos,
            recording: None,
            recording_base: None,
            recorded_bytes: 0,
            recording_limit: persistence::DEFAULT_RECORDING_LIMIT,
            recording_overflow: None,
            stats: MachineStats {
                served: vec![0; config.caches.len() + 1],
                ..MachineStats::default()
            },
            wbuf: Vec::new(),
            miss_handler: None,
            handler_running: false,
            departed: Vec::new(),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MachineConfig {
        &self.config
    }

    /// Counters so far.
    pub fn stats(&self) -> MachineStats {
        let mut s = self.stats.clone();
        s.tlb = self.tlb.as_ref().map(Tlb::stats).unwrap_or_default();
        s.device_reads = self.device.reads();
        s.device_writes = self.device.writes();
        s
    }

    /// The memory controller (its bank queues and counters).
    pub fn memory_controller(&self) -> &MemoryController {
        &self.ctl
    }

    /// Endurance of the memory device.
    pub fn endurance(&self) -> Endurance {
        self.device.endurance()
    }

    /// The memory device (per-line write counts).
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Cycles so far.
    pub fn cycles(&self) -> u64 {
        self.stats.cycles
    }

    /// Simulated time so far, in seconds.
    pub fn seconds(&self) -> f64 {
        self.stats.cycles as f64 / (self.config.cpu.clock_mhz as f64 * 1e6)
    }

    /// Accounts `n` instructions of non-memory work (one cycle each).
    pub fn advance_instructions(&mut self, n: u64) {
        self.stats.instructions += n;
        self.stats.cycles += n;
    }

    /// Switches to address space `asid`; an untagged TLB is flushed.
    pub fn switch_space(&mut self, asid: Asid) {
        if asid != self.asid {
            self.asid = asid;
            if let Some(t) = &mut self.tlb {
                t.switch_space();
            }
        }
    }

    /// The current address space.
    pub fn space(&self) -> Asid {
        self.asid
    }

    /// The coherent image of physical memory: what loads see.
    pub fn current_image(&self) -> &[u8] {
        &self.current
    }

    /// The durable state: the durable image and the write-backs still in flight.
    pub fn durable(&self) -> &DurableState {
        &self.durable
    }

    /// Write-backs issued by `clwb`/`clflushopt` and not yet fenced.
    pub fn pending_flushes(&self) -> &[PendingFlush] {
        self.durable.pending()
    }

    /// Lines stored to since they last reached memory (dirty in the caches).
    pub fn dirty_lines(&self) -> usize {
        self.dirty.len()
    }

    /// Translates a virtual address of the current space, charging TLB and walk; a
    /// line served by a second frame ([`crate::LineMap`]) goes to that frame.
    fn translate(&mut self, vaddr: u64) -> Result<u64, SpineError> {
        let vpn = vaddr >> self.page_shift;
        let offset = vaddr & ((1 << self.page_shift) - 1);
        let t = self
            .translation_of(vpn)
            .ok_or_else(|| self.unmapped(vaddr))?;
        let pfn = t.frame_of_line(offset / LINE);
        let paddr = (pfn << self.page_shift) | offset;
        // Page tables from elsewhere (the OS model) may know more frames than exist.
        if paddr >= self.config.memory_size {
            return Err(self.unmapped(vaddr));
        }
        Ok(paddr)
    }

    /// The spine has no page-fault error; an address that cannot be mapped (frames
    /// exhausted, or a frame beyond physical memory) is reported as out of bounds.
    fn unmapped(&self, vaddr: u64) -> SpineError {
        SpineError::OutOfBounds {
            addr: vaddr,
            len: 1,
            size: self.config.memory_size,
        }
    }

    /// One line-sized access through the caches, with its cycles.
    fn cache_access(&mut self, kind: Kind, paddr: u64, len: usize) {
        self.stats.instructions += 1;
        self.stats.cycles += 1;
        let served = self.caches.access(kind, paddr, len as u32);
        self.stats.served[served] += 1;
        if served == self.level_latency.len() {
            if self.level_latency.is_empty() && kind == Kind::Write {
                // No caches: the store itself is the memory write, and it waits for it.
                self.stats.cycles = self.ctl.write(self.stats.cycles, paddr);
            } else {
                // The miss reaches the controller after every level looked, and waits
                // for the requests queued before it in its bank.
                self.device.note_read();
                let arrival = self.stats.cycles + self.levels_cycles;
                self.stats.cycles = self.ctl.read(arrival, paddr);
            }
        } else {
            self.stats.cycles += self.level_latency[served];
        }
        self.absorb_memory_writes();
    }

    /// Applies the writes the hierarchy sent to memory since the last call.
    fn absorb_memory_writes(&mut self) {
        let mut w = std::mem::take(&mut self.wbuf);
        self.caches.drain_memory_writes(&mut w);
        for &(addr, len) in &w {
            self.stats.eviction_writes += 1;
            // A write-back leaves through the write buffer: the core does not wait, but
            // the write occupies its bank.
            self.queue_line_writes(addr, u64::from(len));
            self.write_durable(addr, u64::from(len));
        }
        w.clear();
        self.wbuf = w;
    }

    /// Queues the writes of `[addr, addr + len)`, one per line, at the controller now;
    /// returns the cycle the last completes.
    fn queue_line_writes(&mut self, addr: u64, len: u64) -> u64 {
        let mut done = self.stats.cycles;
        for line in addr / LINE..=(addr + len.max(1) - 1) / LINE {
            done = done.max(self.ctl.write(self.stats.cycles, line * LINE));
        }
        done
    }

    /// Splits `[addr, addr + len)` into pieces that stay inside one 64-byte line.
    fn line_pieces(addr: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize)> {
        let mut off = 0u64;
        std::iter::from_fn(move || {
            if off >= len {
                return None;
            }
            let a = addr + off;
            let n = (LINE - a % LINE).min(len - off);
            let item = (a, off as usize, n as usize);
            off += n;
            Some(item)
        })
    }
}

impl Memory for Machine {
    fn size(&self) -> u64 {
        self.config.memory_size
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        self.read_in(addr, buf, true)
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        self.write_in(addr, data, true)
    }

    fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError> {
        self.flush_in(addr, len, kind, true)
    }

    fn fence(&mut self) {
        self.chaos_tick();
        self.fence_inner();
    }

    fn persist_counters(&self) -> PersistCounters {
        PersistCounters {
            flushes: self.stats.flushes_by_kind.iter().sum(),
            fences: self.stats.fences,
        }
    }
}

impl Machine {
    /// The physical address of `addr`: translated if `virt`, as is otherwise.
    fn resolve(&mut self, addr: u64, virt: bool) -> Result<u64, SpineError> {
        if virt { self.translate(addr) } else { Ok(addr) }
    }

    fn read_in(&mut self, addr: Addr, buf: &mut [u8], virt: bool) -> Result<(), SpineError> {
        check_bounds(addr, buf.len() as u64, self.size())?;
        self.chaos_tick();
        for (va, off, n) in Self::line_pieces(addr, buf.len() as u64) {
            let pa = self.resolve(va, virt)?;
            self.stats.loads += 1;
            self.cache_access(Kind::Read, pa, n);
            let p = pa as usize;
            buf[off..off + n].copy_from_slice(&self.current[p..p + n]);
            self.point(PointKind::Load);
        }
        Ok(())
    }

    fn write_in(&mut self, addr: Addr, data: &[u8], virt: bool) -> Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.size())?;
        self.chaos_tick();
        for (va, off, n) in Self::line_pieces(addr, data.len() as u64) {
            let pa = self.resolve(va, virt)?;
            self.store_line(pa, &data[off..off + n]);
        }
        Ok(())
    }

    /// One store inside one line at physical address `pa`.
    fn store_line(&mut self, pa: u64, data: &[u8]) {
        let n = data.len();
        self.stats.stores += 1;
        let p = pa as usize;
        // The bytes are in the (coherent) current image before the hierarchy can
        // write them through or back.
        self.current[p..p + n].copy_from_slice(data);
        self.dirty.insert(pa / LINE);
        self.cache_access(Kind::Write, pa, n);
        self.point(PointKind::Store);
    }

    fn flush_in(
        &mut self,
        addr: Addr,
        len: u64,
        kind: FlushKind,
        virt: bool,
    ) -> Result<(), SpineError> {
        check_bounds(addr, len, self.size())?;
        self.chaos_tick();
        if len == 0 {
            return Ok(());
        }
        for line in addr / LINE..=(addr + len - 1) / LINE {
            let pa = self.resolve(line * LINE, virt)?;
            self.flush_physical_line(pa, kind);
        }
        Ok(())
    }
}

/// Checks that the memory image and the cache hierarchy are the ones `config` describes.
fn check_parts(
    config: &MachineConfig,
    image: &[u8],
    caches: &dyn CacheLevels,
) -> Result<(), ConfigError> {
    config.validate()?;
    if image.len() as u64 != config.memory_size {
        return Err(ConfigError::field(
            "memory_size",
            format!(
                "{} does not match the {}-byte image",
                config.memory_size,
                image.len()
            ),
        ));
    }
    if caches.levels() != config.caches.len() {
        return Err(ConfigError::field(
            "caches",
            format!(
                "{} levels configured but the hierarchy has {}",
                config.caches.len(),
                caches.levels()
            ),
        ));
    }
    Ok(())
}

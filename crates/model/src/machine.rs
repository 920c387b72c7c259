//! The machine: CPU timing, TLB, page tables, caches, memory device and persistence
//! domain behind the spine's [`Memory`] interface.

use pmlab_spine::{Addr, FlushKind, LINE, Memory, PersistCounters, SpineError, check_bounds};
use pmlab_trace::Kind;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::adapters::dinero_hierarchy;
use crate::cache_levels::{CacheLevels, Uncached};
use crate::config::MachineConfig;
use crate::device::{Device, Endurance};
use crate::error::ConfigError;
use crate::os_pages::OsPages;
use crate::paging::{DemandPages, IdentityPages, PageTables};
use crate::persist::{DurableState, Event, LineSet, PendingFlush, PointKind};
use crate::recording::Recording;
use crate::tlb::{Tlb, TlbStats};

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
    read_cycles: u64,
    write_cycles: u64,
    page_shift: u32,
    asid: u16,
    tlb: Option<Tlb>,
    pages: Box<dyn PageTables>,
    caches: Box<dyn CacheLevels>,
    device: Device,
    current: Vec<u8>,
    durable: DurableState,
    dirty: LineSet,
    outstanding: u64,
    chaos: Option<Chaos>,
    recording: Option<Vec<Event>>,
    recording_base: Option<DurableState>,
    stats: MachineStats,
    wbuf: Vec<(u64, u32)>,
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
        Self::with_parts(config, image, caches, pages)
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
        // An access served by level i pays every level it looked in on the way down.
        let mut level_latency = Vec::new();
        let mut sum = 0;
        for c in &config.caches {
            sum += c.latency_cycles;
            level_latency.push(sum);
        }
        let read_cycles = sum + config.cpu.ns_to_cycles(config.device.read_ns);
        let write_cycles = config.cpu.ns_to_cycles(config.device.write_ns);
        let chaos = config.chaos.as_ref().map(|c| Chaos {
            rng: Xoshiro256PlusPlus::seed_from_u64(c.seed),
            probability: c.probability,
        });
        Ok(Self {
            level_latency,
            read_cycles,
            write_cycles,
            page_shift: config.translation.page_size.shift(),
            asid: 0,
            tlb: config.translation.tlb.clone().map(Tlb::new),
            pages,
            caches,
            device: Device::new(config.device.clone(), config.memory_size),
            current: image.clone(),
            durable: DurableState::new(image),
            dirty: LineSet::new(config.memory_size.div_ceil(LINE)),
            outstanding: 0,
            chaos,
            recording: None,
            recording_base: None,
            stats: MachineStats {
                served: vec![0; config.caches.len() + 1],
                ..MachineStats::default()
            },
            wbuf: Vec::new(),
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
    pub fn switch_space(&mut self, asid: u16) {
        if asid != self.asid {
            self.asid = asid;
            if let Some(t) = &mut self.tlb {
                t.switch_space();
            }
        }
    }

    /// The current address space.
    pub fn space(&self) -> u16 {
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

    /// Crashes the machine: exactly the durable image. Deterministic: the pending
    /// (issued, unfenced) `clwb`/`clflushopt` write-backs are NOT applied — the most
    /// pessimistic outcome. [`Machine::crash_with`] explores the others.
    pub fn crash(&self) -> Vec<u8> {
        self.durable.image().to_vec()
    }

    /// Crashes the machine with each pending write-back reaching memory with
    /// probability 1/2, drawn from `rng`.
    pub fn crash_with(&self, rng: &mut impl Rng) -> Vec<u8> {
        let n = self.durable.pending().len();
        let chosen: Vec<usize> = (0..n).filter(|_| rng.r#gen::<bool>()).collect();
        self.durable.image_with(chosen.into_iter())
    }

    /// Writes back every dirty line and fences: afterwards the durable image equals
    /// the current one. Counted like the `clwb`s and fence it stands for.
    pub fn persist_all(&mut self) {
        let mut lines: Vec<u64> = self.dirty.iter().collect();
        lines.sort_unstable();
        for line in lines {
            self.flush_physical_line(line * LINE, FlushKind::Clwb);
        }
        self.fence_inner();
    }

    /// Starts recording durable-state events for crash exploration.
    pub fn start_recording(&mut self) {
        self.recording_base = Some(self.durable.clone());
        self.recording = Some(vec![Event::Point(PointKind::Start)]);
    }

    /// Stops recording and returns the recording (empty if none was started).
    pub fn stop_recording(&mut self) -> Recording {
        let mut events = self.recording.take().unwrap_or_default();
        events.push(Event::Point(PointKind::End));
        let base = self
            .recording_base
            .take()
            .unwrap_or_else(|| self.durable.clone());
        Recording::new(base, events)
    }

    /// Runs `f` on this machine while recording, for [`Recording::explore`].
    pub fn record<R>(&mut self, f: impl FnOnce(&mut Machine) -> R) -> (R, Recording) {
        self.start_recording();
        let r = f(self);
        (r, self.stop_recording())
    }

    fn log(&mut self, event: Event) {
        if let Some(r) = &mut self.recording {
            r.push(event);
        }
    }

    fn point(&mut self, kind: PointKind) {
        self.log(Event::Point(kind));
    }

    /// Translates a virtual address of the current space, charging TLB and walk.
    fn translate(&mut self, vaddr: u64) -> Result<u64, SpineError> {
        let unmapped = self.unmapped(vaddr);
        let vpn = vaddr >> self.page_shift;
        let offset = vaddr & ((1 << self.page_shift) - 1);
        let pfn = match &mut self.tlb {
            Some(tlb) => match tlb.lookup(self.asid, vpn) {
                Some(pfn) => pfn,
                None => {
                    self.stats.cycles += tlb.config().walk_cycles;
                    let pfn = self.pages.translate(self.asid, vpn);
                    let pfn = pfn.ok_or_else(|| unmapped.clone())?;
                    if self.pages.stale_translations() {
                        tlb.flush();
                    }
                    tlb.insert(self.asid, vpn, pfn);
                    pfn
                }
            },
            None => self
                .pages
                .translate(self.asid, vpn)
                .ok_or_else(|| unmapped.clone())?,
        };
        let paddr = (pfn << self.page_shift) | offset;
        // Page tables from elsewhere (the OS model) may know more frames than exist.
        if paddr >= self.config.memory_size {
            return Err(unmapped);
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
                // No caches: the store itself is the memory write.
                self.stats.cycles += self.write_cycles;
            } else {
                self.device.note_read();
                self.stats.cycles += self.read_cycles;
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
            self.write_durable(addr, u64::from(len));
        }
        w.clear();
        self.wbuf = w;
    }

    /// `[addr, addr + len)` of the current image reaches memory.
    fn write_durable(&mut self, addr: u64, len: u64) {
        let (a, l) = (addr as usize, len as usize);
        self.device.note_write(addr, len);
        self.durable.write(addr, &self.current[a..a + l]);
        if self.recording.is_some() {
            let data = self.current[a..a + l].into();
            self.log(Event::Write { addr, data });
        }
        self.settle_lines(addr, len);
    }

    /// After a write to memory, a line stays dirty only if memory still differs.
    fn settle_lines(&mut self, addr: u64, len: u64) {
        for line in addr / LINE..=(addr + len - 1) / LINE {
            let a = (line * LINE) as usize;
            let r = a..a + LINE as usize;
            if self.dirty.contains(line) && self.current[r.clone()] == self.durable.image()[r] {
                self.dirty.remove(line);
            }
        }
    }

    /// Chaos mode: maybe write back one random dirty line.
    fn chaos_tick(&mut self) {
        let Some(chaos) = &mut self.chaos else { return };
        if self.dirty.len() == 0 || !chaos.rng.gen_bool(chaos.probability) {
            return;
        }
        let line = self.dirty.get(chaos.rng.gen_range(0..self.dirty.len()));
        let addr = line * LINE;
        // The hierarchy cleans the line (so a later eviction does not write it again);
        // whatever it reports, the line's bytes reach memory.
        self.caches.flush_block(addr, false);
        self.wbuf.clear();
        let mut w = std::mem::take(&mut self.wbuf);
        self.caches.drain_memory_writes(&mut w);
        let mut covered = false;
        for &(a, l) in &w {
            covered |= a <= addr && addr + LINE <= a + u64::from(l);
            self.write_durable(a, u64::from(l));
        }
        if !covered {
            self.write_durable(addr, LINE);
        }
        w.clear();
        self.wbuf = w;
        self.dirty.remove(line);
        self.stats.chaos_writebacks += 1;
        self.point(PointKind::Chaos);
    }

    /// Flushes the line holding physical address `paddr`.
    fn flush_physical_line(&mut self, paddr: u64, kind: FlushKind) {
        let line = paddr / LINE;
        self.stats.instructions += 1;
        self.stats.cycles += self.config.persist.flush_issue_cycles;
        self.stats.flushes_by_kind[match kind {
            FlushKind::Clflush => 0,
            FlushKind::Clflushopt => 1,
            FlushKind::Clwb => 2,
        }] += 1;
        self.caches
            .flush_block(line * LINE, kind != FlushKind::Clwb);
        let mut w = std::mem::take(&mut self.wbuf);
        self.caches.drain_memory_writes(&mut w);
        // The line's own bytes must go if it is dirty, whatever block the hierarchy
        // reports (its blocks may be larger than a line).
        let dirty = self.dirty.contains(line);
        if dirty
            && !w
                .iter()
                .any(|&(a, l)| a <= line * LINE && line * LINE < a + u64::from(l))
        {
            w.push((line * LINE, LINE as u32));
        }
        if !w.is_empty() {
            self.stats.flush_writebacks += 1;
        }
        for &(addr, len) in &w {
            let len = u64::from(len);
            match kind {
                FlushKind::Clflush => {
                    // Ordered: the write-back completes before the next instruction.
                    self.stats.cycles += self.write_cycles;
                    self.write_durable(addr, len);
                }
                FlushKind::Clflushopt | FlushKind::Clwb => {
                    let (a, l) = (addr as usize, len as usize);
                    self.device.note_write(addr, len);
                    self.durable.add_pending(addr, &self.current[a..a + l]);
                    if self.recording.is_some() {
                        let data = self.current[a..a + l].into();
                        self.log(Event::Pending { addr, data });
                    }
                    self.outstanding += 1;
                    // The line left the caches clean: it is no longer dirty, though
                    // durable only at the fence.
                    for l in addr / LINE..=(addr + len - 1) / LINE {
                        self.dirty.remove(l);
                    }
                }
            }
        }
        w.clear();
        self.wbuf = w;
        self.point(PointKind::Flush);
    }

    /// A non-temporal store (`movnti`/`movntdq`): the bytes bypass the caches through a
    /// write-combining buffer and, like a `clwb`, are durable only at the next fence
    /// (until then they are pending). A cached copy of the line is written back if dirty
    /// and invalidated first, as x86 does. Not part of the spine: an extension for
    /// protocols that log with streaming stores (OSP counts such write-combining buffer
    /// flushes among its CPU flushes, §3.1).
    pub fn write_nt(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.size())?;
        self.chaos_tick();
        for (va, off, n) in Self::line_pieces(addr, data.len() as u64) {
            let pa = self.translate(va)?;
            let line = pa / LINE;
            self.stats.instructions += 1;
            self.stats.cycles += 1;
            self.stats.nt_stores += 1;
            self.caches.flush_block(line * LINE, true);
            let mut w = std::mem::take(&mut self.wbuf);
            self.caches.drain_memory_writes(&mut w);
            let covered = w
                .iter()
                .any(|&(a, l)| a <= line * LINE && line * LINE < a + u64::from(l));
            if self.dirty.contains(line) && !covered {
                w.push((line * LINE, LINE as u32));
            }
            for &(a, l) in &w {
                self.stats.eviction_writes += 1;
                self.write_durable(a, u64::from(l));
            }
            w.clear();
            self.wbuf = w;
            let p = pa as usize;
            self.current[p..p + n].copy_from_slice(&data[off..off + n]);
            self.device.note_write(pa, n as u64);
            self.durable.add_pending(pa, &data[off..off + n]);
            if self.recording.is_some() {
                let data = data[off..off + n].into();
                self.log(Event::Pending { addr: pa, data });
            }
            self.outstanding += 1;
            self.point(PointKind::Store);
        }
        Ok(())
    }

    fn fence_inner(&mut self) {
        self.stats.instructions += 1;
        self.stats.fences += 1;
        let banks = self.config.device.banks;
        // The fence waits for the outstanding write-backs, `banks` at a time.
        self.stats.cycles +=
            self.config.persist.fence_cycles + self.outstanding.div_ceil(banks) * self.write_cycles;
        self.outstanding = 0;
        self.durable.fence();
        self.log(Event::Fence);
        self.point(PointKind::Fence);
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
        check_bounds(addr, buf.len() as u64, self.size())?;
        self.chaos_tick();
        for (va, off, n) in Self::line_pieces(addr, buf.len() as u64) {
            let pa = self.translate(va)?;
            self.stats.loads += 1;
            self.cache_access(Kind::Read, pa, n);
            let p = pa as usize;
            buf[off..off + n].copy_from_slice(&self.current[p..p + n]);
            self.point(PointKind::Load);
        }
        Ok(())
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.size())?;
        self.chaos_tick();
        for (va, off, n) in Self::line_pieces(addr, data.len() as u64) {
            let pa = self.translate(va)?;
            self.stats.stores += 1;
            let p = pa as usize;
            // The bytes are in the (coherent) current image before the hierarchy can
            // write them through or back.
            self.current[p..p + n].copy_from_slice(&data[off..off + n]);
            self.dirty.insert(pa / LINE);
            self.cache_access(Kind::Write, pa, n);
            self.point(PointKind::Store);
        }
        Ok(())
    }

    fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError> {
        check_bounds(addr, len, self.size())?;
        self.chaos_tick();
        if len == 0 {
            return Ok(());
        }
        for line in addr / LINE..=(addr + len - 1) / LINE {
            let pa = self.translate(line * LINE)?;
            self.flush_physical_line(pa, kind);
        }
        Ok(())
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

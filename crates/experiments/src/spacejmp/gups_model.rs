//! GUPS on the machine model. Every window sits at the same virtual address: a process
//! whose address space is too small for the whole table (its `va_bits`) reaches the
//! windows by remapping (MAP), by messages to one process per window (MP: each its own
//! core, TLB and caches, the master blocked while the worker applies), or by switching
//! VASes (VAS). Updates are loads and stores through the model's TLB and caches;
//! remaps and switches are charged as the OS model counts them.

use pmlab_model::{MachineConfig, MachineStats};
use pmlab_spine::Memory;
use pmlab_vas::model::{ModelSpaces, ModelVasConfig};
use pmlab_vas::{Access, AttachTo, Mode, SegId, SpaceJmp, VasError, VasHandle};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::gups::GupsShape;

/// Where the pending-updates heap and the windows live in every address space.
const HEAP: u64 = 0x10_0000;
const WINDOW: u64 = 0x40_0000;

/// What a model run measured.
pub struct ModelRun {
    /// Simulated seconds.
    pub seconds: f64,
    /// Window changes.
    pub changes: u64,
    /// TLB misses over all cores.
    pub tlb_misses: u64,
    /// XOR of every word of each window afterwards.
    pub checksums: Vec<u64>,
}

/// The model's machine for SpaceJMP: LOC's caches and TLB at M2's 2.5 GHz, an untagged
/// TLB (Figures 8 and 9 ran with tagging disabled), `memory` bytes.
pub fn machine(memory: u64) -> MachineConfig {
    let mut m = MachineConfig::loc(memory.next_multiple_of(1 << 20));
    m.cpu.clock_mhz = 2500;
    m.translation.tlb.as_mut().expect("LOC has a TLB").tagged = false;
    m
}

/// Virtual address bits of the model's processes: room for the heap and one window
/// (a power of two above WINDOW + window), never for two.
pub fn va_bits(window_bytes: u64) -> u32 {
    (WINDOW + window_bytes).next_power_of_two().trailing_zeros()
}

fn spaces(memory: u64, window_bytes: u64) -> Result<ModelSpaces, VasError> {
    ModelSpaces::new(ModelVasConfig {
        machine: machine(memory),
        va_bits: va_bits(window_bytes),
    })
}

fn draw(rng: &mut Xoshiro256PlusPlus, shape: &GupsShape) -> (u32, Vec<(u64, u64)>) {
    let w = (rng.next_u64() % u64::from(shape.windows)) as u32;
    (
        w,
        (0..shape.update_set)
            .map(|_| (rng.next_u64() % shape.words(), rng.next_u64()))
            .collect(),
    )
}

fn spine(e: pmlab_spine::SpineError) -> VasError {
    VasError::Refused(format!("model access: {e}"))
}

/// Writes the pending updates to the heap, then applies them to the window.
fn visit(m: &mut ModelSpaces, ups: &[(u64, u64)], write_heap: bool) -> Result<(), VasError> {
    let mach = m.machine();
    if write_heap {
        for (i, &(idx, val)) in ups.iter().enumerate() {
            mach.write_u64(HEAP + 16 * i as u64, idx).map_err(spine)?;
            mach.write_u64(HEAP + 16 * i as u64 + 8, val)
                .map_err(spine)?;
        }
    }
    for (i, _) in ups.iter().enumerate() {
        let idx = mach.read_u64(HEAP + 16 * i as u64).map_err(spine)?;
        let val = mach.read_u64(HEAP + 16 * i as u64 + 8).map_err(spine)?;
        let a = WINDOW + 8 * idx;
        let old = mach.read_u64(a).map_err(spine)?;
        mach.write_u64(a, old ^ val).map_err(spine)?;
    }
    Ok(())
}

fn window_checksum(m: &mut ModelSpaces, words: u64) -> Result<u64, VasError> {
    let mut x = 0;
    for i in 0..words {
        x ^= m.machine().read_u64(WINDOW + 8 * i).map_err(spine)?;
    }
    Ok(x)
}

fn seconds(s: &MachineStats, clock_mhz: u64) -> f64 {
    s.cycles as f64 / (clock_mhz as f64 * 1e6)
}

/// One address space holding the heap; windows as segments at the same address.
fn one_process(
    shape: &GupsShape,
    windows: u32,
) -> Result<(ModelSpaces, VasHandle, Vec<SegId>, SegId), VasError> {
    // Frames for the heap and the windows; and the machine's virtual addresses stay
    // below its memory size, so it must reach past the window's address too.
    let frames = 4096 + shape.window_bytes * u64::from(windows);
    let mem = frames.max(WINDOW + shape.window_bytes) + (1 << 20);
    let mut m = spaces(mem, shape.window_bytes)?;
    let heap = m.seg_alloc("heap", Some(HEAP), 4096, Mode(0o600))?;
    let segs = (0..windows)
        .map(|w| {
            m.seg_alloc(
                &format!("window{w}"),
                Some(WINDOW),
                shape.window_bytes,
                Mode(0o600),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let v = m.vas_create("process", Mode(0o600))?;
    m.seg_attach(AttachTo::Vas(v), heap, Access::ReadWrite)?;
    let h = m.vas_attach(v)?;
    Ok((m, h, segs, heap))
}

/// MAP: one address space; a window change detaches the old window (tables torn
/// down, TLB shot down) and attaches the new one (tables built).
pub fn run_map(shape: &GupsShape, seed: u64) -> Result<ModelRun, VasError> {
    let (mut m, h, segs, _) = one_process(shape, shape.windows)?;
    m.seg_attach(AttachTo::Handle(h), segs[0], Access::ReadWrite)?;
    m.vas_switch(h)?;
    let start = m.machine_ref().stats();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (mut cur, mut changes) = (0u32, 0);
    for _ in 0..shape.visits() {
        let (w, ups) = draw(&mut rng, shape);
        if w != cur {
            m.seg_detach(AttachTo::Handle(h), segs[cur as usize])?;
            m.seg_attach(AttachTo::Handle(h), segs[w as usize], Access::ReadWrite)?;
            cur = w;
            changes += 1;
        }
        visit(&mut m, &ups, true)?;
    }
    let end = m.machine_ref().stats();
    let clock = m.machine_ref().config().cpu.clock_mhz;
    let mut checksums = Vec::new();
    for w in 0..shape.windows {
        m.seg_detach(AttachTo::Handle(h), segs[cur as usize])?;
        m.seg_attach(AttachTo::Handle(h), segs[w as usize], Access::ReadWrite)?;
        cur = w;
        checksums.push(window_checksum(&mut m, shape.words())?);
    }
    Ok(ModelRun {
        seconds: seconds(&end, clock) - seconds(&start, clock),
        changes,
        tlb_misses: end.tlb.misses - start.tlb.misses,
        checksums,
    })
}

/// VAS: one VAS per window (heap + window), a `vas_switch` per change.
pub fn run_vas(shape: &GupsShape, seed: u64) -> Result<ModelRun, VasError> {
    let (mut m, _, segs, heap) = one_process(shape, shape.windows)?;
    let mut hs = Vec::new();
    for (w, &s) in segs.iter().enumerate() {
        let v = m.vas_create(&format!("gups{w}"), Mode(0o600))?;
        m.seg_attach(AttachTo::Vas(v), heap, Access::ReadWrite)?;
        m.seg_attach(AttachTo::Vas(v), s, Access::ReadWrite)?;
        hs.push(m.vas_attach(v)?);
    }
    m.vas_switch(hs[0])?;
    let start = m.machine_ref().stats();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (mut cur, mut changes) = (0u32, 0);
    for _ in 0..shape.visits() {
        let (w, ups) = draw(&mut rng, shape);
        if w != cur {
            m.vas_switch(hs[w as usize])?;
            cur = w;
            changes += 1;
        }
        visit(&mut m, &ups, true)?;
    }
    let end = m.machine_ref().stats();
    let clock = m.machine_ref().config().cpu.clock_mhz;
    let mut checksums = Vec::new();
    for h in &hs {
        m.vas_switch(*h)?;
        checksums.push(window_checksum(&mut m, shape.words())?);
    }
    Ok(ModelRun {
        seconds: seconds(&end, clock) - seconds(&start, clock),
        changes,
        tlb_misses: end.tlb.misses - start.tlb.misses,
        checksums,
    })
}

/// MP: a master and one process per window, each on its own core (machine). A visit
/// is a message: the master writes the updates to its send buffer, pays a message's
/// cycles, waits while the worker reads them into its heap and applies them, and pays
/// the acknowledgement's.
pub fn run_mp(shape: &GupsShape, seed: u64) -> Result<ModelRun, VasError> {
    if shape.windows == 1 {
        return run_map(shape, seed);
    }
    let (mut master, mh, _, _) = one_process(shape, 0)?;
    master.vas_switch(mh)?;
    let mut workers = Vec::new();
    for _ in 0..shape.windows {
        let (mut m, h, segs, _) = one_process(shape, 1)?;
        m.seg_attach(AttachTo::Handle(h), segs[0], Access::ReadWrite)?;
        m.vas_switch(h)?;
        workers.push(m);
    }
    let start: Vec<MachineStats> = std::iter::once(&master)
        .chain(&workers)
        .map(|m| m.machine_ref().stats())
        .collect();
    let msg = master.machine_ref().os_costs().message_cycles;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for _ in 0..shape.visits() {
        let (w, ups) = draw(&mut rng, shape);
        for (i, &(idx, val)) in ups.iter().enumerate() {
            master
                .machine()
                .write_u64(HEAP + 16 * i as u64, idx)
                .map_err(spine)?;
            master
                .machine()
                .write_u64(HEAP + 16 * i as u64 + 8, val)
                .map_err(spine)?;
        }
        let worker = &mut workers[w as usize];
        let before = worker.machine_ref().cycles();
        // The worker receives the message into its own buffer (its stores), then applies.
        visit(worker, &ups, true)?;
        let busy = worker.machine_ref().cycles() - before;
        master.machine().charge_cycles(2 * msg + busy);
    }
    let end: Vec<MachineStats> = std::iter::once(&master)
        .chain(&workers)
        .map(|m| m.machine_ref().stats())
        .collect();
    let clock = master.machine_ref().config().cpu.clock_mhz;
    let tlb_misses = end
        .iter()
        .zip(&start)
        .map(|(e, s)| e.tlb.misses - s.tlb.misses)
        .sum();
    let mut checksums = Vec::new();
    for wk in &mut workers {
        checksums.push(window_checksum(wk, shape.words())?);
    }
    Ok(ModelRun {
        seconds: seconds(&end[0], clock) - seconds(&start[0], clock),
        changes: shape.visits(),
        tlb_misses,
        checksums,
    })
}

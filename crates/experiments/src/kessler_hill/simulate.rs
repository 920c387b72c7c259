//! One pass of the experiment: a scheduled workload through the OS model (first-touch
//! placement with one policy) and the cache hierarchy (split level one, several level
//! twos at once).

use super::paper::L2_CONFIGS;
use super::schedule::Schedule;
use super::{Config, ExperimentError, Workload};
use pmlab_cache::{CacheConfig, HierarchyConfig, Level, MultiL2, Replacement};
use pmlab_os::{Asid, CacheGeometry, Os, OsConfig, PageSize, PolicyKind};
use pmlab_trace::{Kind, Ref};
use std::collections::HashMap;

/// Which level twos a pass simulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum L2Set {
    /// The nine of Tables 1 and 4.
    All,
    /// The three direct-mapped ones (1, 4, 16 MiB).
    DirectMapped,
    /// Only the 4 MiB direct-mapped one (Table 3).
    Table3,
}

impl L2Set {
    /// The (size MiB, associativity) pairs simulated.
    pub fn configs(self) -> Vec<(u64, u32)> {
        match self {
            L2Set::All => L2_CONFIGS.to_vec(),
            L2Set::DirectMapped => vec![(1, 1), (4, 1), (16, 1)],
            L2Set::Table3 => vec![(4, 1)],
        }
    }
}

/// One pass: a policy, a pool size, a seed, and which level-two caches to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PassSpec {
    /// The placement policy.
    pub policy: PolicyKind,
    /// The pool of available frames, in bytes.
    pub pool: u64,
    /// Seeds the initial LRU order, the policy's generator and random replacement.
    pub seed: u64,
    /// The level twos simulated.
    pub l2: L2Set,
}

/// One process: its page conflicts when it exited (or at the end of the trace), and the
/// misses of the 1 MiB direct-mapped level two while it ran (Figures 12 and 13).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct SpaceSample {
    /// The process.
    pub asid: Asid,
    /// Index of its program in the workload.
    pub program: u32,
    /// Resident pages.
    pub pages: u64,
    /// Page conflicts C in a 1 MiB direct-mapped cache.
    pub conflicts: u64,
    /// C_min for that many pages.
    pub min_conflicts: u64,
    /// Page conflicts in the 4 MiB direct-mapped cache (Table 3's), and its C_min.
    pub conflicts_4m: (u64, u64),
    /// Instructions it executed.
    pub instructions: u64,
    /// Misses of the 1 MiB direct-mapped level two while it ran (0 if not simulated).
    pub misses_1m: u64,
}

/// What one pass measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PassResult {
    /// The pass.
    pub spec: PassSpec,
    /// Instructions simulated.
    pub instructions: u64,
    /// Level-two (size MiB, associativity, demand misses), one per simulated level two.
    pub l2_misses: Vec<(u64, u32, u64)>,
    /// Level-one instruction and data demand misses.
    pub l1_misses: (u64, u64),
    /// Per-process samples (Figures 12 and 13).
    pub spaces: Vec<SpaceSample>,
    /// Pages mapped on first touch, and re-mapped after losing their frame.
    pub faults: (u64, u64),
    /// Distinct physical 128-byte blocks touched: every level two of this pass takes at
    /// least this many cold-start (compulsory) misses, whatever its size.
    pub cold_blocks: u64,
    /// Cumulative (instructions, misses of each simulated level two) at the end of each
    /// window of [`Config::window`] instructions (Figure 10).
    pub windows: Vec<(u64, Vec<u64>)>,
    /// Resident pages of the live processes, mean and maximum over context switches.
    pub active_pages: (f64, u64),
}

impl PassResult {
    /// Misses per 1000 instructions of the level two of `size_mib` and `assoc`, if simulated.
    pub fn mpi_x1000(&self, size_mib: u64, assoc: u32) -> Option<f64> {
        self.l2_misses
            .iter()
            .find(|&&(s, a, _)| s == size_mib && a == assoc)
            .map(|&(_, _, m)| 1000.0 * m as f64 / self.instructions.max(1) as f64)
    }

    /// Misses per 1000 instructions of `size_mib`/`assoc` less the cold-start ones.
    pub fn warm_mpi_x1000(&self, size_mib: u64, assoc: u32) -> Option<f64> {
        let cold = 1000.0 * self.cold_blocks as f64 / self.instructions.max(1) as f64;
        self.mpi_x1000(size_mib, assoc).map(|m| m - cold)
    }
}

fn level_one() -> HierarchyConfig {
    // The paper's primary caches: split, 32 KiB each, direct-mapped, 32-byte blocks,
    // write-back and write-allocate (section 4.1.2 and its footnote 3).
    let l1 = CacheConfig::new(32 << 10, 32);
    HierarchyConfig {
        levels: vec![Level::Split {
            instr: l1,
            data: l1,
        }],
    }
}

fn level_two(size_mib: u64, assoc: u32) -> HierarchyConfig {
    // Unified, write-back, random replacement, 128-byte blocks; no inclusion is
    // maintained, which is what simulating it below the level ones without
    // back-invalidation gives.
    let mut c = CacheConfig::new(size_mib << 20, 128);
    c.assoc = u64::from(assoc);
    c.repl = Replacement::Random;
    HierarchyConfig {
        levels: vec![Level::Unified(c)],
    }
}

/// The cache a policy is tuned for. The paper optimized Page Coloring, Bin Hopping and
/// the Sequential Heuristic for the 4 MiB direct-mapped cache (Table 4's bold entries);
/// the Hierarchical Heuristic's mappings are size independent, so it is given the
/// largest cache's bins (16 MiB direct-mapped), which makes its mapping conflict-free for
/// every smaller bin count whenever it is for 16 MiB.
fn target_geometry(policy: PolicyKind, page: PageSize) -> Result<CacheGeometry, ExperimentError> {
    let size = if policy == PolicyKind::Hierarchical {
        16 << 20
    } else {
        4 << 20
    };
    CacheGeometry::new(size, 1, page).map_err(|e| ExperimentError::Config(e.to_string()))
}

/// A bitmap of the 128-byte blocks of physical memory (1 Mi bits for 128 MiB).
struct BlockSet(Vec<u64>);

impl BlockSet {
    fn new(memory: u64) -> Self {
        BlockSet(vec![0; (memory >> 7).div_ceil(64) as usize])
    }

    fn add(&mut self, refs: &[Ref]) {
        for r in refs {
            let last = r.addr + u64::from(r.size.max(1)) - 1;
            for b in (r.addr >> 7)..=(last >> 7) {
                self.0[(b >> 6) as usize] |= 1 << (b & 63);
            }
        }
    }

    fn count(&self) -> u64 {
        self.0.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

/// The OS model and caches of one pass, and what it has counted so far.
struct Machine {
    os: Os,
    caches: MultiL2,
    l2s: Vec<(u64, u32)>,
    page: PageSize,
    fig12: CacheGeometry,
    table3: CacheGeometry,
    touched: BlockSet,
    physical: Vec<Ref>,
    instructions: u64,
    /// Per live process: (program, instructions, 1 MiB direct-mapped misses).
    running: HashMap<Asid, (u32, u64, u64)>,
    spaces: Vec<SpaceSample>,
    windows: Vec<(u64, Vec<u64>)>,
    active: (f64, u64, u64),
}

impl Machine {
    fn new(config: &Config, spec: PassSpec) -> Result<Self, ExperimentError> {
        let cfg_err = |e: &dyn std::fmt::Display| ExperimentError::Config(e.to_string());
        let page = PageSize::new(config.page_size).map_err(|e| cfg_err(&e))?;
        let os_config = OsConfig::from_bytes(config.memory, spec.pool, page, spec.seed)
            .map_err(|e| cfg_err(&e))?;
        let policy = spec
            .policy
            .build(target_geometry(spec.policy, page)?, spec.seed);
        let os = Os::new(os_config, policy).map_err(|e| cfg_err(&e))?;
        let l2s = spec.l2.configs();
        let lowers: Vec<HierarchyConfig> = l2s.iter().map(|&(s, a)| level_two(s, a)).collect();
        let caches = MultiL2::new(&level_one(), &lowers, spec.seed).map_err(|e| cfg_err(&e))?;
        let geometry = |size| CacheGeometry::new(size, 1, page).map_err(|e| cfg_err(&e));
        Ok(Machine {
            os,
            caches,
            l2s,
            page,
            fig12: geometry(1 << 20)?,
            table3: geometry(4 << 20)?,
            touched: BlockSet::new(config.memory),
            physical: Vec::with_capacity(4096 + 64),
            instructions: 0,
            running: HashMap::new(),
            spaces: Vec::new(),
            windows: Vec::new(),
            active: (0.0, 0, 0),
        })
    }

    fn misses(&self, i: usize) -> u64 {
        let stats = self.caches.stats(i);
        stats.last().expect("a level two").stats.misses.total()
    }

    fn all_misses(&self) -> Vec<u64> {
        (0..self.l2s.len()).map(|i| self.misses(i)).collect()
    }

    /// Misses of the 1 MiB direct-mapped level two, if simulated.
    fn misses_1m(&self) -> u64 {
        self.l2s
            .iter()
            .position(|&c| c == (1, 1))
            .map_or(0, |i| self.misses(i))
    }

    /// Translates and simulates `refs` of process `asid`.
    fn run(&mut self, asid: Asid, refs: &[Ref]) {
        let page_mask = self.page.bytes() - 1;
        self.physical.clear();
        for r in refs {
            let offset = r.addr & page_mask;
            let first = u64::from(r.size).min(self.page.bytes() - offset) as u32;
            self.instructions += u64::from(r.kind == Kind::Instr);
            self.physical.push(Ref {
                addr: self.os.access(asid, r.addr),
                size: first,
                asid,
                kind: r.kind,
            });
            if first < r.size {
                // A reference that crosses into the next virtual page continues in that
                // page's frame, wherever the mapping put it.
                let next = r.addr + u64::from(first);
                self.physical.push(Ref {
                    addr: self.os.access(asid, next),
                    size: r.size - first,
                    asid,
                    kind: r.kind,
                });
            }
        }
        self.touched.add(&self.physical);
        self.caches.run(&self.physical);
    }

    fn sample_active(&mut self) {
        let pages: u64 = self
            .os
            .address_spaces()
            .iter()
            .map(|s| s.resident_pages() as u64)
            .sum();
        self.active.0 += pages as f64;
        self.active.1 = self.active.1.max(pages);
        self.active.2 += 1;
    }

    /// Records process `asid`'s conflicts and misses (at its exit or the trace's end).
    fn sample(&mut self, asid: Asid) {
        let Some((program, instructions, misses)) = self.running.remove(&asid) else {
            return;
        };
        let (Some(c1), Some(c4)) = (
            self.os.conflicts(asid, &self.fig12),
            self.os.conflicts(asid, &self.table3),
        ) else {
            return;
        };
        self.spaces.push(SpaceSample {
            asid,
            program,
            pages: c1.pages,
            conflicts: c1.conflicts,
            min_conflicts: c1.min_conflicts,
            conflicts_4m: (c4.conflicts, c4.min_conflicts),
            instructions,
            misses_1m: misses,
        });
    }
}

/// Runs one pass of `schedule` over `workload`.
pub fn run_pass(
    config: &Config,
    workload: &Workload,
    schedule: &Schedule,
    spec: PassSpec,
) -> Result<PassResult, ExperimentError> {
    let mut m = Machine::new(config, spec)?;
    let window = config.window.max(1);
    let mut next_window = window;
    for seg in &schedule.segments {
        let refs = &workload.programs[seg.program as usize].refs[seg.start..seg.end];
        let (before_i, before_m) = (m.instructions, m.misses_1m());
        for chunk in refs.chunks(4096) {
            m.run(seg.asid, chunk);
            if m.instructions >= next_window {
                // Window ends are taken at chunk ends, within 4096 references of the
                // boundary: far below a window's length.
                let misses = m.all_misses();
                m.windows.push((m.instructions, misses));
                next_window += window;
            }
        }
        let entry = m.running.entry(seg.asid).or_insert((seg.program, 0, 0));
        entry.1 += m.instructions - before_i;
        let ran = m.misses_1m() - before_m;
        m.running.get_mut(&seg.asid).expect("just inserted").2 += ran;
        m.sample_active();
        if seg.exits {
            m.sample(seg.asid);
            m.os.exit(seg.asid);
        }
    }
    let alive: Vec<Asid> = m.running.keys().copied().collect();
    for asid in alive {
        m.sample(asid);
    }
    let l2_misses = m
        .l2s
        .iter()
        .enumerate()
        .map(|(i, &(s, a))| (s, a, m.misses(i)))
        .collect();
    let front = m.caches.stats(0);
    let counters = m.os.counters();
    Ok(PassResult {
        spec,
        instructions: m.instructions,
        l2_misses,
        l1_misses: (front[0].stats.misses.total(), front[1].stats.misses.total()),
        faults: (counters.first_touch_faults, counters.refaults),
        cold_blocks: m.touched.count(),
        active_pages: (m.active.0 / m.active.2.max(1) as f64, m.active.1),
        spaces: m.spaces,
        windows: m.windows,
    })
}

/// Runs `jobs` (a schedule and a pass each) on `config.threads` threads, in any order;
/// results come back in `jobs` order.
pub(crate) fn run_passes(
    config: &Config,
    workload: &Workload,
    schedules: &[Schedule],
    jobs: &[(usize, PassSpec)],
    bar: &indicatif::ProgressBar,
) -> Result<Vec<PassResult>, ExperimentError> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<PassResult, ExperimentError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..config.threads.max(1).min(jobs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(s, spec)) = jobs.get(i) else { break };
                    let r = run_pass(config, workload, &schedules[s], spec);
                    bar.set_message(format!(
                        "{} pool {} KiB seed {}",
                        spec.policy.name(),
                        spec.pool >> 10,
                        spec.seed
                    ));
                    bar.inc(1);
                    results.lock().expect("no worker panicked")[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("no worker panicked")
        .into_iter()
        .map(|r| r.expect("every pass ran"))
        .collect()
}

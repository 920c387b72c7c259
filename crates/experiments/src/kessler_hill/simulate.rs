//! One pass of the experiment: the merged trace through the OS model (first-touch
//! placement with one policy) and the cache hierarchy (split level one, several level
//! twos at once).

use super::paper::L2_CONFIGS;
use super::{Config, ExperimentError, Workload};
use pmlab_cache::{CacheConfig, HierarchyConfig, Level, MultiL2, Replacement};
use pmlab_os::{CacheGeometry, Os, OsConfig, PageSize, PolicyKind};
use pmlab_trace::Ref;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One pass: a policy, a pool size, a seed, and which level-two caches to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PassSpec {
    /// The placement policy.
    pub policy: PolicyKind,
    /// The pool of available frames, in bytes.
    pub pool: u64,
    /// Seeds the initial LRU order, the policy's generator and random replacement.
    pub seed: u64,
    /// All nine level-two configurations, or only the 4 MiB direct-mapped one.
    pub all_l2: bool,
}

/// One address space's page conflicts, sampled when its process ended (or at the end of
/// the trace), for the paper's Figure 12.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct SpaceSample {
    /// The process.
    pub asid: u16,
    /// Resident pages.
    pub pages: u64,
    /// Page conflicts C in a 1 MiB direct-mapped cache.
    pub conflicts: u64,
    /// C_min for that many pages.
    pub min_conflicts: u64,
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
    /// Per-address-space conflicts (Figure 12).
    pub spaces: Vec<SpaceSample>,
    /// Pages mapped on first touch, and re-mapped after losing their frame.
    pub faults: (u64, u64),
    /// Distinct physical 128-byte blocks touched: every level two of this pass takes at
    /// least this many cold-start (compulsory) misses, whatever its size.
    pub cold_blocks: u64,
}

impl PassResult {
    /// Misses per 1000 instructions of the level two of `size_mib` and `assoc`, if simulated.
    pub fn mpi_x1000(&self, size_mib: u64, assoc: u32) -> Option<f64> {
        self.l2_misses
            .iter()
            .find(|&&(s, a, _)| s == size_mib && a == assoc)
            .map(|&(_, _, m)| 1000.0 * m as f64 / self.instructions.max(1) as f64)
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

/// Runs one pass over `workload`.
pub fn run_pass(
    config: &Config,
    workload: &Workload,
    spec: PassSpec,
) -> Result<PassResult, ExperimentError> {
    let cfg_err = |e: &dyn std::fmt::Display| ExperimentError::Config(e.to_string());
    let page = PageSize::new(config.page_size).map_err(|e| cfg_err(&e))?;
    let os_config =
        OsConfig::from_bytes(config.memory, spec.pool, page, spec.seed).map_err(|e| cfg_err(&e))?;
    let policy = spec
        .policy
        .build(target_geometry(spec.policy, page)?, spec.seed);
    let mut os = Os::new(os_config, policy).map_err(|e| cfg_err(&e))?;
    let l2s: Vec<(u64, u32)> = if spec.all_l2 {
        L2_CONFIGS.to_vec()
    } else {
        vec![(4, 1)]
    };
    let lowers: Vec<HierarchyConfig> = l2s.iter().map(|&(s, a)| level_two(s, a)).collect();
    let mut caches = MultiL2::new(&level_one(), &lowers, spec.seed).map_err(|e| cfg_err(&e))?;
    let fig12 = CacheGeometry::new(1 << 20, 1, page).map_err(|e| cfg_err(&e))?;

    let page_mask = page.bytes() - 1;
    let mut spaces = Vec::new();
    let sample = |os: &Os, asid: u16, spaces: &mut Vec<SpaceSample>| {
        if let Some(c) = os.conflicts(asid, &fig12) {
            spaces.push(SpaceSample {
                asid,
                pages: c.pages,
                conflicts: c.conflicts,
                min_conflicts: c.min_conflicts,
            });
        }
    };
    let mut ends = workload.ends.iter().peekable();
    let mut physical: Vec<Ref> = Vec::with_capacity(4096 + 64);
    let mut touched = BlockSet::new(config.memory);
    let mut at = 0usize;
    while at < workload.refs.len() {
        // Stop a chunk at the next process end so the process exits exactly there.
        let mut stop = (at + 4096).min(workload.refs.len());
        if let Some(e) = ends.peek() {
            stop = stop.min(e.at_ref as usize);
        }
        physical.clear();
        for r in &workload.refs[at..stop] {
            let offset = r.addr & page_mask;
            let first = u64::from(r.size).min(page.bytes() - offset) as u32;
            physical.push(Ref {
                addr: os.access(r.asid, r.addr),
                size: first,
                ..*r
            });
            if first < r.size {
                // A reference that crosses into the next virtual page continues in that
                // page's frame, wherever the mapping put it.
                let next = r.addr + u64::from(first);
                physical.push(Ref {
                    addr: os.access(r.asid, next),
                    size: r.size - first,
                    ..*r
                });
            }
        }
        touched.add(&physical);
        caches.run(&physical);
        at = stop;
        while let Some(e) = ends.next_if(|e| e.at_ref as usize <= at) {
            sample(&os, e.asid, &mut spaces);
            os.exit(e.asid);
        }
    }
    for asid in 1..=workload.programs.len() as u16 {
        sample(&os, asid, &mut spaces);
    }
    let l2_misses = l2s
        .iter()
        .enumerate()
        .map(|(i, &(s, a))| {
            let stats = caches.stats(i);
            (
                s,
                a,
                stats.last().expect("a level two").stats.misses.total(),
            )
        })
        .collect();
    let front = caches.stats(0);
    let counters = os.counters();
    Ok(PassResult {
        spec,
        instructions: workload.instructions,
        l2_misses,
        l1_misses: (front[0].stats.misses.total(), front[1].stats.misses.total()),
        spaces,
        faults: (counters.first_touch_faults, counters.refaults),
        cold_blocks: touched.count(),
    })
}

/// Runs `specs` on `config.threads` threads, in any order; results come back in `specs`
/// order.
pub(crate) fn run_passes(
    config: &Config,
    workload: &Workload,
    specs: &[PassSpec],
) -> Result<Vec<PassResult>, ExperimentError> {
    let bar = if config.progress {
        let b = indicatif::ProgressBar::new(specs.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} passes  {msg}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<PassResult, ExperimentError>>>> =
        Mutex::new((0..specs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..config.threads.max(1).min(specs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&spec) = specs.get(i) else { break };
                    let r = run_pass(config, workload, spec);
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
    bar.finish_and_clear();
    results
        .into_inner()
        .expect("no worker panicked")
        .into_iter()
        .map(|r| r.expect("every pass ran"))
        .collect()
}

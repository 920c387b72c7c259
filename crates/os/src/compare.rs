//! The placement policies side by side on one synthetic multiprogrammed workload,
//! measured as the paper measures mappings: page conflicts within each address space.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::{Asid, CacheGeometry, Os, OsConfig, OsError, PolicyKind, conflicts_of};

/// The workload and system of a comparison.
///
/// `processes` run at a time, switching every `quantum` references. Each process draws a
/// working set of `U` pages, `U` uniform in `[pages/2, 3 pages/2]`, references pages of it
/// uniformly at random, and exits after `lifetime` references; a new process takes its
/// place, until `exits` processes have finished. At exit a process's page conflicts are
/// recorded (as the paper's Figure 12 samples one point per process).
#[derive(Debug, Clone)]
pub struct CompareConfig {
    /// Memory, pool, page size, LRU-order seed.
    pub os: OsConfig,
    /// The cache the policies target.
    pub geometry: CacheGeometry,
    /// Concurrent processes.
    pub processes: u32,
    /// Mean working-set size in pages.
    pub pages: u64,
    /// References between context switches.
    pub quantum: u64,
    /// References a process makes before it exits.
    pub lifetime: u64,
    /// Processes to finish.
    pub exits: u32,
    /// Seed of the workload's xoshiro256++ generator (the same workload for every policy).
    pub seed: u64,
}

/// One policy's outcome.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct PolicyOutcome {
    /// The policy.
    pub policy: PolicyKind,
    /// Finished processes measured.
    pub processes: u32,
    /// Mean page conflicts `C` per process at exit, in the target cache.
    pub mean_conflicts: f64,
    /// Mean mapping conflicts `C - C_min` per process at exit, in the target cache.
    pub mean_mapping_conflicts: f64,
    /// Mean mapping conflicts per process in a cache with half the bins (size
    /// independence: only the Hierarchical Heuristic targets both).
    pub mean_mapping_conflicts_half: f64,
    /// Processes that ended with no mapping conflict in the target cache.
    pub conflict_free: u32,
    /// Pages evicted by other mappings.
    pub evictions: u64,
}

struct Proc {
    asid: Asid,
    pages: u64,
    left: u64,
}

/// Runs `policy` on the workload.
pub fn run_policy(config: &CompareConfig, policy: PolicyKind) -> Result<PolicyOutcome, OsError> {
    if config.processes == 0 || config.pages == 0 || config.quantum == 0 || config.lifetime == 0 {
        return Err(OsError::OutOfRange {
            field: "workload",
            value: 0,
            expected: "processes, pages, quantum and lifetime >= 1",
        });
    }
    let half = if config.geometry.bins() > 1 {
        CacheGeometry::new(
            config.geometry.size() / 2,
            config.geometry.assoc(),
            config.geometry.page_size(),
        )?
    } else {
        config.geometry
    };
    let mut os = Os::new(
        config.os,
        policy.build(config.geometry, config.seed ^ 0xC0FFEE),
    )?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(config.seed);
    let mut next_pid: Asid = 1;
    let mut spawn = |rng: &mut Xoshiro256PlusPlus| {
        let p = Proc {
            asid: next_pid,
            pages: rng
                .gen_range(config.pages / 2..=config.pages * 3 / 2)
                .max(1),
            left: config.lifetime,
        };
        next_pid += 1;
        p
    };
    let mut running: Vec<Proc> = (0..config.processes).map(|_| spawn(&mut rng)).collect();
    let (mut finished, mut conflicts, mut mapping, mut mapping_half, mut free) =
        (0u32, 0u64, 0u64, 0u64, 0u32);
    let mut turn = 0usize;
    while finished < config.exits {
        let proc = &mut running[turn];
        let burst = config.quantum.min(proc.left);
        for _ in 0..burst {
            let vpn = rng.gen_range(0..proc.pages);
            os.touch(proc.asid, vpn);
        }
        proc.left -= burst;
        if proc.left == 0 {
            let asid = proc.asid;
            let space = os
                .address_space(asid)
                .expect("a running process has touched memory");
            let c = conflicts_of(space.frames(), &config.geometry);
            let h = conflicts_of(space.frames(), &half);
            conflicts += c.conflicts;
            mapping += c.mapping_conflicts();
            mapping_half += h.mapping_conflicts();
            free += u32::from(c.mapping_conflicts() == 0);
            finished += 1;
            os.exit(asid);
            running[turn] = spawn(&mut rng);
        }
        turn = (turn + 1) % running.len();
    }
    let n = f64::from(finished.max(1));
    Ok(PolicyOutcome {
        policy,
        processes: finished,
        mean_conflicts: conflicts as f64 / n,
        mean_mapping_conflicts: mapping as f64 / n,
        mean_mapping_conflicts_half: mapping_half as f64 / n,
        conflict_free: free,
        evictions: os.counters().evictions,
    })
}

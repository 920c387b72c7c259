//! Throughput measurements of the simulator, side by side with Dinero IV: the cases of
//! `pmlab bench`. Each measurement is end to end (open the trace file, decode it,
//! simulate, copy back, render the report), as a user running either program sees it.

use crate::config::{CacheConfig, HierarchyConfig, Level, Replacement};
use crate::dinero_args::hierarchy_flags;
use crate::hierarchy::Hierarchy;
use crate::multi::MultiL2;
use crate::report;
use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;
use pmlab_trace::{Format, Ref, TraceError};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One 32 KiB direct-mapped cache of 32-byte blocks.
pub fn dm32k() -> HierarchyConfig {
    HierarchyConfig {
        levels: vec![Level::Unified(CacheConfig::new(32 << 10, 32))],
    }
}

/// Kessler & Hill's level 1: split 32 KiB direct-mapped caches of 32-byte blocks.
pub fn kh_level1() -> HierarchyConfig {
    HierarchyConfig {
        levels: vec![Level::Split {
            instr: CacheConfig::new(32 << 10, 32),
            data: CacheConfig::new(32 << 10, 32),
        }],
    }
}

/// A unified level-2 cache of 128-byte blocks with random replacement.
pub fn kh_level2(size: u64, assoc: u64) -> HierarchyConfig {
    let mut c = CacheConfig::new(size, 128);
    c.assoc = assoc;
    c.repl = Replacement::Random;
    HierarchyConfig {
        levels: vec![Level::Unified(c)],
    }
}

/// Kessler & Hill's hierarchy: [`kh_level1`] over a 1 MiB direct-mapped level 2.
pub fn kh_hierarchy() -> HierarchyConfig {
    let mut h = kh_level1();
    h.levels.extend(kh_level2(1 << 20, 1).levels);
    h
}

/// The nine level-2 caches of Kessler & Hill's Table 1: 1, 4 and 16 MiB, 1, 2 and 4 ways.
pub fn kh_table1_level2s() -> Vec<HierarchyConfig> {
    let mut v = Vec::new();
    for size in [1u64 << 20, 4 << 20, 16 << 20] {
        for assoc in [1, 2, 4] {
            v.push(kh_level2(size, assoc));
        }
    }
    v
}

/// The nine full hierarchies ([`kh_level1`] over each of [`kh_table1_level2s`]).
pub fn kh_table1_hierarchies() -> Vec<HierarchyConfig> {
    kh_table1_level2s()
        .into_iter()
        .map(|l2| {
            let mut h = kh_level1();
            h.levels.extend(l2.levels);
            h
        })
        .collect()
}

/// What a measured run simulates.
pub enum Workload<'a> {
    /// One hierarchy.
    One(&'a HierarchyConfig),
    /// Shared upper levels feeding several lower alternatives in one pass.
    OnePass(&'a HierarchyConfig, &'a [HierarchyConfig]),
}

/// How long a measured run took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timing {
    /// Elapsed (wall-clock) time.
    pub wall: Duration,
    /// Processor time, user plus system: what the run itself consumed, which other work
    /// competing for the processors does not inflate (it still slows a run somewhat,
    /// through shared caches and memory bandwidth).
    pub cpu: Duration,
}

/// User plus system time consumed so far by this process (`UsageWho::RUSAGE_SELF`) or
/// by its waited-for children (`RUSAGE_CHILDREN`); zero if the system will not say.
fn cpu_time(who: UsageWho) -> Duration {
    let of = |t: TimeVal| {
        Duration::new(
            u64::try_from(t.tv_sec()).unwrap_or(0),
            u32::try_from(t.tv_usec()).unwrap_or(0) * 1000,
        )
    };
    getrusage(who).map_or(Duration::ZERO, |u| of(u.user_time()) + of(u.system_time()))
}

/// Simulates the trace at `path` (in `format`) end to end; returns the time taken and
/// the number of references. The rendered report is discarded.
pub fn time_pmlab(
    work: &Workload,
    path: &Path,
    format: Format,
    seed: u64,
) -> Result<(Timing, u64), TraceError> {
    let cpu_start = cpu_time(UsageWho::RUSAGE_SELF);
    let start = Instant::now();
    let mut src = pmlab_trace::open_trace(&path.to_string_lossy(), Some(format))?;
    // Batches of 16 KiB: a batch and the level-1 tag arrays stay in the level-1 cache
    // together (4096 references measured 12% slower on binary traces).
    let mut buf: Vec<Ref> = Vec::with_capacity(1024);
    let mut n = 0u64;
    let text_len: usize = match work {
        Workload::One(cfg) => {
            let mut h = Hierarchy::new(cfg, seed).expect("benchmark configurations are valid");
            loop {
                let refs = src.next_refs(&mut buf)?;
                if refs.is_empty() {
                    break;
                }
                n += refs.len() as u64;
                h.run(refs);
            }
            h.finish();
            report::render_all(&h.stats(), false).len()
        }
        Workload::OnePass(upper, lowers) => {
            let mut m =
                MultiL2::new(upper, lowers, seed).expect("benchmark configurations are valid");
            loop {
                let refs = src.next_refs(&mut buf)?;
                if refs.is_empty() {
                    break;
                }
                n += refs.len() as u64;
                m.run(refs);
            }
            m.finish();
            (0..m.alternatives())
                .map(|i| report::render_all(&m.stats(i), false).len())
                .sum()
        }
    };
    std::hint::black_box(text_len);
    let timing = Timing {
        wall: start.elapsed(),
        cpu: cpu_time(UsageWho::RUSAGE_SELF).saturating_sub(cpu_start),
    };
    Ok((timing, n))
}

/// Runs Dinero IV (`dinero`: path to its `dineroIV` binary) on the din text trace at
/// `din` with the flags of `cfg`, output discarded; returns the time it took (its
/// processor time is that of the waited-for child).
pub fn time_dinero(dinero: &Path, cfg: &HierarchyConfig, din: &Path) -> std::io::Result<Timing> {
    let mut args = hierarchy_flags(cfg);
    args.extend(["-informat".into(), "D".into()]);
    let input = std::fs::File::open(din)?;
    let cpu_start = cpu_time(UsageWho::RUSAGE_CHILDREN);
    let start = Instant::now();
    let status = Command::new(dinero)
        .args(&args)
        .stdin(input)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    let timing = Timing {
        wall: start.elapsed(),
        cpu: cpu_time(UsageWho::RUSAGE_CHILDREN).saturating_sub(cpu_start),
    };
    if !status.success() {
        return Err(std::io::Error::other(format!(
            "{} {} exited with {status}",
            dinero.display(),
            args.join(" ")
        )));
    }
    Ok(timing)
}

/// The median of `xs` (sorted in place); zero for none.
pub fn median(xs: &mut [f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        (xs[m - 1] + xs[m]) / 2.0
    }
}

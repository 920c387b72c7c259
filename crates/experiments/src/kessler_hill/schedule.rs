//! The scheduler that interleaves a workload's job streams into one trace.
//!
//! The paper's multiprogrammed traces are "the actual execution interleaving of the
//! processes on the traced system", with 134,000 (Mult2) or 214,000 (Mult2.2)
//! instructions between switches on average. Its traces are not available, so the
//! interleaving is drawn: a process keeps the processor for a quantum, then another runs.
//!
//! * [`Scheduler::Random`] (the default): each quantum's length is drawn from the
//!   exponential distribution with the chosen mean (a process runs until it blocks or its
//!   time slice ends, at a moment that is memoryless to a trace; rounded to whole
//!   instructions, at least one), and the next stream to run is drawn uniformly from the
//!   other live ones. A process that exits gives up the processor; the next is drawn from
//!   all live streams. Draws come from xoshiro256++ seeded from the run's seed.
//! * [`Scheduler::RoundRobin`]: every quantum is exactly the mean, streams in turn.
//!
//! A series stream starts its next process when one exits (a new address space, so the
//! OS model returns the exited one's frames to the pool); it starts over from its first
//! process when it reaches its end. The trace ends when the first long program's trace
//! ends, so as many streams run at the end as at the start. A workload without series
//! streams (a directory of plain traces) runs until every long program has ended.

use super::workload::{Role, Workload};
use pmlab_trace::{Asid, Kind};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// How the next quantum and process are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Scheduler {
    /// Exponentially distributed quanta, next stream drawn uniformly (seeded).
    Random,
    /// Fixed quanta, streams in turn.
    RoundRobin,
}

/// What to schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ScheduleSpec {
    /// Mean instructions per quantum (Mult2: 134,000; Mult2.2: 214,000).
    pub mean_quantum: u64,
    /// The scheduler.
    pub scheduler: Scheduler,
    /// How many streams run: the workload's first ones, in manifest order; more than the
    /// workload has adds copies of its series streams (new processes, each copy starting
    /// part-way through its series). `None`: every stream once.
    pub streams: Option<usize>,
    /// Seed of the scheduler's xoshiro256++.
    pub seed: u64,
}

/// A run of one process's references: `program`'s refs `start..end`, as `asid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Segment {
    /// Index into [`Workload::programs`].
    pub program: u32,
    /// The process.
    pub asid: Asid,
    /// First reference.
    pub start: usize,
    /// One past the last reference.
    pub end: usize,
    /// The process exits after this segment.
    pub exits: bool,
}

/// An interleaving of a workload.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Schedule {
    /// What was scheduled.
    pub spec: ScheduleSpec,
    /// The segments, in execution order.
    #[serde(skip)]
    pub segments: Vec<Segment>,
    /// References in the trace.
    pub refs: u64,
    /// Instruction fetches in the trace.
    pub instructions: u64,
    /// Context switches (consecutive segments of different processes).
    pub switches: u64,
    /// Processes that ran (address spaces created).
    pub processes: u32,
    /// Processes that exited before the end.
    pub exited: u32,
    /// Streams that ran.
    pub streams: usize,
}

impl Schedule {
    /// Mean instructions between context switches.
    pub fn mean_switch_interval(&self) -> f64 {
        self.instructions as f64 / self.switches.max(1) as f64
    }
}

/// One running stream.
struct Lane {
    programs: Vec<usize>,
    role: Role,
    next: usize,
    /// The running process: (program, position, asid).
    current: Option<(usize, usize, Asid)>,
}

fn lanes(workload: &Workload, wanted: Option<usize>) -> Vec<Lane> {
    let n = wanted.unwrap_or(workload.streams.len()).max(1);
    let series: Vec<usize> = (0..workload.streams.len())
        .filter(|&i| workload.streams[i].role == Role::Series)
        .collect();
    let mut out = Vec::new();
    for k in 0..n {
        let (stream, offset) = if k < workload.streams.len() {
            (k, 0)
        } else if series.is_empty() {
            break;
        } else {
            // Copy c of a series starts (c / (copies + 1)) of the way through its list.
            let extra = k - workload.streams.len();
            let copy = extra / series.len() + 1;
            (series[extra % series.len()], copy)
        };
        let s = &workload.streams[stream];
        let len = s.programs.len();
        let start = if offset == 0 {
            0
        } else {
            (len * offset / (offset + 1)) % len
        };
        let mut programs = s.programs[start..].to_vec();
        programs.extend_from_slice(&s.programs[..start]);
        out.push(Lane {
            programs,
            role: s.role,
            next: 0,
            current: None,
        });
    }
    out
}

/// The quantum's length in instructions.
fn quantum(spec: &ScheduleSpec, rng: &mut Xoshiro256PlusPlus) -> u64 {
    match spec.scheduler {
        Scheduler::RoundRobin => spec.mean_quantum.max(1),
        Scheduler::Random => {
            let u: f64 = rng.r#gen::<f64>();
            ((-(1.0 - u).ln()) * spec.mean_quantum as f64)
                .round()
                .max(1.0) as u64
        }
    }
}

/// The stream to run next among `live` (indices into the lanes), after `current`.
fn pick(
    spec: &ScheduleSpec,
    rng: &mut Xoshiro256PlusPlus,
    live: &[usize],
    current: usize,
    exited: bool,
) -> usize {
    match spec.scheduler {
        Scheduler::RoundRobin => *live.iter().find(|&&l| l > current).unwrap_or(&live[0]),
        Scheduler::Random => {
            let others: Vec<usize> = live
                .iter()
                .copied()
                .filter(|&l| exited || l != current)
                .collect();
            if others.is_empty() {
                current
            } else {
                others[rng.gen_range(0..others.len())]
            }
        }
    }
}

/// Runs lane `lane` for up to `q` instructions: the quantum ends before the fetch that
/// would exceed it, so a last instruction's data references stay with it.
fn run_quantum(workload: &Workload, lane: &mut Lane, q: u64, next_asid: &mut u32) -> Segment {
    let (program, pos, asid) = *lane.current.get_or_insert_with(|| {
        let p = lane.programs[lane.next];
        lane.next += 1;
        *next_asid += 1;
        (
            p,
            0,
            Asid::try_from(*next_asid).expect("fewer than 65536 processes"),
        )
    });
    let refs = &workload.programs[program].refs;
    let mut used = 0u64;
    let mut end = pos;
    while end < refs.len() {
        if refs[end].kind == Kind::Instr {
            if used == q {
                break;
            }
            used += 1;
        }
        end += 1;
    }
    let exits = end == refs.len();
    lane.current = (!exits).then_some((program, end, asid));
    Segment {
        program: program as u32,
        asid,
        start: pos,
        end,
        exits,
    }
}

/// Interleaves `workload` as `spec` says.
pub fn schedule(workload: &Workload, spec: ScheduleSpec) -> Schedule {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut lanes = lanes(workload, spec.streams);
    let cycling = lanes.iter().any(|l| l.role == Role::Series);
    let mut live: Vec<usize> = (0..lanes.len()).collect();
    let mut current = match spec.scheduler {
        Scheduler::Random => rng.gen_range(0..lanes.len()),
        Scheduler::RoundRobin => 0,
    };
    let mut out = Schedule {
        spec,
        segments: Vec::new(),
        refs: 0,
        instructions: 0,
        switches: 0,
        processes: 0,
        exited: 0,
        streams: lanes.len(),
    };
    let mut next_asid = 0u32;
    while !live.is_empty() {
        let q = quantum(&spec, &mut rng);
        let lane = &mut lanes[current];
        let seg = run_quantum(workload, lane, q, &mut next_asid);
        let program = &workload.programs[seg.program as usize];
        out.refs += (seg.end - seg.start) as u64;
        out.instructions += program.refs[seg.start..seg.end]
            .iter()
            .filter(|r| r.kind == Kind::Instr)
            .count() as u64;
        if out.segments.last().is_some_and(|s| s.asid != seg.asid) {
            out.switches += 1;
        }
        out.segments.push(seg);
        if seg.exits {
            if lane.next == lane.programs.len() {
                if lane.role == Role::Long {
                    out.exited += 1;
                    live.retain(|&l| l != current);
                    if cycling {
                        break;
                    }
                    if live.is_empty() {
                        break;
                    }
                    current = pick(&spec, &mut rng, &live, current, true);
                    continue;
                }
                lane.next = 0;
            }
            out.exited += 1;
        }
        current = pick(&spec, &mut rng, &live, current, seg.exits);
    }
    // The trace ends: the last segment's process does not exit.
    out.processes = next_asid;
    out
}

#[cfg(test)]
mod tests {
    use super::super::workload::{Program, Stream};
    use super::*;
    use pmlab_trace::Ref;
    use std::path::PathBuf;

    fn program(name: &str, instructions: usize) -> Program {
        let refs = (0..instructions as u64)
            .flat_map(|i| {
                [
                    Ref {
                        addr: i * 4,
                        size: 4,
                        kind: Kind::Instr,
                        asid: 0,
                    },
                    Ref {
                        addr: 1 << 20,
                        size: 8,
                        kind: Kind::Read,
                        asid: 0,
                    },
                ]
            })
            .collect();
        Program::from_refs(name, refs)
    }

    /// A long program of 1000 instructions beside a series of two processes of 30 and 50.
    fn workload() -> Workload {
        let programs = vec![program("long", 1000), program("a", 30), program("b", 50)];
        let streams = vec![
            Stream {
                name: "long".into(),
                role: Role::Long,
                programs: vec![0],
            },
            Stream {
                name: "series".into(),
                role: Role::Series,
                programs: vec![1, 2],
            },
        ];
        Workload::from_parts(PathBuf::from("test"), programs, streams)
    }

    fn spec(scheduler: Scheduler, mean: u64) -> ScheduleSpec {
        ScheduleSpec {
            mean_quantum: mean,
            scheduler,
            streams: None,
            seed: 5,
        }
    }

    #[test]
    fn round_robin_alternates_and_series_restart_as_new_processes() {
        let w = workload();
        let s = schedule(&w, spec(Scheduler::RoundRobin, 20));
        // The long program runs all its 1000 instructions, the series fills the other
        // half of the time with processes of 30 and 50 instructions over and over.
        let long: u64 = s
            .segments
            .iter()
            .filter(|g| g.program == 0)
            .map(|g| (g.end - g.start) as u64)
            .sum();
        assert_eq!(long, 2000);
        assert!(
            s.segments.last().unwrap().exits,
            "ends with the long program"
        );
        assert_eq!(s.segments[0].program, 0);
        assert_eq!(s.segments[1].program, 1);
        assert_eq!((s.segments[0].end, s.segments[1].end), (40, 40));
        // Every series process has its own address space, and the data reference of an
        // instruction stays in its quantum.
        let series_asids: std::collections::BTreeSet<Asid> = s
            .segments
            .iter()
            .filter(|g| g.program != 0)
            .map(|g| g.asid)
            .collect();
        assert!(series_asids.len() >= 20, "{}", series_asids.len());
        assert_eq!(s.processes as usize, series_asids.len() + 1);
        assert_eq!(s.refs, 2 * s.instructions);
    }

    #[test]
    fn random_quanta_have_the_mean_and_the_seed_decides() {
        let w = Workload::from_parts(
            PathBuf::from("t"),
            vec![program("x", 400_000), program("y", 400_000)],
            vec![
                Stream {
                    name: "x".into(),
                    role: Role::Long,
                    programs: vec![0],
                },
                Stream {
                    name: "y".into(),
                    role: Role::Long,
                    programs: vec![1],
                },
            ],
        );
        let a = schedule(&w, spec(Scheduler::Random, 1000));
        let b = schedule(&w, spec(Scheduler::Random, 1000));
        assert_eq!(a.segments, b.segments);
        let mut other = spec(Scheduler::Random, 1000);
        other.seed = 6;
        assert_ne!(schedule(&w, other).segments, a.segments);
        // Two streams: every quantum end switches, so the mean interval is the mean
        // quantum (within the sampling error of ~800 draws, 1/sqrt(800) = 3.5%).
        let mean = a.mean_switch_interval();
        assert!((mean - 1000.0).abs() < 120.0, "{mean}");
        let lens: Vec<usize> = a.segments.iter().map(|g| g.end - g.start).collect();
        assert!(lens.iter().any(|&l| l < 400) && lens.iter().any(|&l| l > 4000));
    }

    #[test]
    fn more_streams_than_the_workload_adds_series_copies() {
        let w = workload();
        let mut sp = spec(Scheduler::RoundRobin, 20);
        sp.streams = Some(3);
        let s = schedule(&w, sp);
        assert_eq!(s.streams, 3);
        // The copy starts half-way through the series: with program b.
        assert_eq!(s.segments[2].program, 2);
        sp.streams = Some(1);
        let alone = schedule(&w, sp);
        assert!(alone.segments.iter().all(|g| g.program == 0));
        assert_eq!(alone.switches, 0);
    }
}

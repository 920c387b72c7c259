//! The Kessler & Hill driver on a real, shortened workload: heads of two of the built-in
//! program traces, one as a long program and one cut into a series of short processes.

use pmlab_experiments::kessler_hill::{
    Config, L2Set, PassSpec, Program, Role, ScheduleSpec, Scheduler, Sensitivity, Stream, Workload,
    plan, run_pass, schedule::schedule, schedules,
};
use pmlab_os::PolicyKind;
use pmlab_trace::{RefSource, open_trace};
use std::path::PathBuf;

const REFS_PER_PROGRAM: usize = 400_000;

fn traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/traces")
}

fn head(name: &str) -> Vec<pmlab_trace::Ref> {
    let path = traces().join(format!("{name}.bin.zst"));
    let mut src = open_trace(&path.to_string_lossy(), None).expect("built-in trace opens");
    let mut out = Vec::new();
    let mut batch = Vec::with_capacity(4096);
    while out.len() < REFS_PER_PROGRAM && src.next_batch(&mut batch).unwrap() > 0 {
        out.extend_from_slice(&batch);
    }
    out.truncate(REFS_PER_PROGRAM);
    out
}

/// cc1 runs throughout; sort's head, cut in four, is a series of short processes.
fn workload() -> Workload {
    let mut programs = vec![Program::from_refs("cc1", head("cc1"))];
    let sort = head("sort");
    for (i, part) in sort.chunks(REFS_PER_PROGRAM / 4).enumerate() {
        programs.push(Program::from_refs(&format!("sort{i}"), part.to_vec()));
    }
    let streams = vec![
        Stream {
            name: "long".into(),
            role: Role::Long,
            programs: vec![0],
        },
        Stream {
            name: "series".into(),
            role: Role::Series,
            programs: vec![1, 2, 3, 4],
        },
    ];
    Workload::from_parts(traces(), programs, streams)
}

fn config() -> Config {
    // Only the report test writes; it sets its own scratch directory.
    let mut c = Config::paper(std::path::PathBuf::from("unused"));
    c.progress = false;
    c.switch_interval = 20_000;
    c.window = 100_000;
    c
}

fn spec(policy: PolicyKind, seed: u64) -> PassSpec {
    PassSpec {
        policy,
        pool: 4 << 20,
        seed,
        l2: L2Set::All,
    }
}

fn main_schedule(w: &Workload, c: &Config) -> pmlab_experiments::kessler_hill::Schedule {
    schedule(w, c.schedule_spec())
}

#[test]
fn plan_covers_every_policy_pool_and_seed() {
    let mut c = config();
    c.sensitivity = Sensitivity {
        intervals: vec![5_000, 20_000],
        streams: vec![1],
        samples: 2,
    };
    let s = schedules(&c);
    // The 20,000 point is the main run's and is not run twice.
    assert_eq!(s.len(), 3);
    let p = plan(&c, &s);
    let main = 2 * 6 * c.samples as usize;
    assert_eq!(p.len(), main + 2 * 2 * 2);
    assert_eq!(p.iter().filter(|(_, j)| j.l2 == L2Set::All).count(), 6 * 4);
    assert!(
        p[main..]
            .iter()
            .all(|(s, j)| *s > 0 && j.l2 == L2Set::DirectMapped)
    );
}

#[test]
fn processes_start_and_exit_over_the_run() {
    let (w, c) = (workload(), config());
    let s = main_schedule(&w, &c);
    assert!(s.exited >= 3, "{s:?}");
    assert!(s.processes >= 4, "{s:?}");
    let r = run_pass(&c, &w, &s, spec(PolicyKind::Random, 1)).unwrap();
    // One sample per process that ran; every exited process's misses were counted.
    assert_eq!(r.spaces.len(), s.processes as usize);
    assert_eq!(
        r.spaces.iter().map(|x| x.instructions).sum::<u64>(),
        r.instructions
    );
    let misses_1m = r.l2_misses[0].2;
    assert_eq!(r.spaces.iter().map(|x| x.misses_1m).sum::<u64>(), misses_1m);
    assert!(r.windows.len() as u64 >= r.instructions / c.window);
}

#[test]
fn a_pass_is_a_function_of_its_seed() {
    let (w, c) = (workload(), config());
    let s = main_schedule(&w, &c);
    let a = run_pass(&c, &w, &s, spec(PolicyKind::Random, 7)).unwrap();
    let b = run_pass(&c, &w, &s, spec(PolicyKind::Random, 7)).unwrap();
    let other = run_pass(&c, &w, &s, spec(PolicyKind::Random, 8)).unwrap();
    assert_eq!(a.l2_misses, b.l2_misses);
    assert_ne!(
        a.l2_misses, other.l2_misses,
        "a different seed maps pages differently"
    );
    assert_eq!(a.instructions, s.instructions);
    assert_eq!(a.l2_misses.len(), 9);
}

#[test]
fn larger_or_more_associative_level_twos_miss_less_in_aggregate() {
    let (w, c) = (workload(), config());
    let s = main_schedule(&w, &c);
    let r = run_pass(&c, &w, &s, spec(PolicyKind::Hierarchical, 1)).unwrap();
    // Random replacement allows a rare inversion between neighbours, but 16 MiB 4-way must
    // beat 1 MiB direct-mapped by far, and no level two can miss more than level one
    // sends it.
    let m = |s, a| r.mpi_x1000(s, a).unwrap();
    assert!(m(16, 4) < m(1, 1), "{r:?}");
    let l1 = r.l1_misses.0 + r.l1_misses.1;
    for &(_, _, misses) in &r.l2_misses {
        // A store that covers a whole 32-byte block allocates it in the write-back
        // level one without a fetch (Dinero IV's write-allocate), so a block that never
        // leaves the 1024-line data cache again is never seen below it.
        assert!(
            misses + 1024 >= r.cold_blocks,
            "no level two avoids cold-start misses: {misses} < {}",
            r.cold_blocks
        );
        assert!(
            misses <= 2 * l1,
            "write-backs at most double the level-one traffic"
        );
    }
}

/// The paper's Figure 12 claim: the Hierarchical Heuristic leaves (almost) no
/// unnecessary conflicts within an address space, random mapping leaves many.
#[test]
fn hierarchical_mapping_has_fewer_conflicts_than_random() {
    let (w, c) = (workload(), config());
    let s = main_schedule(&w, &c);
    let total = |policy| {
        let r = run_pass(&c, &w, &s, spec(policy, 3)).unwrap();
        assert!(!r.spaces.is_empty());
        r.spaces
            .iter()
            .map(|s| s.conflicts - s.min_conflicts)
            .sum::<u64>()
    };
    let (random, hier) = (total(PolicyKind::Random), total(PolicyKind::Hierarchical));
    assert!(hier < random, "hierarchical {hier} vs random {random}");
}

/// The whole reproduction on the short workload: every table renders, every file is
/// written.
#[test]
fn the_report_renders_and_writes_every_file() {
    let w = workload();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config();
    c.samples = 2;
    c.policy_samples = 1;
    c.out_dir = dir.path().to_path_buf();
    c.sensitivity = Sensitivity {
        intervals: vec![5_000],
        streams: vec![1],
        samples: 1,
    };
    let single = Workload::from_parts(
        traces(),
        vec![Program::from_refs("lin", head("xz"))],
        vec![Stream {
            name: "lin".into(),
            role: Role::Long,
            programs: vec![0],
        }],
    );
    let report = pmlab_experiments::kessler_hill::reproduce(&c, &w, &[single]).unwrap();
    let text = report.to_string();
    for title in [
        "Table 1.",
        "Table 2.",
        "Table 3.",
        "Table 4.",
        "Figure 11's dashed lines",
        "Figure 12:",
        "Figure 13:",
        "Sensitivity:",
        "Differences from the paper",
        "Appendix A.",
    ] {
        assert!(text.contains(title), "{title} missing from:\n{text}");
    }
    report.write(&c).unwrap();
    for f in [
        "table1.csv",
        "table4.csv",
        "sensitivity.csv",
        "appendix-a.csv",
        "kessler-hill.json",
        "fig3.svg",
        "fig4.svg",
        "fig10-a.svg",
        "fig11.svg",
        "fig11b.svg",
        "fig12.svg",
        "fig13.svg",
        "sensitivity-interval.svg",
        "sensitivity-streams.svg",
    ] {
        assert!(dir.path().join(f).metadata().unwrap().len() > 0, "{f}");
    }
}

#[test]
fn round_robin_is_kept_as_an_option() {
    let w = workload();
    let s = schedule(
        &w,
        ScheduleSpec {
            mean_quantum: 20_000,
            scheduler: Scheduler::RoundRobin,
            streams: None,
            seed: 1,
        },
    );
    // Fixed quanta: every segment of the long program but the last is exactly one quantum.
    let long: Vec<_> = s.segments.iter().filter(|g| g.program == 0).collect();
    let instr = |g: &&pmlab_experiments::kessler_hill::Segment| {
        w.programs[0].refs[g.start..g.end]
            .iter()
            .filter(|r| r.kind == pmlab_trace::Kind::Instr)
            .count()
    };
    assert!(long[..long.len() - 1].iter().all(|g| instr(g) == 20_000));
}

/// The shipped quick workload is of Mult2's kind: two long programs and two series of
/// short processes that start and exit, interleaved with quanta of the paper's mean.
#[test]
fn the_shipped_quick_workload_is_a_mult2_mix() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/mult2/quick");
    let w = Workload::load(&dir).unwrap();
    let roles: Vec<(&str, Role)> = w
        .streams
        .iter()
        .map(|s| (s.name.as_str(), s.role))
        .collect();
    assert_eq!(
        roles,
        [
            ("router", Role::Long),
            ("drc", Role::Long),
            ("compile", Role::Series),
            ("shell", Role::Series)
        ]
    );
    let s = schedule(&w, config_with(214_000).schedule_spec());
    assert!(s.exited >= 4 && s.processes >= 6, "{s:?}");
    let mean = s.mean_switch_interval();
    assert!((mean - 214_000.0).abs() < 0.25 * 214_000.0, "{mean}");
    let appendix = Workload::trace_files(&dir.join("appendix")).unwrap();
    assert_eq!(appendix.len(), 4);
}

fn config_with(interval: u64) -> Config {
    let mut c = config();
    c.switch_interval = interval;
    c
}

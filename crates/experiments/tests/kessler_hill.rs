//! The Kessler & Hill driver on a real, shortened workload: two of the built-in program
//! traces, interleaved as the experiment does.

use pmlab_experiments::kessler_hill::{Config, PassSpec, Program, Workload, plan, run_pass};
use pmlab_os::PolicyKind;
use pmlab_trace::{Interleave, Kind, RefSource, SwitchUnit, VecSource, open_trace};
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

fn workload() -> Workload {
    let names = ["cc1", "sort"];
    let mut mix = Interleave::new(20_000, SwitchUnit::Instructions);
    for (i, n) in names.iter().enumerate() {
        mix.add(i as u16 + 1, Box::new(VecSource::new(head(n))));
    }
    let mut refs = Vec::new();
    let mut batch = Vec::with_capacity(4096);
    while mix.next_batch(&mut batch).unwrap() > 0 {
        refs.extend_from_slice(&batch);
    }
    let instructions = refs.iter().filter(|r| r.kind == Kind::Instr).count() as u64;
    Workload {
        programs: names
            .iter()
            .map(|n| Program {
                name: n.to_string(),
                path: traces().join(n),
            })
            .collect(),
        refs,
        ends: mix.drain_ended(),
        instructions,
        switches: mix.switches(),
    }
}

fn config() -> Config {
    // Only the report test writes; it sets its own scratch directory.
    let mut c = Config::paper(std::path::PathBuf::from("unused"));
    c.progress = false;
    c
}

fn spec(policy: PolicyKind, seed: u64) -> PassSpec {
    PassSpec {
        policy,
        pool: 4 << 20,
        seed,
        all_l2: true,
    }
}

#[test]
fn plan_covers_every_policy_pool_and_seed() {
    let c = config();
    let p = plan(&c);
    assert_eq!(p.len(), 2 * 6 * c.samples as usize);
    assert_eq!(
        p.iter().filter(|s| s.all_l2).count(),
        6 * c.samples as usize
    );
}

#[test]
fn a_pass_is_a_function_of_its_seed() {
    let (w, c) = (workload(), config());
    let a = run_pass(&c, &w, spec(PolicyKind::Random, 7)).unwrap();
    let b = run_pass(&c, &w, spec(PolicyKind::Random, 7)).unwrap();
    let other = run_pass(&c, &w, spec(PolicyKind::Random, 8)).unwrap();
    assert_eq!(a.l2_misses, b.l2_misses);
    assert_ne!(
        a.l2_misses, other.l2_misses,
        "a different seed maps pages differently"
    );
    assert_eq!(a.instructions, w.instructions);
    assert_eq!(a.l2_misses.len(), 9);
}

#[test]
fn larger_or_more_associative_level_twos_miss_less_in_aggregate() {
    let (w, c) = (workload(), config());
    let r = run_pass(&c, &w, spec(PolicyKind::Hierarchical, 1)).unwrap();
    // Random replacement allows a rare inversion between neighbours, but 16 MiB 4-way must
    // beat 1 MiB direct-mapped by far, and no level two can miss more than level one
    // sends it.
    let m = |s, a| r.mpi_x1000(s, a).unwrap();
    assert!(m(16, 4) < m(1, 1), "{r:?}");
    let l1 = r.l1_misses.0 + r.l1_misses.1;
    for &(_, _, misses) in &r.l2_misses {
        assert!(
            misses >= r.cold_blocks,
            "no level two avoids cold-start misses"
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
    let total = |policy| {
        let r = run_pass(&c, &w, spec(policy, 3)).unwrap();
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
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let mut c = config();
    c.samples = 1;
    c.out_dir = dir.clone();
    let report = pmlab_experiments::kessler_hill::reproduce(&c, &w).unwrap();
    let text = report.to_string();
    for title in [
        "Table 1.",
        "Table 2.",
        "Table 3.",
        "Table 4.",
        "Differences from the paper",
    ] {
        assert!(text.contains(title), "{title} missing from:\n{text}");
    }
    report.write(&c).unwrap();
    for f in [
        "table1.csv",
        "table4.csv",
        "differences.csv",
        "kessler-hill.json",
        "fig3.svg",
        "fig4.svg",
        "fig11.svg",
        "fig12.svg",
    ] {
        assert!(dir.join(f).metadata().unwrap().len() > 0, "{f}");
    }
}

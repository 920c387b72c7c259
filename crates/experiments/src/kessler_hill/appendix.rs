//! Appendix A: the other traces, each a single large program, random against
//! hierarchical mapping over the nine level twos.

use super::analysis::{reduction, separate};
use super::paper::{APPENDIX_A, L2_CONFIGS};
use super::schedule::{Schedule, ScheduleSpec, schedule};
use super::simulate::{L2Set, PassResult, PassSpec, run_passes};
use super::tables::pct;
use super::{Config, ExperimentError, Workload};
use pmlab_os::PolicyKind;
use pmlab_report::{Table, summarize};

/// One single-program trace's passes.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AppendixRun {
    /// The trace's name (`sor`, `tv`, `tree`, `lin`).
    pub name: String,
    /// Its (trivial) schedule.
    pub schedule: Schedule,
    /// Random and hierarchical passes.
    pub passes: Vec<PassResult>,
}

/// The passes of Appendix A, `config.samples` seeds of each mapping per trace.
pub(crate) fn jobs(config: &Config) -> Vec<(usize, PassSpec)> {
    let mut jobs = Vec::new();
    for policy in [PolicyKind::Random, PolicyKind::Hierarchical] {
        for i in 0..config.samples {
            jobs.push((
                0,
                PassSpec {
                    policy,
                    pool: config.pools.0,
                    seed: config.seed + u64::from(i),
                    l2: L2Set::All,
                },
            ));
        }
    }
    jobs
}

/// Runs every workload of `traces` (one program each).
pub(crate) fn run(
    config: &Config,
    traces: &[Workload],
    bar: &indicatif::ProgressBar,
) -> Result<Vec<AppendixRun>, ExperimentError> {
    let mut out = Vec::new();
    for w in traces {
        let s = schedule(
            w,
            ScheduleSpec {
                streams: None,
                ..config.schedule_spec()
            },
        );
        let passes = run_passes(config, w, std::slice::from_ref(&s), &jobs(config), bar)?;
        out.push(AppendixRun {
            name: w.programs.first().map_or(String::new(), |p| p.name.clone()),
            schedule: s,
            passes,
        });
    }
    Ok(out)
}

/// The paper's trace a stand-in stands for.
fn paper_row(name: &str) -> Option<&'static [[f64; 7]; 9]> {
    APPENDIX_A
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, rows)| rows)
}

/// Appendix A beside the paper's.
pub(crate) fn table(runs: &[AppendixRun]) -> Table {
    let mut t = Table::new(
        "Appendix A. Single large programs: level-two MPI x 1000, random vs hierarchical, 90% confidence",
        &[
            "trace",
            "L2",
            "random (ours)",
            "hier. (ours)",
            "reduction",
            "separate",
            "paper random",
            "paper hier.",
            "paper red.",
            "paper's separate",
        ],
    );
    for run in runs {
        let theirs = paper_row(&run.name);
        for (i, &(size, assoc)) in L2_CONFIGS.iter().enumerate() {
            let cell = |policy| {
                let v: Vec<f64> = run
                    .passes
                    .iter()
                    .filter(|p| p.spec.policy == policy)
                    .filter_map(|p| p.mpi_x1000(size, assoc))
                    .collect();
                summarize(&v, 0.90)
            };
            let (Some(r), Some(h)) = (cell(PolicyKind::Random), cell(PolicyKind::Hierarchical))
            else {
                continue;
            };
            let mut row = vec![
                format!(
                    "{} ({} M instr.)",
                    run.name,
                    run.schedule.instructions / 1_000_000
                ),
                format!("{size}M {assoc}-way"),
                format!("{:.4} ± {:.4}", r.mean, r.half_width),
                format!("{:.4} ± {:.4}", h.mean, h.half_width),
                pct(reduction(r.mean, h.mean)),
                yes_no(separate((r.mean, r.half_width), (h.mean, h.half_width))),
            ];
            match theirs {
                Some(p) => {
                    let p = p[i];
                    row.extend([
                        format!("{:.4} ± {:.4}", p[0], p[1]),
                        format!("{:.4} ± {:.4}", p[3], p[4]),
                        pct(p[6]),
                        yes_no(separate((p[0], p[1]), (p[3], p[4]))),
                    ]);
                }
                None => row.extend(["-".to_string(), "-".into(), "-".into(), "-".into()]),
            }
            t.row(row);
        }
    }
    t.note("Stand-ins: sor = successive over-relaxation on a sparse matrix (Sor), tv = ngspice transient of an RC");
    t.note("interconnect network (Tv, a timing verifier), tree = Guile building and searching a tree (Tree),");
    t.note("lin = ngspice on a resistive power grid (Lin, a power-supply analyzer with sparse matrices).");
    t
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

//! The reproduction's figures: Figures 3 and 4 from the analytic model, Figure 11 (MPI
//! by level-two size and associativity) and Figure 12 (per-address-space mapping
//! conflicts, random against hierarchical, over the model's prediction).

use super::PassResult;
use super::paper::L2_CONFIGS;
use pmlab_os::PolicyKind;
use pmlab_os::figures::{FigureConfig, model_figures};
use pmlab_report::{LinePlot, ReportError, ScatterPlot, Series, summarize};
use std::path::Path;

pub(crate) fn write_all(
    dir: &Path,
    passes: &[PassResult],
    large_pool: u64,
) -> Result<(), ReportError> {
    let model = model_figures(&FigureConfig::paper()).map_err(|e| ReportError {
        path: dir.join("fig3.svg"),
        message: e.to_string(),
    })?;
    let by_assoc = |assoc: u32, y: &dyn Fn(&pmlab_os::figures::FigurePoint) -> f64| {
        model
            .iter()
            .filter(|p| p.assoc == assoc)
            .map(|p| (p.pages as f64, y(p)))
            .collect::<Vec<_>>()
    };
    let dm = 1;
    LinePlot {
        title: "Figure 3: page conflicts in a 1 MiB direct-mapped cache (model)".into(),
        x_label: "application size U (16 KiB pages)".into(),
        y_label: "conflicts".into(),
        series: vec![
            Series::new("C_max", by_assoc(dm, &|p| p.c_max as f64)),
            Series::new("C_avg (random)", by_assoc(dm, &|p| p.c_avg)),
            Series::new("C_min", by_assoc(dm, &|p| p.c_min as f64)),
        ],
    }
    .write_svg(&dir.join("fig3.svg"))?;
    LinePlot {
        title: "Figure 4: mapping conflicts C_avg - C_min, 1 MiB cache (model)".into(),
        x_label: "application size U (16 KiB pages)".into(),
        y_label: "C_avg - C_min".into(),
        series: [1, 2, 4, 8]
            .iter()
            .map(|&a| Series::new(format!("{a}-way"), by_assoc(a, &|p| p.mapping_conflicts)))
            .collect(),
    }
    .write_svg(&dir.join("fig4.svg"))?;

    let mean = |policy, size, assoc| {
        let v: Vec<f64> = passes
            .iter()
            .filter(|p| p.spec.policy == policy && p.spec.pool == large_pool)
            .filter_map(|p| p.mpi_x1000(size, assoc))
            .collect();
        summarize(&v, 0.9).map_or(f64::NAN, |s| s.mean)
    };
    let mut fig11 = Vec::new();
    for policy in [PolicyKind::Random, PolicyKind::Hierarchical] {
        for size in [1u64, 4, 16] {
            let pts = L2_CONFIGS
                .iter()
                .filter(|&&(s, _)| s == size)
                .map(|&(s, a)| (f64::from(a), mean(policy, s, a)))
                .collect();
            fig11.push(Series::new(format!("{} {size}M", policy.name()), pts));
        }
    }
    LinePlot {
        title: "Figure 11: level-two MPI x 1000 by associativity and size".into(),
        x_label: "associativity".into(),
        y_label: "misses per 1000 instructions".into(),
        series: fig11,
    }
    .write_svg(&dir.join("fig11.svg"))?;

    // Every address space of every large-pool sample is one point, as the paper plots
    // every process of its trace.
    let samples = |policy| {
        passes
            .iter()
            .filter(|p| p.spec.policy == policy && p.spec.pool == large_pool)
            .flat_map(|p| &p.spaces)
            .map(|s| (s.pages as f64, (s.conflicts - s.min_conflicts) as f64))
            .collect()
    };
    ScatterPlot {
        title: "Figure 12: mapping conflicts per address space, 1 MiB direct-mapped".into(),
        x_label: "address space size (16 KiB pages)".into(),
        y_label: "C - C_min".into(),
        points: vec![
            Series::new("random", samples(PolicyKind::Random)),
            Series::new("hierarchical", samples(PolicyKind::Hierarchical)),
        ],
        lines: vec![Series::new(
            "model C_avg - C_min",
            by_assoc(dm, &|p| p.mapping_conflicts),
        )],
    }
    .write_svg(&dir.join("fig12.svg"))
}

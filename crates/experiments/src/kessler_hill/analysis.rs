//! Numbers derived from the passes: means per cell, the Figure 11 equivalences, the
//! Figure 13 least-squares fit.

use super::PassResult;
use pmlab_os::PolicyKind;
use pmlab_report::{Summary, summarize};

/// The passes of one schedule, policy and pool.
pub(crate) fn select<'a>(
    passes: &'a [(usize, PassResult)],
    schedule: usize,
    policy: PolicyKind,
    pool: u64,
) -> impl Iterator<Item = &'a PassResult> + 'a {
    passes
        .iter()
        .filter(move |(s, p)| *s == schedule && p.spec.policy == policy && p.spec.pool == pool)
        .map(|(_, p)| p)
}

/// MPI x 1000 samples of one cell (all misses, or without the cold-start ones).
pub(crate) fn samples(
    passes: &[(usize, PassResult)],
    schedule: usize,
    policy: PolicyKind,
    pool: u64,
    (size, assoc): (u64, u32),
    warm: bool,
) -> Vec<f64> {
    select(passes, schedule, policy, pool)
        .filter_map(|p| {
            if warm {
                p.warm_mpi_x1000(size, assoc)
            } else {
                p.mpi_x1000(size, assoc)
            }
        })
        .collect()
}

/// Mean, median and 90% Student t interval of a cell.
pub(crate) fn cell(
    passes: &[(usize, PassResult)],
    schedule: usize,
    policy: PolicyKind,
    pool: u64,
    l2: (u64, u32),
) -> Option<Summary> {
    summarize(&samples(passes, schedule, policy, pool, l2, false), 0.90)
}

/// The mean of a cell, NaN when it was not run.
pub(crate) fn mean(
    passes: &[(usize, PassResult)],
    schedule: usize,
    policy: PolicyKind,
    pool: u64,
    l2: (u64, u32),
    warm: bool,
) -> f64 {
    summarize(&samples(passes, schedule, policy, pool, l2, warm), 0.90).map_or(f64::NAN, |s| s.mean)
}

/// Percent of `random`'s misses that `careful` removes.
pub(crate) fn reduction(random: f64, careful: f64) -> f64 {
    100.0 * (random - careful) / random
}

/// Whether two 90% intervals are disjoint.
pub(crate) fn separate(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 + a.1 < b.0 - b.1 || b.0 + b.1 < a.0 - a.1
}

/// Where `careful` falls between `worse` (at `x0`) and `better` (at `x1`), interpolated
/// linearly in MPI along log2 of the axis (associativity or size), as the paper's dashed
/// lines read: the fictional associativity or size that performs like careful mapping.
/// With Table 1's means this gives the paper's 1.6 ways and 1.7 MB.
pub(crate) fn equivalent(worse: f64, better: f64, careful: f64, x0: f64, x1: f64) -> f64 {
    let t = (worse - careful) / (worse - better);
    (x0.log2() + t * (x1.log2() - x0.log2())).exp2()
}

/// Least-squares line through `points`: (slope, intercept, correlation coefficient).
pub(crate) fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (mx, my) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let r = if syy == 0.0 {
        0.0
    } else {
        sxy / (sxx * syy).sqrt()
    };
    Some((slope, my - slope * mx, r))
}

#[cfg(test)]
mod tests {
    use super::super::paper::TABLE1;
    use super::*;

    /// The paper's dashed lines: Hierarchical on 1 MiB direct-mapped is "equivalent to a
    /// fictional associativity of 1.6" and "equivalent to a 1.7 megabyte cache".
    #[test]
    fn equivalences_reproduce_the_papers_readings() {
        let (r1, r2, h1) = (
            TABLE1[0].random.0,
            TABLE1[1].random.0,
            TABLE1[0].hierarchical.0,
        );
        let r4 = TABLE1[3].random.0;
        let ways = equivalent(r1, r2, h1, 1.0, 2.0);
        let size = equivalent(r1, r4, h1, 1.0, 4.0);
        assert!((ways - 1.6).abs() < 0.05, "{ways}");
        assert!((size - 1.7).abs() < 0.05, "{size}");
    }

    #[test]
    fn least_squares_fits_a_line() {
        let (m, b, r) = least_squares(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap();
        assert!((m - 2.0).abs() < 1e-12 && (b - 1.0).abs() < 1e-12 && (r - 1.0).abs() < 1e-12);
        assert!(least_squares(&[(1.0, 1.0)]).is_none());
    }

    #[test]
    fn intervals_separate_only_when_disjoint() {
        assert!(separate((1.0, 0.1), (1.5, 0.1)));
        assert!(!separate((1.0, 0.3), (1.5, 0.3)));
    }
}

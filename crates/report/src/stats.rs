//! Sample statistics as Kessler & Hill report them: mean, median and a Student t
//! confidence interval about the mean (their section 4.1.3, after Miller & Freund).

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Mean, median and the half-width of a two-sided confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Sample mean.
    pub mean: f64,
    /// Sample median (mean of the middle two for even n).
    pub median: f64,
    /// Sample standard deviation (n - 1 in the denominator).
    pub stddev: f64,
    /// Half-width of the confidence interval: t_{(1+c)/2, n-1} * s / sqrt(n); 0 for n < 2.
    pub half_width: f64,
}

/// Summarizes `samples` with a two-sided confidence interval at level `confidence`
/// (e.g. 0.90). Returns `None` for no samples.
pub fn summarize(samples: &[f64], confidence: f64) -> Option<Summary> {
    let n = samples.len();
    if n == 0 {
        return None;
    }
    let mean = samples.iter().sum::<f64>() / n as f64;
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    if n < 2 {
        return Some(Summary {
            n,
            mean,
            median,
            stddev: 0.0,
            half_width: 0.0,
        });
    }
    let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let stddev = var.sqrt();
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .expect("n >= 2 gives positive degrees of freedom")
        .inverse_cdf(0.5 + confidence / 2.0);
    Some(Summary {
        n,
        mean,
        median,
        stddev,
        half_width: t * stddev / (n as f64).sqrt(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_samples_at_ninety_percent() {
        // t_{0.95, 3} = 2.3534 (standard tables).
        let s = summarize(&[1.0, 2.0, 3.0, 4.0], 0.90).unwrap();
        assert_eq!(s.mean, 2.5);
        assert_eq!(s.median, 2.5);
        let expected = 2.353363 * (5.0f64 / 3.0).sqrt() / 2.0;
        assert!((s.half_width - expected).abs() < 1e-5, "{}", s.half_width);
    }

    #[test]
    fn degenerate() {
        assert!(summarize(&[], 0.9).is_none());
        let s = summarize(&[7.0], 0.9).unwrap();
        assert_eq!((s.mean, s.median, s.half_width), (7.0, 7.0, 0.0));
        assert_eq!(summarize(&[3.0, 1.0, 2.0], 0.9).unwrap().median, 2.0);
    }
}

//! The simple page conflict model of section 2: the expected conflicts of a random
//! mapping (equations 1-2) and the bounds `C_min` and `C_max`.

use statrs::function::factorial::ln_binomial;

use crate::OsError;

/// A random mapping of `U` application pages onto `P` available page frames, sampled
/// without replacement, with exactly `P / B` frames in each of `B` bins of a cache of
/// associativity `A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ConflictModel {
    frames: u64,
    bins: u64,
    assoc: u64,
}

impl ConflictModel {
    /// `frames` (`P`) frames in `bins` (`B`) bins of associativity `assoc` (`A`); `P`
    /// must be a multiple of `B` (the paper assumes "exactly P/B (an integer number)
    /// page frames" per bin).
    pub fn new(frames: u64, bins: u64, assoc: u64) -> Result<Self, OsError> {
        if bins == 0 {
            return Err(OsError::OutOfRange {
                field: "bins",
                value: 0,
                expected: ">= 1",
            });
        }
        if assoc == 0 {
            return Err(OsError::OutOfRange {
                field: "associativity",
                value: 0,
                expected: ">= 1",
            });
        }
        if frames == 0 || (frames / bins) * bins != frames {
            return Err(OsError::NotMultiple {
                field: "frames",
                value: frames,
                unit: bins,
                unit_name: "bins",
            });
        }
        Ok(ConflictModel {
            frames,
            bins,
            assoc,
        })
    }

    /// The paper's Figures 3-4: 128 MiB of memory in 16 KiB pages (`P = 8192`) and a
    /// 1 MiB cache (`N = 64` pages) of associativity `assoc` (`B = 64 / A`).
    pub fn paper(assoc: u64) -> Result<Self, OsError> {
        ConflictModel::new(8192, 64 / assoc.max(1), assoc)
    }

    /// Available frames `P`.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Bins `B`.
    pub fn bins(&self) -> u64 {
        self.bins
    }

    /// Associativity `A`.
    pub fn assoc(&self) -> u64 {
        self.assoc
    }

    /// Frames per bin, `P / B`.
    pub fn frames_per_bin(&self) -> u64 {
        self.frames / self.bins
    }

    /// Equation 1: the probability that exactly `u` of the `pages` (`U`) application
    /// pages map to a given bin, hypergeometric:
    /// `C(P/B, u) * C((B-1)P/B, U-u) / C(P, U)`.
    ///
    /// Computed from log-binomials (statrs: exact log-factorials below 171, log-gamma
    /// above), so `C(8192, U)`-sized numbers never appear; the relative error is around
    /// 1e-12.
    pub fn prob_in_bin(&self, u: u64, pages: u64) -> f64 {
        let k = self.frames_per_bin();
        if u > k || u > pages || pages - u > self.frames - k || pages > self.frames {
            return 0.0;
        }
        (ln_binomial(k, u) + ln_binomial(self.frames - k, pages - u)
            - ln_binomial(self.frames, pages))
        .exp()
    }

    /// Equation 2: the expected page conflicts of a random mapping of `pages` pages,
    /// `C_avg = B * sum_{u=A+1}^{min(P/B, U)} (u - A) P(u in bin)`.
    pub fn c_avg(&self, pages: u64) -> f64 {
        let top = self.frames_per_bin().min(pages);
        // A fold from +0.0: an empty f64 `sum()` is -0.0, which would print as "-0.000".
        let per_bin = ((self.assoc + 1)..=top)
            .map(|u| (u - self.assoc) as f64 * self.prob_in_bin(u, pages))
            .fold(0.0, |acc, x| acc + x);
        self.bins as f64 * per_bin
    }

    /// The variance of `C` under random mapping, for judging a Monte Carlo mean by its
    /// exact standard error `sqrt(Var / n)`.
    ///
    /// With `f(x) = max(0, x - A)` and `X_i` the pages in bin `i`,
    /// `Var C = B Var f(X_1) + B (B-1) Cov(f(X_1), f(X_2))`; the pair `(X_1, X_2)` is
    /// multivariate hypergeometric, `C(P/B, a) C(P/B, b) C(P - 2P/B, U-a-b) / C(P, U)`.
    /// O((P/B)^2) terms.
    pub fn c_variance(&self, pages: u64) -> f64 {
        let (k, a0, b) = (self.frames_per_bin(), self.assoc, self.bins as f64);
        let top = k.min(pages);
        let f = |x: u64| x.saturating_sub(a0) as f64;
        let (mut ef, mut ef2) = (0.0, 0.0);
        for x in (a0 + 1)..=top {
            let p = self.prob_in_bin(x, pages);
            ef += f(x) * p;
            ef2 += f(x) * f(x) * p;
        }
        let mut var = b * (ef2 - ef * ef);
        if self.bins > 1 {
            let rest = self.frames - 2 * k;
            let ln_total = ln_binomial(self.frames, pages);
            let mut ef12 = 0.0;
            for x in (a0 + 1)..=top {
                for y in (a0 + 1)..=k.min(pages - x) {
                    let others = pages - x - y;
                    if others > rest {
                        continue;
                    }
                    let ln_p = ln_binomial(k, x) + ln_binomial(k, y) + ln_binomial(rest, others)
                        - ln_total;
                    ef12 += f(x) * f(y) * ln_p.exp();
                }
            }
            var += b * (b - 1.0) * (ef12 - ef * ef);
        }
        var.max(0.0)
    }

    /// `C_min`: with pages spread evenly no bin conflicts until every bin holds `A`
    /// pages, "then the number of conflicts increases linearly": `max(0, U - A * B)`.
    pub fn c_min(&self, pages: u64) -> u64 {
        crate::min_conflicts(pages, self.bins, self.assoc)
    }

    /// `C_max`: the pages "map to the minimum number of bins": full bins of `P/B` pages
    /// each conflict in `P/B - A` pages, and the remaining pages share one more bin.
    pub fn c_max(&self, pages: u64) -> u64 {
        let k = self.frames_per_bin();
        let full = pages / k;
        let rest = pages % k;
        full * k.saturating_sub(self.assoc) + rest.saturating_sub(self.assoc)
    }

    /// Mapping conflicts of a random mapping, `C_avg - C_min` (Figure 4).
    pub fn mapping_conflicts(&self, pages: u64) -> f64 {
        self.c_avg(pages) - self.c_min(pages) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact binomial coefficients in u128 for small cases.
    fn binomial(n: u64, k: u64) -> u128 {
        if k > n {
            return 0;
        }
        let mut r: u128 = 1;
        for i in 0..k {
            r = r * u128::from(n - i) / u128::from(i + 1);
        }
        r
    }

    #[test]
    fn equation_1_is_a_distribution_with_the_right_mean() {
        let m = ConflictModel::paper(1).unwrap();
        for pages in [1, 10, 64, 200, 1000, 8192] {
            let total: f64 = (0..=pages).map(|u| m.prob_in_bin(u, pages)).sum();
            let mean: f64 = (0..=pages)
                .map(|u| u as f64 * m.prob_in_bin(u, pages))
                .sum();
            assert!((total - 1.0).abs() < 1e-9, "U={pages}: total {total}");
            assert!(
                (mean - pages as f64 / 64.0).abs() < 1e-8,
                "U={pages}: mean {mean}"
            );
        }
    }

    #[test]
    fn equation_1_matches_exact_integers() {
        // P = 48, B = 4 (12 frames per bin): every term fits in u128.
        let m = ConflictModel::new(48, 4, 1).unwrap();
        for pages in 0..=48 {
            for u in 0..=pages {
                let exact =
                    (binomial(12, u) * binomial(36, pages - u)) as f64 / binomial(48, pages) as f64;
                let got = m.prob_in_bin(u, pages);
                assert!(
                    (got - exact).abs() <= 1e-12 + 1e-10 * exact,
                    "U={pages} u={u}: {got} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn equation_2_agrees_with_its_complement_form() {
        // E[max(0, X - A)] = E[X] - A + E[max(0, A - X)]: a second route to C_avg.
        for assoc in [1, 2, 4, 8] {
            let m = ConflictModel::paper(assoc).unwrap();
            for pages in [0, 5, 64, 100, 256, 4000] {
                let under: f64 = (0..assoc.min(pages + 1))
                    .map(|u| (assoc - u) as f64 * m.prob_in_bin(u, pages))
                    .sum();
                let alt = pages as f64 - (assoc * m.bins()) as f64 + m.bins() as f64 * under;
                assert!((m.c_avg(pages) - alt).abs() < 1e-7, "A={assoc} U={pages}");
            }
        }
    }

    #[test]
    fn bounds_order_and_shape() {
        let m = ConflictModel::paper(1).unwrap();
        assert_eq!(m.c_min(64), 0);
        assert_eq!(m.c_min(100), 36);
        assert_eq!(m.c_max(100), 99, "all 100 pages fit one bin of 128 frames");
        assert_eq!(m.c_max(200), 127 + 71);
        for pages in 0..=512 {
            let avg = m.c_avg(pages);
            assert!(m.c_min(pages) as f64 <= avg + 1e-9 && avg <= m.c_max(pages) as f64 + 1e-9);
        }
        // The worst mapping conflicts are near U = N = 64, about a third of the pages.
        let at_n = m.mapping_conflicts(64);
        assert!((22.0..25.0).contains(&at_n), "{at_n}");
    }
    #[test]
    fn variance_matches_enumeration() {
        // P = 8 frames in B = 2 bins of 4, A = 1: enumerate every U-subset.
        let m = ConflictModel::new(8, 2, 1).unwrap();
        for pages in 0..=8u32 {
            let (mut n, mut sum, mut sum_sq) = (0.0, 0.0, 0.0);
            for set in 0u32..256 {
                if set.count_ones() != pages {
                    continue;
                }
                let in_bin0 = (set & 0b0101_0101).count_ones(); // even frames: bin 0
                let in_bin1 = pages - in_bin0;
                let c = f64::from(in_bin0.saturating_sub(1) + in_bin1.saturating_sub(1));
                n += 1.0;
                sum += c;
                sum_sq += c * c;
            }
            let (mean, var) = (sum / n, sum_sq / n - (sum / n).powi(2));
            assert!(
                (m.c_avg(u64::from(pages)) - mean).abs() < 1e-12,
                "U={pages}"
            );
            assert!(
                (m.c_variance(u64::from(pages)) - var).abs() < 1e-9,
                "U={pages}: {} vs {var}",
                m.c_variance(u64::from(pages))
            );
        }
    }
}

//! Which element an operation touches: uniform, or Zipf with YCSB's constant.
//!
//! Every choice is drawn from xoshiro256++ (`rand_xoshiro::Xoshiro256PlusPlus`)
//! seeded from the run's seed. The Zipf generator is YCSB's `ZipfianGenerator` (Gray
//! et al., "Quickly generating billion-record synthetic databases", SIGMOD 1994) with
//! YCSB's default constant θ = 0.99 over `n` items: rank 0 is the most popular. As in
//! YCSB's scrambled variant, popularity is not tied to position: a rank becomes an
//! element through [`scatter`], a bijective mix, so the hot elements lie all over the
//! structure rather than in one corner of it. Paper 000 gives no more detail than
//! "following a Zipf distribution \[YCSB\]"; this is YCSB's own default. [`Dist::ZipfOrdered`]
//! is YCSB's unscrambled `ZipfianGenerator`: rank r is element r, so the hot elements are
//! the first ones (in a map, the keys inserted first, whose nodes were allocated
//! together) — a sensitivity run for how much of a result comes from where the hot
//! elements lie.

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// YCSB's Zipf constant.
pub const ZIPF_THETA: f64 = 0.99;

/// How operations pick elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dist {
    /// Every element equally likely.
    Uniform,
    /// Zipf with θ = 0.99 (YCSB), popularity scattered over the elements.
    Zipf,
    /// Zipf with θ = 0.99 (YCSB's unscrambled generator): element r has rank r.
    ZipfOrdered,
}

impl Dist {
    /// The name on command lines (`uniform`, `zipf`).
    pub fn name(self) -> &'static str {
        match self {
            Dist::Uniform => "uniform",
            Dist::Zipf => "zipf",
            Dist::ZipfOrdered => "zipf-ordered",
        }
    }

    /// Parses [`Dist::name`].
    pub fn from_name(s: &str) -> Option<Dist> {
        match s {
            "uniform" => Some(Dist::Uniform),
            "zipf" => Some(Dist::Zipf),
            "zipf-ordered" => Some(Dist::ZipfOrdered),
            _ => None,
        }
    }
}

/// A bijection of `[0, n)` onto itself that scatters consecutive ranks (for `n` up to
/// 2^40: a multiplicative step by an odd constant, coprime with `n` when `n` is odd,
/// otherwise cycle-walked through the next power of two).
pub fn scatter(rank: u64, n: u64) -> u64 {
    if n <= 1 {
        return 0;
    }
    let bits = 64 - (n - 1).leading_zeros();
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let mut x = rank;
    // An invertible mix on `bits` bits (xorshift and odd multiply, both bijective
    // modulo 2^bits); cycle-walk until the value falls inside [0, n).
    loop {
        x = (x ^ (x >> (bits / 2).max(1))) & mask;
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15 | 1) & mask;
        x = (x ^ (x >> (bits / 3).max(1))) & mask;
        if x < n {
            return x;
        }
    }
}

/// A 64-bit key for element `rank`: a fixed bijective mix (splitmix64's finalizer),
/// so keys are spread over the whole key space and never zero for ranks below 2^63.
pub fn key_of(rank: u64) -> u64 {
    let mut z = rank.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Draws elements of `[0, n)` by a [`Dist`].
#[derive(Clone, Debug)]
pub struct Picker {
    n: u64,
    zipf: Option<Zipf>,
    /// Ranks become elements through [`scatter`] (YCSB's scrambled variant).
    scattered: bool,
}

#[derive(Clone, Debug)]
struct Zipf {
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Picker {
    /// A picker over `[0, n)` (`n` at least 1). Zipf computes ζ(n, θ) once: O(n).
    pub fn new(n: u64, dist: Dist) -> Picker {
        let n = n.max(1);
        let zipf = matches!(dist, Dist::Zipf | Dist::ZipfOrdered).then(|| {
            let theta = ZIPF_THETA;
            let zetan = zeta(n, theta);
            let zeta2 = zeta(2, theta);
            Zipf {
                alpha: 1.0 / (1.0 - theta),
                zetan,
                eta: (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
                half_pow_theta: 1.0 + 0.5f64.powf(theta),
            }
        });
        Picker {
            n,
            zipf,
            scattered: dist == Dist::Zipf,
        }
    }

    /// How many elements it picks among.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The next element.
    pub fn pick(&self, rng: &mut Xoshiro256PlusPlus) -> u64 {
        match &self.zipf {
            None => rng.gen_range(0..self.n),
            Some(z) if self.scattered => scatter(self.zipf_rank(z, rng), self.n),
            Some(z) => self.zipf_rank(z, rng),
        }
    }

    /// YCSB's `ZipfianGenerator.nextLong` (Gray et al.).
    fn zipf_rank(&self, z: &Zipf, rng: &mut Xoshiro256PlusPlus) -> u64 {
        let u: f64 = rng.r#gen();
        let uz = u * z.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < z.half_pow_theta {
            return 1.min(self.n - 1);
        }
        let r = (self.n as f64 * (z.eta * u - z.eta + 1.0).powf(z.alpha)) as u64;
        r.min(self.n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn scatter_is_a_bijection() {
        for n in [1u64, 2, 3, 10, 64, 1000, 4097] {
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let x = scatter(r, n);
                assert!(x < n);
                assert!(!seen[x as usize], "n {n}: {x} twice");
                seen[x as usize] = true;
            }
        }
    }

    /// Zipf with θ = 0.99: the most popular element takes about 1/ζ(n) of the draws
    /// (for n = 1000, ζ ≈ 7.1: 14 %), and uniform spreads them evenly.
    #[test]
    fn zipf_is_skewed_and_uniform_is_not() {
        let n = 1000;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let count = |p: &Picker, rng: &mut Xoshiro256PlusPlus| {
            let mut c = vec![0u32; n as usize];
            for _ in 0..100_000 {
                c[p.pick(rng) as usize] += 1;
            }
            c
        };
        let z = count(&Picker::new(n, Dist::Zipf), &mut rng);
        let top = *z.iter().max().unwrap() as f64 / 100_000.0;
        let want = 1.0 / zeta(n, ZIPF_THETA);
        assert!((top - want).abs() < 0.01, "top {top}, want {want}");
        let u = count(&Picker::new(n, Dist::Uniform), &mut rng);
        assert!(*u.iter().max().unwrap() < 200, "{:?}", u.iter().max());
    }

    /// The unscrambled variant puts the popular elements first: the first ten elements
    /// take the share of the ten top ranks (ζ(10)/ζ(n), 41 % for n = 1000), the
    /// scrambled one scatters them (its first ten take about the same as any ten).
    #[test]
    fn ordered_zipf_puts_the_hot_elements_first() {
        let n = 1000u64;
        let draws = 100_000;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let first_ten = |p: &Picker, rng: &mut Xoshiro256PlusPlus| {
            (0..draws).filter(|_| p.pick(rng) < 10).count() as f64 / draws as f64
        };
        let want = zeta(10, ZIPF_THETA) / zeta(n, ZIPF_THETA);
        let ordered = first_ten(&Picker::new(n, Dist::ZipfOrdered), &mut rng);
        assert!(
            (ordered - want).abs() < 0.02,
            "ordered {ordered}, want {want}"
        );
        let scrambled = first_ten(&Picker::new(n, Dist::Zipf), &mut rng);
        assert!(
            scrambled < want / 2.0,
            "scrambled {scrambled}, ordered {want}"
        );
        assert_eq!(Dist::from_name("zipf-ordered"), Some(Dist::ZipfOrdered));
    }
}

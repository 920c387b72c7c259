//! The fileset: paths, drawn sizes, and which files exist, shared by the threads of a
//! run through a [`Picker`] (FileBench's per-file busy flag: two threads never work on
//! one file at once).

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::Params;

/// A gamma-distributed sample (Marsaglia & Tsang's method, shape >= 1), as FileBench
/// draws file sizes with `gamma_dist_knuth(1.5, mean / 1.5)`.
pub fn gamma(rng: &mut Xoshiro256PlusPlus, shape: f64, scale: f64) -> f64 {
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        // A standard normal by Box-Muller.
        let u1: f64 = rng.r#gen::<f64>().max(f64::MIN_POSITIVE);
        let u2: f64 = rng.r#gen();
        let x = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = rng.r#gen();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v * scale;
        }
    }
}

/// FileBench's default `filesizegamma` / 1000.
pub const SIZE_GAMMA_SHAPE: f64 = 1.5;

/// The fileset: paths, drawn sizes, and the files that exist before the run.
pub struct Fileset {
    /// Path of every file.
    pub paths: Vec<String>,
    /// Directories to create, parents first.
    pub dirs: Vec<String>,
    /// Drawn size of every file.
    pub sizes: Vec<u64>,
    /// Files that exist before the run (`prealloc` percent, the first ones drawn).
    initial: usize,
    /// Largest size any file may have (KVFS's fixed object size); 0 for no limit.
    pub cap: u64,
}

impl Fileset {
    /// Lays out `p.nfiles` files under `root` and draws their sizes; `p.prealloc`
    /// percent of them (the first ones drawn) are marked existing.
    pub fn new(root: &str, p: &Params, cap: u64, rng: &mut Xoshiro256PlusPlus) -> Fileset {
        let n = p.nfiles.max(1);
        let w = p.meandirwidth.max(2);
        let levels = ((n as f64).ln() / (w as f64).ln()).round().max(1.0) as u32;
        let mut dirs = vec![root.to_string()];
        let mut seen = std::collections::HashSet::new();
        let mut paths = Vec::with_capacity(n);
        for k in 0..n {
            let mut comps = Vec::new();
            let mut rest = k;
            for level in 0..levels {
                // The top level takes whatever is left, so no two files share a path.
                let i = if level + 1 == levels { rest } else { rest % w };
                comps.push(format!("{}{i}", if level == 0 { 'f' } else { 'd' }));
                rest /= w;
            }
            comps.reverse();
            let mut path = root.to_string();
            for (i, c) in comps.iter().enumerate() {
                path.push('/');
                path.push_str(c);
                if i + 1 < comps.len() && seen.insert(path.clone()) {
                    dirs.push(path.clone());
                }
            }
            paths.push(path);
        }
        let scale = p.meanfilesize as f64 / SIZE_GAMMA_SHAPE;
        let sizes = (0..n)
            .map(|_| {
                let s = gamma(rng, SIZE_GAMMA_SHAPE, scale) as u64;
                if cap > 0 { s.min(cap) } else { s }
            })
            .collect();
        let pre = n * p.prealloc.min(100) as usize / 100;
        Fileset {
            paths,
            dirs,
            sizes,
            initial: pre,
            cap,
        }
    }

    /// Files that exist before the run.
    pub fn existing(&self) -> std::ops::Range<usize> {
        0..self.initial
    }
}

/// Which files exist and which a thread is working on: the state the threads of a run
/// share (behind a lock, held only to pick and to note).
pub struct Picker {
    exists: Vec<usize>,
    free: Vec<usize>,
    slot: Vec<usize>,
    busy: Vec<bool>,
}

impl Picker {
    /// The state before the run: the fileset's first files exist, none is busy.
    pub fn new(set: &Fileset) -> Picker {
        let n = set.paths.len();
        let pre = set.initial;
        Picker {
            exists: (0..pre).collect(),
            free: (pre..n).collect(),
            slot: (0..n).map(|k| if k < pre { k } else { k - pre }).collect(),
            busy: vec![false; n],
        }
    }

    /// A file that exists (`existing`) or does not, chosen uniformly, that no other
    /// thread is working on, now marked busy; `None` if there is none. The draw is one
    /// random index; a busy file there yields to the next free one after it.
    pub fn pick(&mut self, existing: bool, rng: &mut Xoshiro256PlusPlus) -> Option<usize> {
        let list = if existing { &self.exists } else { &self.free };
        if list.is_empty() {
            return None;
        }
        let start = rng.gen_range(0..list.len());
        let k = (0..list.len())
            .map(|d| list[(start + d) % list.len()])
            .find(|&k| !self.busy[k])?;
        self.busy[k] = true;
        Some(k)
    }

    /// File `k` is no longer worked on.
    pub fn release(&mut self, k: usize) {
        self.busy[k] = false;
    }

    /// File `k` now exists (`to_exists`) or no longer does.
    pub fn moved(&mut self, k: usize, to_exists: bool) {
        let (from, to) = if to_exists {
            (&mut self.free, &mut self.exists)
        } else {
            (&mut self.exists, &mut self.free)
        };
        let i = self.slot[k];
        from.swap_remove(i);
        if let Some(&m) = from.get(i) {
            self.slot[m] = i;
        }
        self.slot[k] = to.len();
        to.push(k);
    }
}

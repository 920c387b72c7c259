//! The data of the paper's Figures 3 and 4, from the analytic model and optionally a
//! Monte Carlo beside it.

use crate::analytic::ConflictModel;
use crate::monte_carlo::{Estimate, MonteCarloConfig, random_mapping_conflicts};
use crate::{CacheGeometry, OsConfig, OsError, PageSize};

/// What to tabulate.
#[derive(Debug, Clone)]
pub struct FigureConfig {
    /// Main memory in bytes (all of it is the model's `P`).
    pub memory: u64,
    /// Page size.
    pub page_size: PageSize,
    /// Cache size in bytes (`N` = size / page size).
    pub cache_size: u64,
    /// Associativities, one series each in Figure 4.
    pub assocs: Vec<u32>,
    /// Application sizes `U` in pages, ascending.
    pub sizes: Vec<u64>,
    /// A Monte Carlo of random mappings beside the model.
    pub monte_carlo: Option<MonteCarloSpec>,
}

/// The Monte Carlo part of a [`FigureConfig`].
#[derive(Debug, Clone, Copy)]
pub struct MonteCarloSpec {
    /// Trials.
    pub trials: u32,
    /// Pool of available frames in bytes (the paper's 4 MiB by default).
    pub pool: u64,
    /// Master seed (xoshiro256++).
    pub seed: u64,
}

impl FigureConfig {
    /// Figures 3-4: 128 MiB memory, 16 KiB pages, a 1 MiB cache (`N = 64`) of
    /// associativity 1, 2, 4 and 8, applications of 0 to 256 pages (4 `N`) in steps of 8.
    pub fn paper() -> Self {
        FigureConfig {
            memory: 128 << 20,
            page_size: PageSize::KIB_16,
            cache_size: 1 << 20,
            assocs: vec![1, 2, 4, 8],
            sizes: (0..=256).step_by(8).collect(),
            monte_carlo: None,
        }
    }
}

/// One point: application size `U` and associativity `A`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FigurePoint {
    /// Application pages `U`.
    pub pages: u64,
    /// Application size in MiB.
    pub mib: f64,
    /// Associativity `A`.
    pub assoc: u32,
    /// Bins `B`.
    pub bins: u32,
    /// `C_min`.
    pub c_min: u64,
    /// `C_avg` (equation 2).
    pub c_avg: f64,
    /// `C_max`.
    pub c_max: u64,
    /// Standard deviation of `C` under random mapping.
    pub c_std_dev: f64,
    /// `C_avg - C_min` (Figure 4).
    pub mapping_conflicts: f64,
    /// Monte Carlo estimate of `C` under random placement, if run.
    pub mc_conflicts: Option<Estimate>,
}

/// Computes the points, by size then associativity.
pub fn model_figures(config: &FigureConfig) -> Result<Vec<FigurePoint>, OsError> {
    let frames = config.memory / config.page_size.bytes();
    let geometries = config
        .assocs
        .iter()
        .map(|&a| CacheGeometry::new(config.cache_size, a, config.page_size))
        .collect::<Result<Vec<_>, _>>()?;
    let models = geometries
        .iter()
        .map(|g| ConflictModel::new(frames, u64::from(g.bins()), u64::from(g.assoc())))
        .collect::<Result<Vec<_>, _>>()?;
    let mc = match config.monte_carlo {
        None => None,
        Some(spec) => {
            let os = OsConfig::from_bytes(config.memory, spec.pool, config.page_size, 0)?;
            let mc = MonteCarloConfig {
                os,
                geometries: geometries.clone(),
                sizes: config.sizes.clone(),
                trials: spec.trials,
                seed: spec.seed,
            };
            Some(random_mapping_conflicts(&mc)?)
        }
    };
    let mut points = Vec::new();
    for (i, &pages) in config.sizes.iter().enumerate() {
        for (g, (geometry, model)) in geometries.iter().zip(&models).enumerate() {
            points.push(FigurePoint {
                pages,
                mib: (pages * config.page_size.bytes()) as f64 / f64::from(1 << 20),
                assoc: geometry.assoc(),
                bins: geometry.bins(),
                c_min: model.c_min(pages),
                c_avg: model.c_avg(pages),
                c_max: model.c_max(pages),
                c_std_dev: model.c_variance(pages).sqrt(),
                mapping_conflicts: model.mapping_conflicts(pages),
                mc_conflicts: mc.as_ref().map(|m| m[g][i]),
            });
        }
    }
    Ok(points)
}

//! Running the experiments in order, with progress.

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::gups::{GupsRow, GupsShape, reference_checksums};
use super::model_micro::{Figure6Model, Table2Model};
use super::switch::SwitchResult;
use super::{Config, Fig1Row, SpaceJmpError, fig1, gups_model, gups_native, model_micro, switch};

/// Everything measured.
#[derive(Debug, Serialize)]
pub struct Measurements {
    /// Figure 1, native and model.
    pub fig1: Vec<Fig1Row>,
    /// The native switch.
    pub switch: SwitchResult,
    /// Table 2 on the model.
    pub table2_model: Table2Model,
    /// KVM: CR3 cycles, or why not.
    pub kvm_cr3: Result<pmlab_kvmguest::Cr3Cycles, String>,
    /// Figure 6 in the guest, or why not.
    pub kvm_fig6: Result<Vec<pmlab_kvmguest::Figure6Point>, String>,
    /// Figure 6 on the model.
    pub fig6_model: Vec<Figure6Model>,
    /// GUPS rows.
    pub gups: Vec<GupsRow>,
    /// The load average when the run started (the machine is shared).
    pub loadavg: String,
}

fn vas_err(what: &str) -> impl Fn(pmlab_vas::VasError) -> SpaceJmpError + '_ {
    move |source| SpaceJmpError::Vas {
        what: what.into(),
        source,
    }
}

fn bar(config: &Config, len: u64) -> ProgressBar {
    if !config.progress {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template"),
    );
    b
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn check(
    design: &str,
    substrate: &str,
    shape: &GupsShape,
    got: &[u64],
    want: &[u64],
) -> Result<(), SpaceJmpError> {
    if got != want {
        return Err(SpaceJmpError::Wrong(format!(
            "GUPS {design} on {substrate} ({} windows, sets of {}): window checksums differ from the reference",
            shape.windows, shape.update_set
        )));
    }
    Ok(())
}

/// GUPS natively: one row per design, window count and update set.
fn gups_native_rows(config: &Config, b: &ProgressBar) -> Result<Vec<GupsRow>, SpaceJmpError> {
    let mut rows = Vec::new();
    for &u in &config.update_sets {
        for &w in &config.windows {
            let shape = GupsShape {
                window_bytes: config.native_window,
                windows: w,
                update_set: u,
                updates: config.native_updates,
            };
            let want = reference_checksums(&shape, config.seed);
            for design in ["MAP", "MP", "VAS"] {
                b.set_message(format!("GUPS native {design} {w} windows, sets of {u}"));
                let (mut mups, mut rate) = (Vec::new(), Vec::new());
                // At least `reps` runs, and more (up to 50) while they add up to less
                // than half a second: a one-window run takes milliseconds, and one
                // preemption on a shared machine would decide its figure.
                let (mut rep, mut spent) = (0, 0.0);
                while rep < config.reps || (spent < 0.5 && rep < 50) {
                    let io = |source| SpaceJmpError::Io {
                        what: format!("GUPS {design}"),
                        source,
                    };
                    let run = match design {
                        "MAP" => gups_native::run_map(&shape, config.seed).map_err(io)?,
                        "MP" => gups_native::run_mp(&shape, config.seed).map_err(io)?,
                        _ => {
                            let dir = tempfile::Builder::new()
                                .prefix("pmlab-gups")
                                .tempdir_in(&config.scratch)
                                .map_err(io)?;
                            gups_native::run_vas(&shape, config.seed, dir.path())
                                .map_err(vas_err("GUPS VAS"))?
                        }
                    };
                    if rep == 0 {
                        check(design, "native", &shape, &run.checksums, &want)?;
                    }
                    mups.push(shape.updates as f64 / run.seconds / 1e6);
                    rate.push(run.changes as f64 / run.seconds);
                    rep += 1;
                    spent += run.seconds;
                }
                rows.push(GupsRow {
                    design: design.into(),
                    update_set: u,
                    windows: w,
                    substrate: "native".into(),
                    mups: median(mups),
                    changes_per_s: median(rate),
                    tlb_misses_per_s: None,
                });
                b.inc(1);
            }
        }
    }
    Ok(rows)
}

/// GUPS on the model (deterministic: one run each).
fn gups_model_rows(config: &Config, b: &ProgressBar) -> Result<Vec<GupsRow>, SpaceJmpError> {
    let mut rows = Vec::new();
    for &u in &config.update_sets {
        for &w in &config.windows {
            let shape = GupsShape {
                window_bytes: config.model_window,
                windows: w,
                update_set: u,
                updates: config.model_updates,
            };
            let want = reference_checksums(&shape, config.seed);
            for design in ["MAP", "MP", "VAS"] {
                b.set_message(format!("GUPS model {design} {w} windows, sets of {u}"));
                let run = match design {
                    "MAP" => gups_model::run_map(&shape, config.seed),
                    "MP" => gups_model::run_mp(&shape, config.seed),
                    _ => gups_model::run_vas(&shape, config.seed),
                }
                .map_err(vas_err("GUPS on the model"))?;
                check(design, "model", &shape, &run.checksums, &want)?;
                rows.push(GupsRow {
                    design: design.into(),
                    update_set: u,
                    windows: w,
                    substrate: "model".into(),
                    mups: shape.updates as f64 / run.seconds / 1e6,
                    changes_per_s: run.changes as f64 / run.seconds,
                    tlb_misses_per_s: Some(run.tlb_misses as f64 / run.seconds),
                });
                b.inc(1);
            }
        }
    }
    Ok(rows)
}

/// Runs every experiment.
pub fn measure(config: &Config) -> Result<Measurements, SpaceJmpError> {
    let loadavg = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string();
    let gups_runs = (config.update_sets.len() * config.windows.len() * 6) as u64;
    let b = bar(config, gups_runs + 5);
    b.set_message("Figure 1 (native)");
    let mut fig1 = fig1::native(&config.fig1_sizes, config.reps);
    let costs = pmlab_model::OsCostConfig::default();
    fig1.extend(fig1::model(
        &config.fig1_sizes,
        &costs,
        gups_model::machine(1 << 20).cpu.clock_mhz,
    ));
    b.inc(1);
    b.set_message("native vas_switch");
    let dir = tempfile::Builder::new()
        .prefix("pmlab-switch")
        .tempdir_in(&config.scratch)
        .map_err(|source| SpaceJmpError::Io {
            what: "scratch".into(),
            source,
        })?;
    let switch = switch::measure(
        dir.path(),
        &config.switch_segments,
        config.switch_rounds,
        config.reps,
    )
    .map_err(vas_err("native vas_switch"))?;
    b.inc(1);
    b.set_message("Table 2 and Figure 6 on the model");
    let table2_model = model_micro::table2().map_err(vas_err("Table 2 on the model"))?;
    let fig6_model = model_micro::figure6(&config.fig6_pages, config.fig6_accesses, config.seed)
        .map_err(vas_err("Figure 6 on the model"))?;
    b.inc(1);
    b.set_message("KVM guest: CR3 loads and Figure 6");
    let (kvm_cr3, kvm_fig6) = match pmlab_kvmguest::probe() {
        Err(why) => (Err(why.clone()), Err(why)),
        Ok(_) => (
            pmlab_kvmguest::measure_cr3(config.cr3_loads, config.reps.max(5))
                .map_err(|e| e.to_string()),
            pmlab_kvmguest::figure6(&config.fig6_pages, config.fig6_accesses, config.seed)
                .map_err(|e| e.to_string()),
        ),
    };
    b.inc(2);
    let mut gups = gups_native_rows(config, &b)?;
    gups.extend(gups_model_rows(config, &b)?);
    b.finish_and_clear();
    Ok(Measurements {
        fig1,
        switch,
        table2_model,
        kvm_cr3,
        kvm_fig6,
        fig6_model,
        gups,
        loadavg,
    })
}

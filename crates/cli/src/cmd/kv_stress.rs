//! `pmlab kv stress`: writer clients of a fresh store SIGKILLed at random times; after
//! every kill the store must recover, pass its checker and hold every acknowledged SET
//! (`pmlab_kvjmp::stress`).

use std::time::Duration;

use anyhow::Context;
use pmlab_kvjmp::stress::{self, Plan};
use pmlab_kvjmp::{KvStore, Persist};
use pmlab_vas::Mode;
use pmlab_vas::native::MechanismChoice;

/// Arguments of `pmlab kv stress`.
#[derive(clap::Args)]
pub struct Args {
    /// Writers to kill.
    #[arg(long, default_value_t = 20)]
    kills: u32,
    /// Seed of the kill times (xoshiro256++).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Kill times are uniform in [0, this many microseconds) after a writer is ready.
    #[arg(long, default_value_t = 2000)]
    max_delay_us: u64,
    /// Run a deliberately broken variant, which the stress must catch: in-place (SETs
    /// with no log), recovery-skips-replay, or never-recover (SETs that skip recovery).
    #[arg(long, default_value = "correct")]
    variant: String,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// Runs the stress in a fresh temporary registry.
pub fn run(a: Args, mechanism: MechanismChoice, persist: Persist) -> anyhow::Result<()> {
    stress::faults_of(&a.variant).map_err(|e| anyhow::anyhow!("--variant: {e}"))?;
    let dir = tempfile::Builder::new()
        .prefix("pmlab-kv-stress")
        .tempdir_in(pmlab_kvjmp::bench::shm_or_tmp())
        .context("temporary registry")?;
    drop(KvStore::create(
        dir.path(),
        stress::STORE,
        16 << 20,
        Mode(0o600),
        a.seed,
    )?);
    let exe = std::env::current_exe().context("the pmlab executable's path")?;
    let mech_name = pmlab_kvjmp::bench::choice_name(mechanism);
    let worker = || {
        let mut c = std::process::Command::new(&exe);
        c.args(["kv", "--dir"]).arg(dir.path()).args([
            "--mechanism",
            mech_name,
            "--persist",
            persist.name(),
            "stress-worker",
            "--variant",
            &a.variant,
        ]);
        c
    };
    let plan = Plan {
        kills: a.kills,
        seed: a.seed,
        max_delay: Duration::from_micros(a.max_delay_us),
        variant: a.variant.clone(),
        mechanism,
        persist,
    };
    let bar = if a.no_progress {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::with_draw_target(
            Some(u64::from(a.kills)),
            indicatif::ProgressDrawTarget::stderr(),
        )
    };
    let t0 = std::time::Instant::now();
    let r = stress::run(dir.path(), &plan, &worker, &mut || bar.inc(1));
    bar.finish_and_clear();
    let o = r.map_err(|e| anyhow::anyhow!("kv stress ({} variant): {e}", a.variant))?;
    let m = pmlab_vas::native::protect::decide(mechanism).map_or("?".into(), |m| m.to_string());
    println!(
        "kv stress: {} writers SIGKILLed at random times in {:.1} s (seed {}, mechanism {m}, persist {persist}, variant {}); after every kill the next writer's retried SET took over the lock ({} dead holders cleared), recovered where a writer died holding it ({} times), and the checker passed with all {} acknowledged SETs present ({} keys)",
        o.kills,
        t0.elapsed().as_secs_f64(),
        a.seed,
        a.variant,
        o.dead_holders,
        o.repaired,
        o.acked,
        o.keys
    );
    Ok(())
}

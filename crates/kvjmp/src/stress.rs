//! `pmlab kv stress`: writer clients SIGKILLed at random times, and after every kill
//! the store checked against an oracle of acknowledged SETs.
//!
//! Each round starts one writer process (`pmlab kv stress-worker`) that runs the
//! deterministic SET sequence [`op`] from where the previous writer stopped and prints
//! `ack J` after SET `J` returned. Once the writer says it is ready, the driver waits a
//! delay drawn uniformly from `[0, max_delay)` (xoshiro256++ seeded from the run's
//! seed) and SIGKILLs it — often inside a SET, holding the exclusive lock. Then the
//! driver opens the store as the next writer and runs the SET that was in flight
//! again, as a client retrying it would: that SET must take the dead holder's lock
//! over and recover the store by itself (no explicit `recover`: the SET path's own
//! recovery is what is tested), and the store must then pass the checker
//! ([`crate::check`]) and hold exactly every acknowledged SET and the retried one.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pmlab_vas::native::MechanismChoice;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::Persist;
use crate::store::Faults;
use crate::{KvError, KvStore};

/// Keys the SET sequence cycles over (inserts, then replacements of every length).
pub const KEYS: u64 = 512;

/// The store's name in the stress registry.
pub const STORE: &str = "stress";

/// The j-th SET: keys cycle so that SETs insert, grow the table through rehashes,
/// and replace values with longer and shorter ones (new blocks, old ones freed).
pub fn op(j: u64) -> (Vec<u8>, Vec<u8>) {
    (
        format!("key:{:05}", j % KEYS).into_bytes(),
        format!("v{j}-{}", "x".repeat((j % 11) as usize * 7)).into_bytes(),
    )
}

/// The broken variants the stress must catch.
pub fn faults_of(variant: &str) -> Result<Faults, String> {
    match variant {
        "correct" => Ok(Faults::default()),
        "in-place" => Ok(Faults {
            in_place: true,
            ..Faults::default()
        }),
        "recovery-skips-replay" => Ok(Faults {
            tx: pmlab_tx::FaultPlan::broken(pmlab_tx::Fault::RedoRecoverySkipsReplay),
            ..Faults::default()
        }),
        "never-recover" => Ok(Faults {
            never_recover: true,
            ..Faults::default()
        }),
        other => Err(format!(
            "{other:?}: the variants are correct, in-place (no log), recovery-skips-replay and never-recover (SETs that do not recover after a writer died)"
        )),
    }
}

/// The worker's body: SETs from `start` on, each acknowledged on stdout, until killed.
pub fn worker(
    dir: &Path,
    start: u64,
    variant: &str,
    mechanism: MechanismChoice,
    persist: Persist,
) -> Result<(), String> {
    use std::io::Write;
    let faults = faults_of(variant)?;
    let mut s = KvStore::open_with(dir, STORE, true, mechanism)
        .map_err(|e| e.to_string())?
        .with_faults(faults)
        .with_persist(persist);
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")
        .and_then(|()| out.flush())
        .map_err(|e| e.to_string())?;
    for j in start.. {
        let (k, v) = op(j);
        s.set(&k, &v).map_err(|e| e.to_string())?;
        writeln!(out, "ack {j}")
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// What a stress run did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Writers SIGKILLed.
    pub kills: u32,
    /// SETs acknowledged over the run.
    pub acked: u64,
    /// Keys in the store at the end.
    pub keys: usize,
    /// Dead lock holders the next writer reported cleared.
    pub dead_holders: u64,
    /// Rounds whose retried SET ran recovery first (a writer had died holding the lock).
    pub repaired: u32,
}

/// The run's parameters.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Kills.
    pub kills: u32,
    /// Seed of the kill delays.
    pub seed: u64,
    /// Kill delays are uniform in `[0, max_delay)` after the writer is ready.
    pub max_delay: Duration,
    /// Broken variant (`correct` for the real protocol).
    pub variant: String,
    /// Switch mechanism of the writers and the checking client.
    pub mechanism: MechanismChoice,
    /// Persistence domain of the writers and the checking client.
    pub persist: Persist,
}

/// One round: start a writer at `start`, kill it after `delay`; returns the index after
/// its last acknowledged SET and whether it died by SIGKILL.
fn round(worker: &mut Command, start: u64, delay: Duration) -> Result<(u64, bool), String> {
    let mut c = worker
        .arg("--start")
        .arg(start.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting a writer: {e}"))?;
    let mut lines = BufReader::new(c.stdout.take().expect("piped")).lines();
    match lines.next() {
        Some(Ok(l)) if l == "ready" => {}
        other => {
            let _ = c.kill();
            let _ = c.wait();
            return Err(format!("the writer did not get ready: {other:?}"));
        }
    }
    let t = Instant::now();
    while t.elapsed() < delay {
        std::hint::spin_loop();
    }
    let _ = c.kill();
    let mut next = start;
    for l in lines {
        let l = l.map_err(|e| e.to_string())?;
        if let Some(j) = l.strip_prefix("ack ").and_then(|j| j.parse::<u64>().ok()) {
            next = j + 1;
        }
    }
    use std::os::unix::process::ExitStatusExt;
    let st = c.wait().map_err(|e| e.to_string())?;
    Ok((next, st.signal() == Some(libc::SIGKILL)))
}

/// Runs the stress on the (existing, empty) store in `dir`; `worker` builds the
/// command of one writer (the driver adds `--start J`); `tick` after every kill.
pub fn run(
    dir: &Path,
    plan: &Plan,
    worker: &dyn Fn() -> Command,
    tick: &mut dyn FnMut(),
) -> Result<Outcome, String> {
    let faults = faults_of(&plan.variant)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(plan.seed);
    let mut reference: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut out = Outcome::default();
    let mut start = 0;
    let max_ns = plan.max_delay.as_nanos().max(1) as u64;
    while out.kills < plan.kills {
        let delay = Duration::from_nanos(rng.gen_range(0..max_ns));
        let (next, killed) = round(&mut worker(), start, delay)?;
        let at = format!(
            "kill {} (after {} us; SETs {start}..{next} acknowledged)",
            out.kills + 1,
            delay.as_micros()
        );
        if !killed {
            return Err(format!("{at}: the writer ended without being killed"));
        }
        out.kills += 1;
        out.acked += next - start;
        for j in start..next {
            let (k, v) = op(j);
            reference.insert(k, v);
        }
        let (k, v) = op(next);
        reference.insert(k.clone(), v.clone());
        out.keys = verify(dir, plan, faults, &reference, (&k, &v), &mut out)
            .map_err(|e| format!("{at}: {e}"))?;
        // The next writer starts after the in-flight SET, whether it landed or not.
        start = next + 1;
        tick();
    }
    Ok(out)
}

/// Opens the store as the next writer, retries the SET in flight (recovering through
/// the SET path), then runs the checker and the oracle; returns the keys held.
fn verify(
    dir: &Path,
    plan: &Plan,
    faults: Faults,
    reference: &BTreeMap<Vec<u8>, Vec<u8>>,
    (k, v): (&[u8], &[u8]),
    out: &mut Outcome,
) -> Result<usize, String> {
    let err = |what: &str, e: KvError| format!("{what}: {e}");
    let mut s = KvStore::open_with(dir, STORE, true, plan.mechanism)
        .map_err(|e| err("open", e))?
        .with_faults(faults)
        .with_persist(plan.persist);
    s.set(k, v)
        .map_err(|e| err("retrying the SET in flight", e))?;
    out.repaired += u32::from(s.last_recovery().is_some());
    out.dead_holders += s.dead_holders().len() as u64;
    let report = s.check().map_err(|e| err("checker", e))?;
    for (k, v) in &report.contents {
        if reference.get(k) != Some(v) {
            return Err(format!(
                "{} = {:?}, but the acknowledged value is {:?}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v),
                reference
                    .get(k)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            ));
        }
    }
    if let Some(k) = reference.keys().find(|k| !report.contents.contains_key(*k)) {
        return Err(format!(
            "acknowledged key {} lost",
            String::from_utf8_lossy(k)
        ));
    }
    Ok(report.contents.len())
}

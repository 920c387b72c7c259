//! The native `vas_switch`: the time of switching into a VAS of `k` segments and back
//! out (home), by the mechanism this CPU allows, against `k`.

use std::time::Instant;

use pmlab_vas::native::{Mechanism, MechanismChoice, NativeSpaces, Registry};
use pmlab_vas::{Access, AttachTo, Mode, SpaceJmp, VasError};
use serde::Serialize;

/// One segment count.
#[derive(Clone, Debug, Serialize)]
pub struct SwitchRow {
    /// Segments in the VAS.
    pub segments: u32,
    /// Median nanoseconds of a switch in plus a switch out.
    pub ns: f64,
    /// Whether the segments were lockable (their locks taken and released).
    pub lockable: bool,
}

/// What the switch benchmark found.
#[derive(Clone, Debug, Serialize)]
pub struct SwitchResult {
    /// The mechanism that ran.
    pub mechanism: Mechanism,
    /// CPUID's protection-key bits.
    pub pku: pmlab_vas::native::PkuSupport,
    /// Rows by segment count (lockable and not).
    pub rows: Vec<SwitchRow>,
}

/// Measures `rounds` switch pairs per repetition, `reps` repetitions, for each count.
pub fn measure(
    dir: &std::path::Path,
    counts: &[u32],
    rounds: u32,
    reps: usize,
) -> Result<SwitchResult, VasError> {
    Registry::create(dir, 31)?;
    let mut s = NativeSpaces::open_with(dir, MechanismChoice::Auto, false)?;
    let mut rows = Vec::new();
    for &k in counts {
        let v = s.vas_create(&format!("switch{k}"), Mode(0o600))?;
        for i in 0..k {
            let sid = s.seg_alloc(&format!("switch{k}-{i}"), None, 4096, Mode(0o600))?;
            s.seg_attach(AttachTo::Vas(v), sid, Access::ReadWrite)?;
        }
        for lockable in [true, false] {
            for i in 0..k {
                let sid = s.seg_find(&format!("switch{k}-{i}"))?;
                s.seg_ctl(sid, pmlab_vas::SegCtl::SetLockable(lockable))?;
            }
            // Lockability is read at attach.
            let vh = s.vas_attach(v)?;
            let mut samples = Vec::new();
            for _ in 0..reps.max(1) {
                let t = Instant::now();
                for _ in 0..rounds {
                    s.vas_switch(vh)?;
                    s.vas_switch_home()?;
                }
                samples.push(t.elapsed().as_nanos() as f64 / f64::from(rounds.max(1)));
            }
            samples.sort_by(f64::total_cmp);
            rows.push(SwitchRow {
                segments: k,
                ns: samples[samples.len() / 2],
                lockable,
            });
            s.vas_detach(vh)?;
        }
    }
    Ok(SwitchResult {
        mechanism: s.mechanism(),
        pku: pmlab_vas::native::pku_support(),
        rows,
    })
}

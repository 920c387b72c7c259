//! A minimal KVM guest whose page tables pmlab builds, for SpaceJMP's hardware
//! measurements: the cost of a CR3 load with and without a PCID tag (Table 2) and the
//! random page-access benchmark with a CR3 write between accesses (Figure 6), in
//! cycles read with `rdtsc` inside the guest.
//!
//! The guest runs in 64-bit mode at CPL 0 with no operating system: pmlab sets its
//! registers and control registers through KVM, writes its page tables into guest
//! memory (an identity map of the first 32 MiB in global 2 MiB pages for code, stack
//! and data; the working set in 4 KiB pages at 1 GiB), and assembles its code at run
//! time with `iced-x86`. A tagged run sets CR4.PCIDE and loads CR3 with PCID 1 and the
//! no-flush bit (bit 63); an untagged run loads CR3 without PCIDE, which flushes every
//! non-global TLB entry. Where `/dev/kvm` is missing or refuses, [`probe`] says why and
//! nothing is measured; where KVM does not offer PCID to guests, tagged figures are
//! `None`.

mod code;
mod guest;
mod layout;

pub use guest::{Guest, GuestError};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

/// Whether a KVM guest can run here: `Ok(description)` or the reason it cannot.
pub fn probe() -> Result<String, String> {
    let kvm = kvm_ioctls::Kvm::new().map_err(|e| format!("/dev/kvm: {e}"))?;
    let pcid = guest::kvm_offers_pcid(&kvm);
    Ok(format!(
        "KVM API {} ({}), PCID offered to guests: {pcid}",
        kvm.get_api_version(),
        hypervisor()
    ))
}

/// Which KVM this is, from the loaded modules: hardware-assisted (`kvm_intel`,
/// `kvm_amd`) or PVM (`kvm_pvm`, page-table-based virtualization without VMX, which
/// traps and emulates privileged instructions such as a CR3 load, so its cycle counts
/// are the hypervisor's, not the hardware's).
pub fn hypervisor() -> &'static str {
    let has = |m: &str| std::path::Path::new("/sys/module").join(m).exists();
    if has("kvm_intel") {
        "kvm_intel: hardware VMX"
    } else if has("kvm_amd") {
        "kvm_amd: hardware SVM"
    } else if has("kvm_pvm") {
        "kvm_pvm: software PVM, CR3 loads trapped and emulated"
    } else {
        "unknown KVM flavour"
    }
}

/// Cycles of one CR3 load.
#[derive(Clone, Debug, Serialize)]
pub struct Cr3Cycles {
    /// CR3 load without a tag (flushes the TLB): median cycles per load.
    pub untagged: f64,
    /// CR3 load with PCID and the no-flush bit, if the guest can have PCID.
    pub tagged: Option<f64>,
    /// Why there is no tagged figure, if there is none.
    pub tagged_missing: Option<String>,
    /// Loads per timed loop.
    pub loads: u64,
    /// The hypervisor the guest ran on ([`hypervisor`]).
    pub hypervisor: String,
    /// Timed loops (repetitions); figures are medians.
    pub reps: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Measures CR3 loads: `loads` per loop, `reps` loops, minus the same loop without
/// the load (its overhead), median per load.
pub fn measure_cr3(loads: u64, reps: usize) -> Result<Cr3Cycles, GuestError> {
    let per_load = |tagged: bool| -> Result<f64, GuestError> {
        let mut g = Guest::new(1, tagged)?;
        let mut v = Vec::new();
        for _ in 0..reps.max(1) {
            let with = g.run_cr3_loop(loads, true)? as f64;
            let without = g.run_cr3_loop(loads, false)? as f64;
            v.push((with - without).max(0.0) / loads as f64);
        }
        Ok(median(v))
    };
    let untagged = per_load(false)?;
    let (tagged, tagged_missing) = match per_load(true) {
        Ok(t) => (Some(t), None),
        Err(GuestError::NoPcid(why)) => (None, Some(why)),
        Err(e) => return Err(e),
    };
    Ok(Cr3Cycles {
        untagged,
        tagged,
        tagged_missing,
        loads,
        reps,
        hypervisor: hypervisor().into(),
    })
}

/// One working-set size of Figure 6: mean cycles to load one line of a random page.
#[derive(Clone, Debug, Serialize)]
pub struct Figure6Point {
    /// Pages in the working set (4 KiB each).
    pub pages: u64,
    /// No CR3 write between accesses.
    pub no_switch: f64,
    /// An untagged CR3 write (TLB flushed) between accesses.
    pub untagged: f64,
    /// A tagged CR3 write (PCID, no flush) between accesses, if PCID is available.
    pub tagged: Option<f64>,
}

/// Figure 6: for each working set, `accesses` loads of one random line of a random page
/// (xoshiro256++ seeded with `seed`), timed one by one.
pub fn figure6(
    working_sets: &[u64],
    accesses: u64,
    seed: u64,
) -> Result<Vec<Figure6Point>, GuestError> {
    let max_pages = working_sets.iter().copied().max().unwrap_or(1);
    let mut plain = Guest::new(max_pages, false)?;
    let mut tagged = match Guest::new(max_pages, true) {
        Ok(g) => Some(g),
        Err(GuestError::NoPcid(_)) => None,
        Err(e) => return Err(e),
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut out = Vec::new();
    for &pages in working_sets {
        let offsets: Vec<u64> = (0..accesses)
            .map(|_| rng.gen_range(0..pages) * 4096 + rng.gen_range(0..64u64) * 64)
            .collect();
        plain.load_offsets(&offsets)?;
        // One untimed pass warms the caches and the TLB as far as they reach.
        plain.run_access_loop(accesses, false)?;
        let no_switch = plain.run_access_loop(accesses, false)?.0 as f64 / accesses as f64;
        let untagged = plain.run_access_loop(accesses, true)?.0 as f64 / accesses as f64;
        let tagged = match &mut tagged {
            Some(g) => {
                g.load_offsets(&offsets)?;
                g.run_access_loop(accesses, true)?;
                Some(g.run_access_loop(accesses, true)?.0 as f64 / accesses as f64)
            }
            None => None,
        };
        out.push(Figure6Point {
            pages,
            no_switch,
            untagged,
            tagged,
        });
    }
    Ok(out)
}

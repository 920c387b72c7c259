//! How `vas_switch` changes what the process may touch: protection keys where the CPU
//! and kernel have them (one `WRPKRU`, no system call), `mprotect` otherwise, or —
//! only when asked for — nothing at all (`resident`).
//!
//! The choice is made at run time: CPUID leaf 7 ECX bit 3 (PKU) and bit 4 (OSPKE, the
//! kernel enabled it), then a `pkey_alloc` that must succeed. Where either fails the
//! `mprotect` path runs, and [`Mechanism`] says so in every report.
//!
//! # The `resident` mechanism and what it gives up
//!
//! SpaceJMP's switch installs another page-table root: what the target VAS maps
//! becomes reachable and what the previous one mapped stops being so, in one step
//! with no per-page work where the TLB is tagged. Linux gives a process one page
//! table, so the `mprotect` path emulates that by changing every present entry of the
//! segments that come and go — a system call and, on a paravirtualised guest where
//! each page-table change traps into the hypervisor, a cost that grows with the pages
//! touched. `resident` is the other reading of the same design: since every global
//! segment already has one fixed, machine-wide unique address (`MAP_FIXED_NOREPLACE`),
//! the union of the VASes a process attaches *is* a single address space whose parts
//! never overlap, so switching between them need not change a page table at all.
//! Every attached segment stays mapped, from attach to detach, with exactly the
//! rights the kernel granted at attach: read-write only if the process opened the
//! segment file for writing (the kernel checked its permission), otherwise
//! `PROT_READ` — a party that may not write still holds no writable mapping. A switch
//! only changes the active VAS, takes the new VAS's segment locks and releases the
//! old one's, and counts: no system call, no page-table change.
//!
//! What it does not enforce: a segment of a VAS that is switched *out* stays reachable
//! from the same process (a stray pointer reaches it without the lock, and a process
//! that attached a segment read-write in one VAS may write it while switched into a
//! VAS that holds it read-only). Isolation between VASes of one process is then the
//! program's discipline (the branded pointers of `crate::brand` and the lock
//! protocol), not the MMU's; isolation between processes and users is unchanged,
//! since it never came from switching but from the kernel's file permissions at
//! attach. We think the paper's authors would accept this as the equivalent of their
//! switch where no tagged page-table switch is available to user space: a SpaceJMP
//! VAS is a set of non-overlapping segments, each at the base address `seg_alloc` gave
//! it (Figure 3) in every VAS that holds it, and §3.3 already leaves cross-VAS pointer safety to the
//! program. What neither this backend (for any mechanism) nor `resident` offers is the
//! paper's other use of separate page tables, VASes whose segments overlap one another
//! (§2.4): every global segment here has a machine-wide unique address. And it is not
//! a protection boundary inside a process, so `resident` is
//! never chosen by `Auto` and its name is printed beside every figure it produced.

use std::fmt;

/// The mechanism a process's switches use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Mechanism {
    /// `pkey_mprotect` once per segment at attach, `WRPKRU` per switch.
    Pkeys,
    /// `mprotect` of every segment whose access changes, per switch.
    Mprotect,
    /// Nothing per switch: every attached segment stays mapped with the rights granted
    /// at attach (read-only unless the kernel let the process open it for writing);
    /// a switched-out segment stays reachable from the process (see the module docs).
    Resident,
}

impl Mechanism {
    /// `pkeys`, `mprotect` or `resident`.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Pkeys => "pkeys",
            Mechanism::Mprotect => "mprotect",
            Mechanism::Resident => "resident",
        }
    }

    /// Whether a switched-out segment becomes unreachable from the process (false
    /// only for `resident`).
    pub fn isolates_switched_out(self) -> bool {
        self != Mechanism::Resident
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which mechanism to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MechanismChoice {
    /// Protection keys if the CPU and kernel offer them, else `mprotect`.
    #[default]
    Auto,
    /// `mprotect` even where keys exist (to compare).
    Mprotect,
    /// Protection keys, or an error where there are none.
    Pkeys,
    /// No protection change per switch (never chosen by `Auto`; see the module docs).
    Resident,
}

impl MechanismChoice {
    /// Parses `auto`, `pkeys`, `mprotect` or `resident`.
    pub fn parse(s: &str) -> Result<MechanismChoice, String> {
        match s {
            "auto" => Ok(MechanismChoice::Auto),
            "pkeys" => Ok(MechanismChoice::Pkeys),
            "mprotect" => Ok(MechanismChoice::Mprotect),
            "resident" => Ok(MechanismChoice::Resident),
            other => Err(format!(
                "{other:?}: the mechanisms are auto, pkeys, mprotect and resident"
            )),
        }
    }
}

/// What CPUID says about protection keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PkuSupport {
    /// CPUID.(7,0):ECX\[3\]: the CPU has protection keys for user pages.
    pub pku: bool,
    /// CPUID.(7,0):ECX\[4\]: the OS enabled them (CR4.PKE).
    pub ospke: bool,
}

/// Reads CPUID leaf 7.
pub fn pku_support() -> PkuSupport {
    #[cfg(target_arch = "x86_64")]
    {
        let max = std::arch::x86_64::__cpuid(0).eax;
        if max >= 7 {
            let l7 = std::arch::x86_64::__cpuid_count(7, 0);
            return PkuSupport {
                pku: l7.ecx & (1 << 3) != 0,
                ospke: l7.ecx & (1 << 4) != 0,
            };
        }
    }
    PkuSupport {
        pku: false,
        ospke: false,
    }
}

/// Allocates a protection key with all access disabled by default, or `None`.
pub fn pkey_alloc() -> Option<u32> {
    // SAFETY: pkey_alloc takes two integer arguments and has no memory effects.
    let k = unsafe { libc::syscall(libc::SYS_pkey_alloc, 0, 0) };
    (k > 0).then_some(k as u32)
}

/// Frees a protection key.
pub fn pkey_free(key: u32) {
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_pkey_free, key) };
}

/// `pkey_mprotect(addr, len, prot, key)`.
///
/// # Safety
/// `[addr, addr + len)` must be a mapping this process owns.
pub unsafe fn pkey_mprotect(addr: u64, len: u64, prot: i32, key: u32) -> std::io::Result<()> {
    // SAFETY: the caller owns the range.
    let r = unsafe { libc::syscall(libc::SYS_pkey_mprotect, addr, len, prot, key) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Writes PKRU (2 bits per key: access-disable, write-disable).
///
/// # Safety
/// Only where [`pku_support`] reports `ospke`; otherwise the instruction faults.
#[cfg(target_arch = "x86_64")]
pub unsafe fn wrpkru(pkru: u32) {
    // SAFETY: the caller checked OSPKE; WRPKRU needs ECX = EDX = 0.
    unsafe {
        std::arch::asm!("wrpkru", in("eax") pkru, in("ecx") 0, in("edx") 0, options(nostack))
    };
}

/// Decides the mechanism for `choice` on this machine; `Err` names why protection keys
/// were asked for and are not there.
pub fn decide(choice: MechanismChoice) -> Result<Mechanism, String> {
    let usable = || {
        // `pkey_alloc` first: a system call, where CPUID is a VM exit on virtual machines
        // (about 15 µs each here) and every process reaching a VAS decides. The kernel
        // hands out keys only where the CPU has PKU and it enabled them (OSPKE), so a
        // failure means no keys; a success is confirmed by CPUID before WRPKRU is used.
        let key = pkey_alloc();
        let errno = std::io::Error::last_os_error();
        if let Some(k) = key {
            pkey_free(k);
        }
        let s = pku_support();
        if !(s.pku && s.ospke) {
            return Err(format!(
                "this CPU has no usable protection keys (PKU {}, OSPKE {})",
                s.pku, s.ospke
            ));
        }
        match key {
            Some(_) => Ok(Mechanism::Pkeys),
            None => Err(format!("pkey_alloc failed: {errno}")),
        }
    };
    match choice {
        MechanismChoice::Mprotect => Ok(Mechanism::Mprotect),
        MechanismChoice::Resident => Ok(Mechanism::Resident),
        MechanismChoice::Pkeys => usable(),
        MechanismChoice::Auto => Ok(match pkey_alloc() {
            Some(k) => {
                pkey_free(k);
                usable().unwrap_or(Mechanism::Mprotect)
            }
            None => Mechanism::Mprotect,
        }),
    }
}

/// The PKRU value that allows exactly `keys` (read-write or read-only) and key 0, the
/// default key of all other memory.
pub fn pkru_allowing(keys: impl IntoIterator<Item = (u32, bool)>) -> u32 {
    // Every key but 0 access-disabled...
    let mut pkru: u32 = 0;
    for k in 1..16 {
        pkru |= 0b01 << (2 * k);
    }
    for (k, writable) in keys {
        pkru &= !(0b11 << (2 * k));
        if !writable {
            pkru |= 0b10 << (2 * k);
        }
    }
    pkru
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkru_values() {
        assert_eq!(pkru_allowing([]) & 0b11, 0, "key 0 stays open");
        let p = pkru_allowing([(1, true), (2, false)]);
        assert_eq!((p >> 2) & 0b11, 0);
        assert_eq!((p >> 4) & 0b11, 0b10);
        assert_eq!((p >> 6) & 0b11, 0b01);
    }

    /// Where the CPU has no PKU (this project's machines), asking for keys is an
    /// error and `Auto` falls back to mprotect; where it has them, `Auto` picks keys.
    #[test]
    fn the_choice_follows_cpuid() {
        let s = pku_support();
        let auto = decide(MechanismChoice::Auto).unwrap();
        if s.pku && s.ospke {
            assert_eq!(auto, Mechanism::Pkeys);
        } else {
            assert_eq!(auto, Mechanism::Mprotect);
            let e = decide(MechanismChoice::Pkeys).unwrap_err();
            assert!(e.contains("no usable protection keys"), "{e}");
        }
        assert_eq!(
            decide(MechanismChoice::Mprotect).unwrap(),
            Mechanism::Mprotect
        );
        assert_eq!(
            decide(MechanismChoice::Resident).unwrap(),
            Mechanism::Resident
        );
        for (s, c) in [
            ("auto", MechanismChoice::Auto),
            ("resident", MechanismChoice::Resident),
        ] {
            assert_eq!(MechanismChoice::parse(s).unwrap(), c);
        }
        assert!(
            MechanismChoice::parse("cr3")
                .unwrap_err()
                .contains("resident")
        );
    }
}

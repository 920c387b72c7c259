//! How `vas_switch` changes what the process may touch: protection keys where the CPU
//! and kernel have them (one `WRPKRU`, no system call), `mprotect` otherwise.
//!
//! The choice is made at run time: CPUID leaf 7 ECX bit 3 (PKU) and bit 4 (OSPKE, the
//! kernel enabled it), then a `pkey_alloc` that must succeed. Where either fails the
//! `mprotect` path runs, and [`Mechanism`] says so in every report.

use std::fmt;

/// The mechanism a process's switches use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Mechanism {
    /// `pkey_mprotect` once per segment at attach, `WRPKRU` per switch.
    Pkeys,
    /// `mprotect` of every segment whose access changes, per switch.
    Mprotect,
}

impl Mechanism {
    /// `pkeys` or `mprotect`.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Pkeys => "pkeys",
            Mechanism::Mprotect => "mprotect",
        }
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
    let s = pku_support();
    let usable = || {
        if !(s.pku && s.ospke) {
            return Err(format!(
                "this CPU has no usable protection keys (PKU {}, OSPKE {})",
                s.pku, s.ospke
            ));
        }
        match pkey_alloc() {
            Some(k) => {
                pkey_free(k);
                Ok(Mechanism::Pkeys)
            }
            None => Err(format!(
                "pkey_alloc failed: {}",
                std::io::Error::last_os_error()
            )),
        }
    };
    match choice {
        MechanismChoice::Mprotect => Ok(Mechanism::Mprotect),
        MechanismChoice::Pkeys => usable(),
        MechanismChoice::Auto => Ok(usable().unwrap_or(Mechanism::Mprotect)),
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
    }
}

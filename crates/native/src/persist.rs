//! Persist primitives: which cache write-back instruction this CPU has, and the
//! instructions themselves.
//!
//! The choice is made at run time from CPUID (leaf 1 EDX bit 19 for `clflush`, leaf 7
//! EBX bits 23 and 24 for `clflushopt` and `clwb`): `clwb` if present (writes back and
//! keeps the line cached), else `clflushopt` (weakly ordered, invalidates), else
//! `clflush` (ordered, invalidates); each followed by `sfence` at a fence. For files on
//! an ordinary disk file system a CPU flush only reaches the page cache, so those
//! regions use [`PersistMode::Msync`] instead. Other architectures get
//! [`PersistMode::Portable`], a full memory fence with no write-back instruction.

use std::fmt;

use pmlab_spine::LINE;

/// How a region makes stores durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PersistMode {
    /// `clwb` per line, `sfence` per fence.
    Clwb,
    /// `clflushopt` per line, `sfence` per fence.
    Clflushopt,
    /// `clflush` per line (ordered by itself), `sfence` per fence.
    Clflush,
    /// Flushes record dirty pages; a fence writes them back with `msync(MS_SYNC)`.
    Msync,
    /// No write-back instruction: a sequentially consistent fence only. Durable only
    /// as far as the medium behind the mapping is (tmpfs, memfd: while the machine runs).
    Portable,
}

impl PersistMode {
    /// All modes, strongest CPU instruction first.
    pub const ALL: [PersistMode; 5] = [
        PersistMode::Clwb,
        PersistMode::Clflushopt,
        PersistMode::Clflush,
        PersistMode::Msync,
        PersistMode::Portable,
    ];

    /// The mode's name as the CLI prints and parses it.
    pub fn name(self) -> &'static str {
        match self {
            PersistMode::Clwb => "clwb",
            PersistMode::Clflushopt => "clflushopt",
            PersistMode::Clflush => "clflush",
            PersistMode::Msync => "msync",
            PersistMode::Portable => "portable",
        }
    }

    /// Parses a name printed by [`PersistMode::name`].
    pub fn from_name(name: &str) -> Option<PersistMode> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether this mode issues a CPU cache-line instruction per flushed line.
    pub fn is_cpu_flush(self) -> bool {
        matches!(
            self,
            PersistMode::Clwb | PersistMode::Clflushopt | PersistMode::Clflush
        )
    }
}

impl fmt::Display for PersistMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The cache write-back instructions this CPU offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CpuPersistFeatures {
    /// CPUID.1:EDX\[19\].
    pub clflush: bool,
    /// CPUID.(7,0):EBX\[23\].
    pub clflushopt: bool,
    /// CPUID.(7,0):EBX\[24\].
    pub clwb: bool,
}

impl CpuPersistFeatures {
    /// Reads CPUID (all false on other architectures).
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        #[allow(unused_unsafe)]
        {
            // `__cpuid` became a safe function in Rust 1.89; the block keeps 1.85 building.
            // SAFETY: CPUID exists on every x86_64 CPU; leaf 7 is queried only when the
            // maximum basic leaf reports it.
            let (leaf1, max) = unsafe {
                let l0 = core::arch::x86_64::__cpuid(0);
                (core::arch::x86_64::__cpuid(1), l0.eax)
            };
            let leaf7_ebx = if max >= 7 {
                // SAFETY: leaf 7 exists (checked against the maximum leaf).
                unsafe { core::arch::x86_64::__cpuid_count(7, 0).ebx }
            } else {
                0
            };
            CpuPersistFeatures {
                clflush: leaf1.edx & (1 << 19) != 0,
                clflushopt: leaf7_ebx & (1 << 23) != 0,
                clwb: leaf7_ebx & (1 << 24) != 0,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            CpuPersistFeatures::default()
        }
    }

    /// The best CPU mode: clwb, else clflushopt, else clflush, else portable.
    pub fn best_mode(self) -> PersistMode {
        if self.clwb {
            PersistMode::Clwb
        } else if self.clflushopt {
            PersistMode::Clflushopt
        } else if self.clflush {
            PersistMode::Clflush
        } else {
            PersistMode::Portable
        }
    }

    /// Whether this CPU can execute `mode`.
    pub fn supports(self, mode: PersistMode) -> bool {
        match mode {
            PersistMode::Clwb => self.clwb,
            PersistMode::Clflushopt => self.clflushopt,
            PersistMode::Clflush => self.clflush,
            PersistMode::Msync | PersistMode::Portable => true,
        }
    }
}

/// Writes back every line overlapping `[ptr, ptr + len)` with the instruction of `mode`
/// (which must be a CPU mode this CPU supports; other modes execute no instruction), then
/// charges the lines to the SCM write model ([`crate::scm_model`]). Non-CPU modes are
/// charged too: their lines reach the memory all the same, by `msync` or not at all
/// beyond the cache, and the model stands for the memory, not for the instruction.
///
/// # Safety
/// `[ptr, ptr + len)` must lie inside one live mapping.
pub(crate) unsafe fn flush_lines(mode: PersistMode, ptr: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    let start = (ptr as usize) & !(LINE as usize - 1);
    let end = ptr as usize + len;
    let mut p = start;
    while p < end {
        // SAFETY: p lies in a line that overlaps the caller's live mapping; the flush
        // instructions only need the address to be mapped.
        unsafe { flush_line(mode, p as *const u8) };
        p += LINE as usize;
    }
    crate::scm_model::charge_lines(((end - start) as u64).div_ceil(LINE));
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn flush_line(mode: PersistMode, p: *const u8) {
    use std::arch::asm;
    // SAFETY (all arms): the caller guarantees p is mapped and the CPU has the
    // instruction (the region only selects supported modes).
    unsafe {
        match mode {
            PersistMode::Clwb => asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags)),
            PersistMode::Clflushopt => {
                asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
            }
            PersistMode::Clflush => core::arch::x86_64::_mm_clflush(p),
            PersistMode::Msync | PersistMode::Portable => {}
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn flush_line(_mode: PersistMode, _p: *const u8) {}

/// Orders earlier flushes and stores before later ones.
#[inline]
pub(crate) fn store_fence(mode: PersistMode) {
    #[cfg(target_arch = "x86_64")]
    if mode.is_cpu_flush() {
        // SAFETY: sfence is part of SSE, which every x86_64 CPU has.
        unsafe { core::arch::x86_64::_mm_sfence() };
        return;
    }
    let _ = mode;
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in PersistMode::ALL {
            assert_eq!(PersistMode::from_name(m.name()), Some(m));
        }
        assert_eq!(PersistMode::from_name("wbinvd"), None);
    }

    #[test]
    fn best_mode_prefers_clwb() {
        let all = CpuPersistFeatures {
            clflush: true,
            clflushopt: true,
            clwb: true,
        };
        assert_eq!(all.best_mode(), PersistMode::Clwb);
        let opt = CpuPersistFeatures { clwb: false, ..all };
        assert_eq!(opt.best_mode(), PersistMode::Clflushopt);
        let old = CpuPersistFeatures {
            clflush: true,
            ..Default::default()
        };
        assert_eq!(old.best_mode(), PersistMode::Clflush);
        assert_eq!(
            CpuPersistFeatures::default().best_mode(),
            PersistMode::Portable
        );
    }

    #[test]
    fn detected_instructions_execute() {
        let cpu = CpuPersistFeatures::detect();
        let buf = vec![7u8; 4096];
        for m in PersistMode::ALL
            .into_iter()
            .filter(|m| m.is_cpu_flush() && cpu.supports(*m))
        {
            // SAFETY: buf is a live allocation of 4096 bytes.
            unsafe { flush_lines(m, buf.as_ptr().wrapping_add(5), 200) };
            store_fence(m);
        }
        assert!(buf.iter().all(|&b| b == 7));
    }
}

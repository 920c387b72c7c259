//! One VM with one vCPU in 64-bit mode, its memory and page tables.

use kvm_bindings::{CpuId, KVM_MAX_CPUID_ENTRIES, kvm_segment, kvm_userspace_memory_region};
use kvm_ioctls::{Kvm, VcpuExit, VcpuFd, VmFd};

use crate::code;
use crate::layout::{self, CODE, MAX_OFFSETS, MAX_PAGES, OFFSETS, PML4, STACK_TOP};

/// Why the guest could not run or measure.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// `/dev/kvm` is missing or an ioctl failed.
    #[error("KVM: {0}")]
    Kvm(String),
    /// The guest cannot have PCID here.
    #[error("PCID unavailable in the guest: {0}")]
    NoPcid(String),
    /// The guest stopped other than by `hlt`.
    #[error("the guest stopped unexpectedly: {0}")]
    Exit(String),
    /// A request beyond the guest's layout.
    #[error("{0}")]
    TooLarge(String),
    /// The code did not assemble.
    #[error("assembling the guest's code: {0}")]
    Asm(#[from] iced_x86::IcedError),
}

fn kvm_err(what: &str) -> impl Fn(kvm_ioctls::Error) -> GuestError + '_ {
    move |e| GuestError::Kvm(format!("{what}: {e}"))
}

/// Whether KVM reports PCID (CPUID.1:ECX\[17\]) among the features it supports for guests.
pub fn kvm_offers_pcid(kvm: &Kvm) -> bool {
    kvm.get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        .map(|c| {
            c.as_slice()
                .iter()
                .any(|e| e.function == 1 && e.ecx & (1 << 17) != 0)
        })
        .unwrap_or(false)
}

/// A running guest.
pub struct Guest {
    _vm: VmFd,
    vcpu: VcpuFd,
    mem: *mut u8,
    len: usize,
    pcid: bool,
}

impl Drop for Guest {
    fn drop(&mut self) {
        // SAFETY: our own anonymous mapping, which the VM (dropped first) no longer uses.
        unsafe { libc::munmap(self.mem.cast(), self.len) };
    }
}

fn segment(selector: u16, code: bool) -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector,
        type_: if code { 11 } else { 3 },
        present: 1,
        dpl: 0,
        db: u8::from(!code),
        s: 1,
        l: u8::from(code),
        g: 1,
        avl: 0,
        unusable: 0,
        padding: 0,
    }
}

impl Guest {
    /// A guest with a working set of `pages` 4 KiB pages; `pcid`: CR4.PCIDE set (an
    /// error [`GuestError::NoPcid`] if KVM refuses it).
    pub fn new(pages: u64, pcid: bool) -> Result<Guest, GuestError> {
        if pages == 0 || pages > MAX_PAGES {
            return Err(GuestError::TooLarge(format!(
                "{pages} pages: the guest maps 1 to {MAX_PAGES}"
            )));
        }
        let kvm = Kvm::new().map_err(kvm_err("open /dev/kvm"))?;
        let vm = kvm.create_vm().map_err(kvm_err("create VM"))?;
        let vcpu = vm.create_vcpu(0).map_err(kvm_err("create vCPU"))?;
        let len = layout::memory_bytes(pages) as usize;
        // SAFETY: a fresh anonymous mapping.
        let mem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if mem == libc::MAP_FAILED {
            return Err(GuestError::Kvm(format!(
                "guest memory: {}",
                std::io::Error::last_os_error()
            )));
        }
        let mut g = Guest {
            _vm: vm,
            vcpu,
            mem: mem.cast(),
            len,
            pcid,
        };
        let region = kvm_userspace_memory_region {
            slot: 0,
            guest_phys_addr: 0,
            memory_size: len as u64,
            userspace_addr: mem as u64,
            flags: 0,
        };
        // SAFETY: the region is our mapping, alive as long as the VM.
        unsafe { g._vm.set_user_memory_region(region) }.map_err(kvm_err("set memory"))?;
        layout::write_tables(g.memory(), pages);
        g.set_cpuid(&kvm)?;
        g.set_long_mode()?;
        Ok(g)
    }

    fn memory(&mut self) -> &mut [u8] {
        // SAFETY: our mapping of `len` bytes, borrowed through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.mem, self.len) }
    }

    fn set_cpuid(&mut self, kvm: &Kvm) -> Result<(), GuestError> {
        let mut cpuid: CpuId = kvm
            .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
            .map_err(kvm_err("supported CPUID"))?;
        if self.pcid {
            // Advertise PCID even where KVM does not list it: KVM then decides whether
            // CR4.PCIDE can be set, and refuses it if the hardware cannot.
            for e in cpuid.as_mut_slice() {
                if e.function == 1 {
                    e.ecx |= 1 << 17;
                }
            }
        }
        self.vcpu.set_cpuid2(&cpuid).map_err(kvm_err("set CPUID"))
    }

    fn set_long_mode(&mut self) -> Result<(), GuestError> {
        let mut s = self.vcpu.get_sregs().map_err(kvm_err("get sregs"))?;
        s.cs = segment(8, true);
        for seg in [&mut s.ds, &mut s.es, &mut s.fs, &mut s.gs, &mut s.ss] {
            *seg = segment(16, false);
        }
        s.cr3 = PML4;
        // PAE | PGE | OSFXSR | OSXMMEXCPT, and PCIDE for a tagged guest.
        s.cr4 = (1 << 5) | (1 << 7) | (1 << 9) | (1 << 10) | if self.pcid { 1 << 17 } else { 0 };
        // PE | MP | ET | NE | WP | PG.
        s.cr0 = 0x8005_0033;
        // LME | LMA.
        s.efer = 0x500;
        self.vcpu.set_sregs(&s).map_err(|e| {
            if self.pcid {
                GuestError::NoPcid(format!("KVM refused CR4.PCIDE: {e}"))
            } else {
                GuestError::Kvm(format!("set sregs: {e}"))
            }
        })?;
        if self.pcid {
            let back = self.vcpu.get_sregs().map_err(kvm_err("get sregs"))?;
            if back.cr4 & (1 << 17) == 0 {
                return Err(GuestError::NoPcid("CR4.PCIDE did not stick".into()));
            }
        }
        Ok(())
    }

    /// The CR3 value a switch loads: with PCID, tag 1 and the no-flush bit.
    fn cr3_value(&self) -> u64 {
        if self.pcid {
            PML4 | 1 | (1 << 63)
        } else {
            PML4
        }
    }

    fn run(
        &mut self,
        code: &[u8],
        rdi: u64,
        rsi: u64,
    ) -> Result<kvm_bindings::kvm_regs, GuestError> {
        let at = CODE as usize;
        self.memory()[at..at + code.len()].copy_from_slice(code);
        let mut r = self.vcpu.get_regs().map_err(kvm_err("get regs"))?;
        r.rip = CODE;
        r.rsp = STACK_TOP;
        r.rflags = 2;
        r.rdi = rdi;
        r.rsi = rsi;
        self.vcpu.set_regs(&r).map_err(kvm_err("set regs"))?;
        // The current CR3 keeps the tag of the previous run; reset it to the root.
        let mut s = self.vcpu.get_sregs().map_err(kvm_err("get sregs"))?;
        s.cr3 = self.cr3_value() & !(1 << 63);
        self.vcpu.set_sregs(&s).map_err(kvm_err("set sregs"))?;
        loop {
            match self.vcpu.run().map_err(kvm_err("run"))? {
                VcpuExit::Hlt => break,
                VcpuExit::Intr => continue,
                other => return Err(GuestError::Exit(format!("{other:?}"))),
            }
        }
        self.vcpu.get_regs().map_err(kvm_err("get regs"))
    }

    /// Cycles of `loads` iterations of the CR3 loop (with the load, or without it).
    pub fn run_cr3_loop(&mut self, loads: u64, with_load: bool) -> Result<u64, GuestError> {
        let code = code::cr3_loop(with_load)?;
        let cr3 = self.cr3_value();
        Ok(self.run(&code, loads.max(1), cr3)?.rax)
    }

    /// Writes Figure 6's access offsets (bytes into the working set).
    pub fn load_offsets(&mut self, offsets: &[u64]) -> Result<(), GuestError> {
        if offsets.len() as u64 > MAX_OFFSETS {
            return Err(GuestError::TooLarge(format!(
                "{} offsets: at most {MAX_OFFSETS}",
                offsets.len()
            )));
        }
        let at = OFFSETS as usize;
        let ws = (self.len as u64) - layout::FRAMES;
        let mem = self.memory();
        for (i, &o) in offsets.iter().enumerate() {
            assert!(o + 8 <= ws, "offset {o} beyond the working set");
            mem[at + 8 * i..at + 8 * i + 8].copy_from_slice(&o.to_le_bytes());
        }
        Ok(())
    }

    /// Sum of the cycles of the first `n` timed loads (with a CR3 write before each,
    /// or not), and the sum of the values they loaded.
    pub fn run_access_loop(&mut self, n: u64, with_cr3: bool) -> Result<(u64, u64), GuestError> {
        let code = code::access_loop(with_cr3)?;
        let cr3 = self.cr3_value();
        let r = self.run(&code, n.max(1), cr3)?;
        Ok((r.rax, r.r12))
    }

    /// Writes `value` at byte `offset` of the working set (guest frames).
    pub fn poke(&mut self, offset: u64, value: u64) {
        let at = (layout::FRAMES + offset) as usize;
        self.memory()[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }

    /// Whether this guest has CR4.PCIDE set.
    pub fn pcid(&self) -> bool {
        self.pcid
    }
}

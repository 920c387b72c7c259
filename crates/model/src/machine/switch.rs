//! Address-space switches and OS work as the machine charges them: CR3 loads with and
//! without a TLB tag (x86's PCID and its no-flush bit), system calls, and page-table
//! construction and teardown (SpaceJMP, §2.4 and §5.1).

use pmlab_spine::Asid;

use super::Machine;
use crate::config::OsCostConfig;

/// What one OS-level operation cost, in cycles, for a breakdown like SpaceJMP's Table 2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SwitchCost {
    /// Cycles of the CR3 load.
    pub cr3: u64,
    /// Cycles of the system call around it (0 without one).
    pub syscall: u64,
}

impl Machine {
    /// The OS cost parameters.
    pub fn os_costs(&self) -> &OsCostConfig {
        &self.config.os_costs
    }

    /// Loads CR3 with the page table of `asid`. With `keep_tlb` and a tagged TLB (PCID
    /// with the no-flush bit) the TLB keeps its entries and the load costs
    /// `cr3_tagged_cycles`; otherwise the TLB is flushed and the load costs
    /// `cr3_cycles`. Writing the current space's CR3 again flushes too (an untagged
    /// reload is how x86 software flushes the TLB), which Figure 6's benchmark relies on.
    pub fn load_cr3(&mut self, asid: Asid, keep_tlb: bool) -> u64 {
        let tagged = keep_tlb && self.tlb.as_ref().is_some_and(|t| t.config().tagged);
        let cycles = if tagged {
            self.config.os_costs.cr3_tagged_cycles
        } else {
            if let Some(t) = &mut self.tlb {
                t.flush();
            }
            self.config.os_costs.cr3_cycles
        };
        self.asid = asid;
        self.stats.cr3_loads += 1;
        self.stats.instructions += 1;
        self.stats.cycles += cycles;
        cycles
    }

    /// A system call's entry and exit (the kernel's work is charged separately).
    pub fn syscall(&mut self) -> u64 {
        let c = self.config.os_costs.syscall_cycles;
        self.stats.syscalls += 1;
        self.stats.instructions += 1;
        self.stats.cycles += c;
        c
    }

    /// SpaceJMP's `vas_switch`: a system call that loads the target's CR3, keeping TLB
    /// entries where the TLB is tagged.
    pub fn vas_switch(&mut self, asid: Asid) -> SwitchCost {
        let syscall = self.syscall();
        let cr3 = self.load_cr3(asid, true);
        SwitchCost { cr3, syscall }
    }

    /// Charges page-table work done by the OS: `entry_writes` entries written and
    /// `tables` table pages allocated (zeroed) or freed, at the configured per-item costs.
    pub fn charge_table_work(&mut self, entry_writes: u64, tables: u64) -> u64 {
        let c = &self.config.os_costs;
        let cycles = entry_writes * c.entry_write_cycles + tables * c.table_page_cycles;
        self.stats.table_entry_writes += entry_writes;
        self.stats.cycles += cycles;
        cycles
    }

    /// Flushes the whole TLB (a shootdown after an unmap).
    pub fn flush_tlb(&mut self) {
        if let Some(t) = &mut self.tlb {
            t.flush();
        }
    }

    /// Charges `cycles` of work that is neither a memory access nor an instruction the
    /// model executes (e.g. a message crossing cores).
    pub fn charge_cycles(&mut self, cycles: u64) {
        self.stats.cycles += cycles;
    }
}

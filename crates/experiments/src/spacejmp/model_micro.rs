//! Table 2 and Figure 6 on the model: the cycles of a CR3 load, a system call and a
//! `vas_switch`, with and without a TLB tag; and the cost of loading one line of a
//! random page with a CR3 write before each access, by working-set size.

use pmlab_spine::Memory;
use pmlab_vas::model::{ModelSpaces, ModelVasConfig};
use pmlab_vas::{Access, AttachTo, Mode, SpaceJmp, VasCtl, VasError};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::gups_model::machine;

/// Where the working set is mapped (the machine's virtual addresses stay below its
/// memory size).
const WS: u64 = 1 << 20;

/// Table 2 on the model, in cycles.
#[derive(Clone, Debug, Serialize)]
pub struct Table2Model {
    /// CR3 load, untagged and tagged.
    pub cr3: (u64, u64),
    /// System call.
    pub syscall: u64,
    /// `vas_switch` measured on the model, untagged and tagged.
    pub vas_switch: (u64, u64),
}

fn one_vas(pages: u64, tagged: bool) -> Result<(ModelSpaces, pmlab_vas::VasHandle), VasError> {
    let mut mc = machine((pages + 64) * 4096 + (4 << 20));
    mc.translation.tlb.as_mut().expect("a TLB").tagged = tagged;
    let mut m = ModelSpaces::new(ModelVasConfig {
        machine: mc,
        va_bits: 48,
    })?;
    let s = m.seg_alloc("ws", Some(WS), pages * 4096, Mode(0o600))?;
    let v = m.vas_create("v", Mode(0o600))?;
    m.seg_attach(AttachTo::Vas(v), s, Access::ReadWrite)?;
    m.vas_ctl(v, VasCtl::TlbTag(tagged))?;
    let h = m.vas_attach(v)?;
    Ok((m, h))
}

/// Measures Table 2's rows on the model.
pub fn table2() -> Result<Table2Model, VasError> {
    let mut sw = [0u64; 2];
    for (i, tagged) in [false, true].into_iter().enumerate() {
        let (mut m, h) = one_vas(1, tagged)?;
        let before = m.machine_ref().cycles();
        m.vas_switch(h)?;
        sw[i] = m.machine_ref().cycles() - before;
    }
    let (m, _) = one_vas(1, false)?;
    let c = m.machine_ref().os_costs();
    Ok(Table2Model {
        cr3: (c.cr3_cycles, c.cr3_tagged_cycles),
        syscall: c.syscall_cycles,
        vas_switch: (sw[0], sw[1]),
    })
}

/// Figure 6 on the model: mean cycles of the timed load, per working set.
#[derive(Clone, Debug, Serialize)]
pub struct Figure6Model {
    /// Pages in the working set.
    pub pages: u64,
    /// No CR3 write.
    pub no_switch: f64,
    /// Untagged CR3 write before each access.
    pub untagged: f64,
    /// Tagged CR3 write (PCID, no flush) before each access.
    pub tagged: f64,
}

fn access_cycles(
    pages: u64,
    accesses: u64,
    seed: u64,
    tagged: bool,
    write_cr3: bool,
) -> Result<f64, VasError> {
    let (mut m, h) = one_vas(pages, tagged)?;
    m.vas_switch(h)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut total = 0u64;
    let asid = m.machine_ref().space();
    for i in 0..2 * accesses {
        let a = WS + rng.gen_range(0..pages) * 4096 + rng.gen_range(0..64u64) * 64;
        if write_cr3 {
            m.machine().load_cr3(asid, tagged);
        }
        let before = m.machine_ref().cycles();
        m.machine()
            .read_u64(a)
            .map_err(|e| VasError::Refused(e.to_string()))?;
        // The first half warms caches and TLB.
        if i >= accesses {
            total += m.machine_ref().cycles() - before;
        }
    }
    Ok(total as f64 / accesses as f64)
}

/// Figure 6 on the model for each working-set size.
pub fn figure6(
    working_sets: &[u64],
    accesses: u64,
    seed: u64,
) -> Result<Vec<Figure6Model>, VasError> {
    working_sets
        .iter()
        .map(|&pages| {
            Ok(Figure6Model {
                pages,
                no_switch: access_cycles(pages, accesses, seed, false, false)?,
                untagged: access_cycles(pages, accesses, seed, false, true)?,
                tagged: access_cycles(pages, accesses, seed, true, true)?,
            })
        })
        .collect()
}

//! Figure 1: the cost of building page tables (`mmap` with population) and removing
//! them (`munmap`), by region size, in 4 KiB and 2 MiB pages — natively and on the
//! model's radix tables.
//!
//! Natively, the 4 KiB region is a memfd whose pages are allocated before the clock
//! starts, so that, as in the paper, page zeroing is not counted: `mmap(MAP_POPULATE)`
//! then only builds tables. 2 MiB pages come from a hugetlb memfd when huge pages are
//! reserved (`vm.nr_hugepages`), else from anonymous transparent huge pages, whose
//! population also zeroes them (said in the row's `source`).

use std::time::Instant;

use pmlab_model::OsCostConfig;
use pmlab_os::vas::RadixTable;
use pmlab_spine::PageSize;
use serde::Serialize;

/// One region size and page size.
#[derive(Clone, Debug, Serialize)]
pub struct Fig1Row {
    /// `native` or `model`.
    pub substrate: String,
    /// 4 KiB or 2 MiB.
    pub page: PageSize,
    /// Region bytes.
    pub bytes: u64,
    /// Median milliseconds to map with population (build tables).
    pub map_ms: f64,
    /// Median milliseconds to unmap (tear tables down).
    pub unmap_ms: f64,
    /// How the pages were provided.
    pub source: String,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A file descriptor whose `bytes` of pages exist already (zeroed before timing).
fn prefilled_memfd(bytes: u64, huge: bool) -> std::io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{FallocateFlags, MemfdFlags, fallocate, memfd_create};
    let flags = if huge {
        MemfdFlags::CLOEXEC | MemfdFlags::HUGETLB | MemfdFlags::HUGE_2MB
    } else {
        MemfdFlags::CLOEXEC
    };
    let fd = memfd_create("pmlab-fig1", flags)?;
    rustix::fs::ftruncate(&fd, bytes)?;
    fallocate(&fd, FallocateFlags::empty(), 0, bytes)?;
    Ok(fd)
}

fn time_map(bytes: u64, fd: Option<&rustix::fd::OwnedFd>) -> std::io::Result<(f64, f64)> {
    use rustix::mm::{Advice, MapFlags, ProtFlags, madvise, mmap, mmap_anonymous, munmap};
    let prot = ProtFlags::READ | ProtFlags::WRITE;
    let t = Instant::now();
    // SAFETY: fresh mappings at addresses the kernel chooses, unmapped below.
    let p = unsafe {
        match fd {
            Some(fd) => mmap(
                std::ptr::null_mut(),
                bytes as usize,
                prot,
                MapFlags::SHARED | MapFlags::POPULATE,
                fd,
                0,
            )?,
            None => {
                let p = mmap_anonymous(
                    std::ptr::null_mut(),
                    bytes as usize,
                    prot,
                    MapFlags::PRIVATE,
                )?;
                madvise(p, bytes as usize, Advice::LinuxHugepage)?;
                madvise(p, bytes as usize, Advice::LinuxPopulateWrite)?;
                p
            }
        }
    };
    let map = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    // SAFETY: the mapping just made.
    unsafe { munmap(p, bytes as usize)? };
    Ok((map, t.elapsed().as_secs_f64() * 1e3))
}

/// Native rows for each size, `reps` repetitions each.
pub fn native(sizes: &[u64], reps: usize) -> Vec<Fig1Row> {
    let mut rows = Vec::new();
    for &bytes in sizes {
        for page in [PageSize::KIB_4, PageSize::MIB_2] {
            let huge = page == PageSize::MIB_2;
            let fd = prefilled_memfd(bytes, huge);
            let source = match (&fd, huge) {
                (Ok(_), false) => "memfd, pages allocated before timing".to_string(),
                (Ok(_), true) => "hugetlb memfd, pages allocated before timing".to_string(),
                (Err(_), true) => {
                    "anonymous THP (no hugetlb pages reserved): population zeroes pages".to_string()
                }
                (Err(e), false) => {
                    rows.push(Fig1Row {
                        substrate: "native".into(),
                        page,
                        bytes,
                        map_ms: f64::NAN,
                        unmap_ms: f64::NAN,
                        source: format!("skipped: {e}"),
                    });
                    continue;
                }
            };
            let (mut maps, mut unmaps) = (Vec::new(), Vec::new());
            for _ in 0..reps.max(1) {
                match time_map(bytes, fd.as_ref().ok()) {
                    Ok((m, u)) => {
                        maps.push(m);
                        unmaps.push(u);
                    }
                    Err(e) => {
                        maps.push(f64::NAN);
                        unmaps.push(f64::NAN);
                        eprintln!("figure 1: {bytes} bytes in {page} pages: {e}");
                    }
                }
            }
            rows.push(Fig1Row {
                substrate: "native".into(),
                page,
                bytes,
                map_ms: median(maps),
                unmap_ms: median(unmaps),
                source,
            });
        }
    }
    rows
}

/// Model rows: the radix table's work for each size, at `costs` and `clock_mhz`.
pub fn model(sizes: &[u64], costs: &OsCostConfig, clock_mhz: u64) -> Vec<Fig1Row> {
    let mut rows = Vec::new();
    for &bytes in sizes {
        for page in [PageSize::KIB_4, PageSize::MIB_2] {
            let mut t = RadixTable::new(page, 48);
            let pages = bytes / page.bytes();
            for vpn in 0..pages {
                t.map(vpn, vpn, true);
            }
            let built = t.work();
            let torn = t.destroy();
            let cycles = |entries: u64, tables: u64| {
                costs.syscall_cycles
                    + entries * costs.entry_write_cycles
                    + tables * costs.table_page_cycles
            };
            let ms = |c: u64| c as f64 / (clock_mhz as f64 * 1e3);
            rows.push(Fig1Row {
                substrate: "model".into(),
                page,
                bytes,
                map_ms: ms(cycles(built.entry_writes, built.tables_allocated)),
                unmap_ms: ms(cycles(torn.entry_writes, torn.tables_freed)),
                source: format!(
                    "{} entries, {} table pages",
                    built.entry_writes, built.tables_allocated
                ),
            });
        }
    }
    rows
}

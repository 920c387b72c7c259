//! Pools on native regions: made once (protocol log, workload, pool header last), then
//! opened by later runs — which check every header before writing anything, recover,
//! and refuse a region that is not a pool, a pool of another workload or protocol, a
//! corrupt log, or a pool made for fewer elements than asked for, by name and field.

use std::path::{Path, PathBuf};

use pmlab_native::{DATA_OFFSET, Region, RegionError};
use pmlab_spine::Memory;
use pmlab_tx::{FaultPlan, PoolLayout, Recovery, TxError};
use pmlab_workloads::{Kind, Params, Workload, WorkloadError};

use crate::proto::{ProtocolKind, Software};

/// What a pool holds.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The workload.
    pub workload: Kind,
    /// Its size (and, for runs, operation mix).
    pub params: Params,
    /// The protocol.
    pub protocol: ProtocolKind,
    /// Bytes of the protocol's log.
    pub log_len: u64,
}

/// Log bytes for native pools: room for the largest transactions of every workload
/// (a B+-tree batch that splits several 4 KiB nodes, the first fills).
pub const NATIVE_LOG: u64 = 1 << 20;

impl Spec {
    /// The data area's bytes.
    pub fn footprint(&self) -> u64 {
        Workload::footprint(self.workload, &self.params)
    }

    /// Bytes of a region file that holds the pool (its header page included).
    pub fn region_size(&self) -> u64 {
        DATA_OFFSET + PoolLayout::needed(self.log_len, self.footprint())
    }
}

/// A pool open under protocol `P`.
pub struct Pool<P> {
    /// The protocol, owning the memory.
    pub protocol: P,
    /// The structure in the data area.
    pub workload: Workload,
    /// The pool's parts.
    pub layout: PoolLayout,
    /// What recovery did at open (none for a pool just made).
    pub recovery: Option<Recovery>,
}

/// Why a pool could not be made or opened.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The region itself.
    #[error(transparent)]
    Region(#[from] RegionError),
    /// The pool header, the log, or recovery.
    #[error("{path}: {error}")]
    Tx {
        /// The region.
        path: String,
        /// What is wrong.
        error: TxError,
    },
    /// The workload's header or size.
    #[error("{path}: {error}")]
    Workload {
        /// The region.
        path: String,
        /// What is wrong.
        error: WorkloadError,
    },
    /// The pool was made for another number of elements.
    #[error(
        "{path}: the pool was made for {made} elements, not {asked} (the workload header at byte offset 24 of the data area): make a new pool for another size"
    )]
    Elements {
        /// The region.
        path: String,
        /// Elements the pool holds.
        made: u64,
        /// Elements asked for.
        asked: u64,
    },
    /// The pool names a protocol pmlab does not have.
    #[error(
        "{path}: the pool header (byte offset 16, field `protocol`) names {name:?}, which is not a protocol of pmlab (redo, undo)"
    )]
    UnknownProtocol {
        /// The region.
        path: String,
        /// The name found.
        name: String,
    },
}

fn at(path: &Path) -> String {
    path.display().to_string()
}

/// Makes the pool `spec` in `mem` (its whole size): log, workload, header last.
pub fn make<S: Software<M>, M: Memory>(
    mem: M,
    spec: &Spec,
    faults: FaultPlan,
    path: &Path,
) -> Result<Pool<S>, PoolError> {
    let tx = |error| PoolError::Tx {
        path: at(path),
        error,
    };
    let fp = spec.footprint();
    let layout = PoolLayout::plan(
        mem.size(),
        spec.protocol.name(),
        spec.workload.name(),
        spec.log_len,
        fp,
    )
    .map_err(tx)?;
    let mut p = S::format(mem, layout.log, layout.data)
        .map_err(tx)?
        .faulty(faults);
    let workload =
        Workload::format(&mut p, spec.workload, &spec.params, layout.data).map_err(|error| {
            PoolError::Workload {
                path: at(path),
                error,
            }
        })?;
    layout.write(p.memory_mut()).map_err(tx)?;
    Ok(Pool {
        protocol: p,
        workload,
        layout,
        recovery: None,
    })
}

/// The protocol a pool in `mem` runs (its header checked).
pub fn protocol_of<M: Memory>(mem: &mut M, path: &Path) -> Result<ProtocolKind, PoolError> {
    let layout = PoolLayout::read(mem).map_err(|error| PoolError::Tx {
        path: at(path),
        error,
    })?;
    ProtocolKind::from_name(&layout.protocol).ok_or_else(|| PoolError::UnknownProtocol {
        path: at(path),
        name: layout.protocol.clone(),
    })
}

/// Opens the pool in `mem` as `workload` under protocol `S` (whose name it must
/// record), recovers it, and opens the workload; if `elements` is given, the pool
/// must have been made for exactly that many. Nothing is written before every header
/// checked out.
pub fn open<S: Software<M>, M: Memory>(
    mut mem: M,
    protocol: ProtocolKind,
    workload: Kind,
    elements: Option<u64>,
    faults: FaultPlan,
    path: &Path,
) -> Result<Pool<S>, PoolError> {
    let tx = |error| PoolError::Tx {
        path: at(path),
        error,
    };
    let layout = PoolLayout::read(&mut mem).map_err(tx)?;
    layout
        .expect(Some(protocol.name()), workload.name())
        .map_err(tx)?;
    let mut p = S::attach(mem, layout.log, layout.data)
        .map_err(tx)?
        .faulty(faults);
    let recovery = p.recover().map_err(tx)?;
    let w = Workload::open(&mut p, workload, layout.data).map_err(|error| PoolError::Workload {
        path: at(path),
        error,
    })?;
    if let Some(asked) = elements.filter(|&e| e != w.elements()) {
        return Err(PoolError::Elements {
            path: at(path),
            made: w.elements(),
            asked,
        });
    }
    Ok(Pool {
        protocol: p,
        workload: w,
        layout,
        recovery: Some(recovery),
    })
}

/// A region file for a new pool of `spec` at `path` (which must not exist).
pub fn create_region(path: &Path, spec: &Spec) -> Result<Region, PoolError> {
    Ok(Region::create_file(path, spec.region_size())?)
}

/// Where a run's pool lives: a path given by the user (kept), or a scratch file.
pub enum Place {
    /// The user's region file.
    Kept(PathBuf),
    /// A scratch file in a temporary directory (removed with it).
    Scratch(tempfile::TempDir, PathBuf),
}

impl Place {
    /// The file.
    pub fn path(&self) -> &Path {
        match self {
            Place::Kept(p) | Place::Scratch(_, p) => p,
        }
    }
}

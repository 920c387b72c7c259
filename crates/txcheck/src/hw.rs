//! The drivers' view of the hardware protocols of paper 001 (`pmlab-hwtx`): a live
//! instance is a [`HwProtocol`] on the machine, a crash image is recovered by the same
//! recovery over plain memory ([`HwImage`]).

use pmlab_hwtx::{HwConfig, HwImage, HwProtocol};
use pmlab_model::Machine;
use pmlab_spine::{Memory, VecMemory};
use pmlab_tx::{Area, TxError};

use crate::proto::Harness;

/// One hardware protocol, fully configured (broken variants included).
#[derive(Clone, Copy, Debug)]
pub struct HwHarness(pub HwConfig);

impl Harness for HwHarness {
    type Live = HwProtocol;
    type Image = HwImage<VecMemory>;

    fn name(&self) -> &'static str {
        self.0.kind.name()
    }

    fn format(&self, m: Machine, log: Area, data: Area) -> Result<HwProtocol, TxError> {
        HwProtocol::format(m, log, data, self.0)
    }

    fn attach_live(&self, m: Machine, log: Area, data: Area) -> Result<HwProtocol, TxError> {
        HwProtocol::attach(m, log, data, self.0)
    }

    fn attach_image(&self, image: &[u8], log: Area, _data: Area) -> Result<Self::Image, TxError> {
        let mut m = VecMemory::new(image.len());
        m.write(0, image)?;
        Ok(HwImage::new(m, log, self.0))
    }
}

/// The crash exploration of `workload` under `hw` at the CI size: pmlab-txcheck's small
/// configuration with two cache levels — a volatile L1 of 4 lines over an LLC of 32
/// lines (8 ways) for the WAL protocols, so that lines are evicted (and logged) in the
/// middle of transactions, or of 512 lines (16 ways) for Kiln, whose uncommitted
/// versions stay pinned in its non-volatile LLC — ten transactions (six of the B+-tree
/// and the table), one recovery explored per transaction.
pub fn crash_config(workload: pmlab_workloads::Kind, hw: &HwConfig) -> crate::crash::Config {
    sized_crash_config(workload, hw.kind.nv_llc())
}

/// [`crash_config`] with the large LLC (`big`) or the small one.
pub fn sized_crash_config(workload: pmlab_workloads::Kind, big: bool) -> crate::crash::Config {
    use pmlab_model::{CacheLevelConfig, ReplacementPolicy};
    use pmlab_workloads::Kind;
    let level = |lines: u64, assoc| CacheLevelConfig {
        size: lines * 64,
        block_size: 64,
        assoc,
        latency_cycles: 1,
        repl: ReplacementPolicy::Lru,
        write_back: true,
        write_allocate: true,
    };
    let mut c = crate::crash::Config::small(workload, 1);
    let llc = if big { level(512, 16) } else { level(32, 8) };
    c.caches = Some(vec![level(4, 4), llc]);
    c.txs = match workload {
        Kind::BpTree | Kind::Db => 6,
        _ => 10,
    };
    c.recovery_samples = 1;
    c
}

/// The broken variants of paper 001's protocols the crash tests must catch, each with
/// the protocols it breaks.
pub fn broken_variants() -> Vec<(&'static str, pmlab_hwtx::HwFaults, Vec<pmlab_hwtx::HwKind>)> {
    use pmlab_hwtx::{HwFaults, HwKind};
    let f = HwFaults::NONE;
    vec![
        (
            "EC recovery that trusts a partial block group",
            HwFaults {
                ec_trust_partial: true,
                ..f
            },
            vec![HwKind::EcWal, HwKind::LocWal],
        ),
        (
            "SP committing out of order",
            HwFaults {
                sp_out_of_order: true,
                ..f
            },
            vec![HwKind::LocWal],
        ),
        (
            "Kiln commit that does not wait for the NV-LLC",
            HwFaults {
                kiln_no_wait: true,
                ..f
            },
            vec![HwKind::Kiln, HwKind::LocKiln],
        ),
    ]
}

/// The exploration that looks for a broken variant: the large LLC, so that a commit
/// finds its blocks still cached and issues many block groups at once, and sampled
/// subsets of the writes in flight (more than the exhaustive enumeration takes).
pub fn broken_variant_config(workload: pmlab_workloads::Kind) -> crate::crash::Config {
    let mut c = sized_crash_config(workload, true);
    c.explore.pending = pmlab_model::PendingChoice::Random {
        samples: 16,
        seed: 7,
    };
    c
}

//! The hardware protocols under pmlab-txcheck's crash explorer: how it formats them on
//! a machine, attaches them after a crash, and recovers a crash image (on a machine
//! booted from it, since both are machine features).

use pmlab_hwtx::{HwUndoFault, HwUndoProtocol, OspConfig, OspProtocol};
use pmlab_model::{Machine, MachineConfig};
use pmlab_tx::{Area, TxError};
use pmlab_txcheck::Harness;

/// Cache lines of the machine a crash image is recovered on.
const IMAGE_CACHE_LINES: u64 = 8;

fn boot(image: &[u8]) -> Result<Machine, TxError> {
    let cfg = MachineConfig::tiny(image.len() as u64, IMAGE_CACHE_LINES);
    Machine::with_image(cfg, image.to_vec()).map_err(|e| TxError::BadArea {
        structure: "crash image",
        addr: 0,
        problem: e.to_string(),
    })
}

/// OSP with a configuration (possibly a broken variant).
#[derive(Clone, Debug)]
pub struct OspHarness(pub OspConfig);

impl Harness for OspHarness {
    type Live = OspProtocol;
    type Image = OspProtocol;

    fn name(&self) -> &'static str {
        "osp"
    }

    fn format(&self, m: Machine, log: Area, data: Area) -> Result<OspProtocol, TxError> {
        OspProtocol::format(m, log, data, self.0.clone())
    }

    fn attach_live(&self, m: Machine, log: Area, data: Area) -> Result<OspProtocol, TxError> {
        OspProtocol::attach(m, log, data, self.0.clone())
    }

    fn attach_image(&self, image: &[u8], log: Area, data: Area) -> Result<OspProtocol, TxError> {
        OspProtocol::attach(boot(image)?, log, data, self.0.clone())
    }
}

/// The hardware undo log (possibly its broken variant).
#[derive(Clone, Copy, Debug, Default)]
pub struct HwUndoHarness(pub Option<HwUndoFault>);

impl Harness for HwUndoHarness {
    type Live = HwUndoProtocol;
    type Image = HwUndoProtocol;

    fn name(&self) -> &'static str {
        "hw-undo"
    }

    fn format(&self, m: Machine, log: Area, data: Area) -> Result<HwUndoProtocol, TxError> {
        Ok(HwUndoProtocol::format(m, log, data)?.with_fault(self.0))
    }

    fn attach_live(&self, m: Machine, log: Area, data: Area) -> Result<HwUndoProtocol, TxError> {
        Ok(HwUndoProtocol::attach(m, log, data)?.with_fault(self.0))
    }

    fn attach_image(&self, image: &[u8], log: Area, data: Area) -> Result<HwUndoProtocol, TxError> {
        Ok(HwUndoProtocol::attach(boot(image)?, log, data)?.with_fault(self.0))
    }
}

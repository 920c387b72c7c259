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

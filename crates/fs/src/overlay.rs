//! A client's view of the metadata: the service's read-only mapping with the client's
//! own not-yet-shipped changes laid over it, page by page.
//!
//! libFS computes those changes with the very function the service validates with
//! ([`crate::apply::apply_batch`]), so its view of its own operations is exactly what the
//! service will make of them. The overlay is dropped whenever the journal is shipped.

use pmlab_spine::{Addr, SpineError};

use crate::media::{MediaRead, PAGE};
use crate::txn::Changes;

/// The base mapping plus the client's pending page images.
pub struct Overlay<'a, R: MediaRead + ?Sized> {
    /// The mapped metadata space.
    pub base: &'a mut R,
    /// Pending page images.
    pub pages: &'a Changes,
}

impl<R: MediaRead + ?Sized> MediaRead for Overlay<'_, R> {
    fn media_size(&self) -> u64 {
        self.base.media_size()
    }
    fn media_read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        pmlab_spine::check_bounds(addr, buf.len() as u64, self.media_size())?;
        let mut done = 0usize;
        while done < buf.len() {
            let a = addr + done as u64;
            let pno = a / PAGE;
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(buf.len() - done);
            match self.pages.get(&pno) {
                Some(p) => buf[done..done + n].copy_from_slice(&p[off..off + n]),
                None => self.base.media_read(a, &mut buf[done..done + n])?,
            }
            done += n;
        }
        Ok(())
    }
}

//! SPS: random swaps of two entries of a large array of 8-byte integers, one swap per
//! transaction (papers 000 and 001, after NV-Heaps).
//!
//! The array starts as the identity (`a[i] = i`), so it is always a permutation of
//! `0..n`: the checker's invariant. A crash that kept half of a swap duplicates one
//! value and loses another, which the checker catches.

use pmlab_spine::Addr;
use pmlab_tx::{Batch, Protocol};

use crate::contents::Contents;
use crate::error::{CheckError, WorkloadError, read_failed};
use crate::header::{Header, STRUCT_OFF};
use crate::slab::Marks;
use crate::workload::{Ops, Structure, in_tx};

/// The workload's name.
pub const NAME: &str = "sps";
/// Entries written per transaction while the array is initialised.
const INIT_CHUNK: u64 = 512;

/// The array.
pub struct Sps {
    array: Addr,
    n: u64,
}

impl Sps {
    fn at(&self, i: u64) -> Addr {
        self.array + 8 * i
    }
}

impl Structure for Sps {
    fn footprint(elements: u64) -> u64 {
        STRUCT_OFF + 8 * elements
    }

    fn layout(h: &Header) -> Result<Self, WorkloadError> {
        Ok(Sps {
            array: h.body(),
            n: h.elements,
        })
    }

    fn universe(&self) -> u64 {
        self.n
    }

    fn init<P: Protocol>(&mut self, p: &mut P, _: &mut Batch) -> Result<(), WorkloadError> {
        let mut chunk = Vec::with_capacity(8 * INIT_CHUNK as usize);
        for first in (0..self.n).step_by(INIT_CHUNK as usize) {
            chunk.clear();
            for i in first..(first + INIT_CHUNK).min(self.n) {
                chunk.extend_from_slice(&i.to_le_bytes());
            }
            in_tx(p, |p| Ok(p.write(self.at(first), &chunk)?))?;
        }
        Ok(())
    }

    fn run_tx<P: Protocol>(
        &mut self,
        p: &mut P,
        _: &mut Batch,
        ops: &mut Ops,
    ) -> Result<(), WorkloadError> {
        let (i, j) = (ops.pick(), ops.pick());
        let (ai, aj) = (self.at(i), self.at(j));
        in_tx(p, |p| {
            p.declare(&[(ai, 8), (aj, 8)])?;
            let (x, y) = (p.read_u64(ai)?, p.read_u64(aj)?);
            p.write_u64(ai, y)?;
            p.write_u64(aj, x)?;
            Ok(())
        })
    }

    fn check<P: Protocol>(&self, p: &mut P) -> Result<Contents, CheckError> {
        let mut seen = Marks::new(self.n);
        let mut contents = Contents::default();
        let mut buf = vec![0u8; 8 * INIT_CHUNK as usize];
        for first in (0..self.n).step_by(INIT_CHUNK as usize) {
            let k = (INIT_CHUNK).min(self.n - first) as usize;
            let at = self.at(first);
            p.read(at, &mut buf[..8 * k])
                .map_err(|e| read_failed(NAME, at, e))?;
            for (o, w) in buf[..8 * k].chunks_exact(8).enumerate() {
                let i = first + o as u64;
                let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
                if v >= self.n {
                    return Err(CheckError::new(
                        NAME,
                        self.at(i),
                        format!("entry {i} holds {v}, outside 0..{}", self.n),
                    ));
                }
                if !seen.set(v) {
                    return Err(CheckError::new(
                        NAME,
                        self.at(i),
                        format!(
                            "entry {i} holds {v}, which another entry holds too: not a permutation"
                        ),
                    ));
                }
                contents.add(i, v);
            }
        }
        Ok(contents)
    }
}

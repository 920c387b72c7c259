//! Decompressing xz and zstd input with bounded memory and located errors.
//!
//! A hostile or damaged stream may declare a dictionary or window of any size; the
//! decoders refuse more than [`XZ_MEMLIMIT`] and a zstd window of more than
//! 2^[`ZSTD_WINDOW_LOG_MAX`] bytes (xz -9 needs 65 MiB and zstd -19 an 8 MiB window, so
//! every trace pmlab writes, and any made with the tools' usual levels, decodes). An error
//! names the compressed byte offset the decoder had reached.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most memory the xz decoder may use (dictionary and buffers).
pub const XZ_MEMLIMIT: u64 = 256 << 20;
/// log2 of the largest zstd window accepted (zstd's own default limit, stated here).
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// Counts the bytes read through it.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A decoder whose errors say where in the compressed stream they arose.
struct Located<D> {
    decoder: D,
    what: &'static str,
    consumed: Arc<AtomicU64>,
}

impl<D: Read> Read for Located<D> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.decoder.read(buf).map_err(|e| {
            let at = self.consumed.load(Ordering::Relaxed);
            io::Error::new(
                e.kind(),
                format!("{} stream, compressed byte offset {at}: {e}", self.what),
            )
        })
    }
}

/// An xz decoder over `raw` (concatenated streams allowed).
pub(crate) fn xz(raw: Box<dyn Read + Send>) -> io::Result<Box<dyn Read + Send>> {
    let consumed = Arc::new(AtomicU64::new(0));
    let counted = Counting {
        inner: raw,
        read: Arc::clone(&consumed),
    };
    let stream = xz2::stream::Stream::new_stream_decoder(XZ_MEMLIMIT, xz2::stream::CONCATENATED)
        .map_err(io::Error::other)?;
    Ok(Box::new(Located {
        decoder: xz2::read::XzDecoder::new_stream(counted, stream),
        what: "xz",
        consumed,
    }))
}

/// A zstd decoder over `raw`.
pub(crate) fn zstd(raw: Box<dyn Read + Send>) -> io::Result<Box<dyn Read + Send>> {
    let consumed = Arc::new(AtomicU64::new(0));
    let counted = Counting {
        inner: raw,
        read: Arc::clone(&consumed),
    };
    let mut decoder = zstd::Decoder::new(counted)?;
    decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
    Ok(Box::new(Located {
        decoder,
        what: "zstd",
        consumed,
    }))
}

//! Uncompressed binary traces read through a memory mapping: records are decoded
//! straight from the page cache, without the copy into a read buffer that a `read`
//! system call makes (at 16 bytes a reference, that copy cost as much as decoding).

use std::fs::File;

use memmap2::{Advice, Mmap, MmapOptions};

use std::mem::offset_of;
use std::ops::Range;

use crate::binary::{check_header, check_records, decode_records};
use crate::{BINARY_HEADER_LEN, BINARY_RECORD_LEN, DEFAULT_BATCH, Ref, RefSource, TraceError};

/// Reads a binary trace file through a memory mapping.
pub struct MappedBinaryReader {
    map: Mmap,
    name: String,
    /// Offset of the next undecoded record.
    pos: usize,
}

impl MappedBinaryReader {
    /// Maps `file` (a regular file holding an uncompressed binary trace) and checks its
    /// header; `name` is used in errors. Fails with an I/O error when the file cannot be
    /// mapped, so the caller can fall back to [`crate::BinaryReader`].
    pub fn new(file: &File, name: impl Into<String>) -> Result<Self, TraceError> {
        let name = name.into();
        // SAFETY: the mapping is read-only and private to this reader. If another
        // process truncates the file while it is mapped, reads of the vanished pages
        // fault (SIGBUS); pmlab never modifies a trace it is reading, and a trace is
        // not expected to change under a simulation, which is the usual contract of
        // tools that map their input.
        // Pages are mapped as they are first touched, many per fault (the kernel's
        // fault-around); mapping them all up front (`populate`) measured no faster and
        // would read a large trace in full before the first reference.
        let map = unsafe { MmapOptions::new().map(file) }.map_err(|error| TraceError::Io {
            source_name: name.clone(),
            error,
        })?;
        // Advice only; a kernel that ignores it reads the same bytes.
        let _ = map.advise(Advice::Sequential);
        check_header(&map[..map.len().min(BINARY_HEADER_LEN)], &name)?;
        Ok(MappedBinaryReader {
            map,
            name,
            pos: BINARY_HEADER_LEN,
        })
    }
}

impl MappedBinaryReader {
    /// The byte range of the whole records, up to `max` (at least one), that come next,
    /// advancing past them; empty at the end of the trace.
    fn take_records(&mut self, max: usize) -> Result<Range<usize>, TraceError> {
        let rest = self.map.len() - self.pos;
        let whole = rest / BINARY_RECORD_LEN;
        if whole == 0 && rest > 0 {
            return Err(TraceError::Binary {
                source_name: self.name.clone(),
                offset: self.pos as u64,
                field: "record",
                message: format!("truncated record: {rest} of {BINARY_RECORD_LEN} bytes"),
            });
        }
        let start = self.pos;
        self.pos += whole.min(max.max(1)) * BINARY_RECORD_LEN;
        Ok(start..self.pos)
    }
}

impl RefSource for MappedBinaryReader {
    fn next_batch(&mut self, out: &mut Vec<Ref>) -> Result<usize, TraceError> {
        out.clear();
        if out.capacity() == 0 {
            out.reserve(DEFAULT_BATCH);
        }
        let range = self.take_records(out.capacity())?;
        decode_records(
            &self.map[range.clone()],
            range.start as u64,
            out,
            &self.name,
        )?;
        Ok(out.len())
    }

    fn next_refs<'a>(&'a mut self, scratch: &'a mut Vec<Ref>) -> Result<&'a [Ref], TraceError> {
        let max = match scratch.capacity() {
            0 => DEFAULT_BATCH,
            n => n,
        };
        let range = self.take_records(max)?;
        let bytes = &self.map[range.clone()];
        check_records(bytes, range.start as u64, &self.name)?;
        if let Some(refs) = valid_records_in_place(bytes) {
            return Ok(refs);
        }
        scratch.clear();
        decode_records(bytes, range.start as u64, scratch, &self.name)?;
        Ok(scratch)
    }
}

// `Ref` is laid out as a record (see its documentation); `valid_records_in_place`
// depends on it.
const _: () = {
    assert!(size_of::<Ref>() == BINARY_RECORD_LEN);
    assert!(align_of::<Ref>() == 8);
    assert!(offset_of!(Ref, addr) == 0);
    assert!(offset_of!(Ref, size) == 8);
    assert!(offset_of!(Ref, asid) == 12);
    assert!(offset_of!(Ref, kind) == 14);
};

/// Whole records that [`check_records`] accepted, viewed as references without a copy;
/// `None` on a big-endian machine (fields are little-endian) or when `bytes` is not
/// aligned for `Ref` (a mapping starts on a page, and records at multiples of 16 bytes
/// after it, so this does not happen).
fn valid_records_in_place(bytes: &[u8]) -> Option<&[Ref]> {
    if cfg!(target_endian = "big") || bytes.as_ptr().align_offset(align_of::<Ref>()) != 0 {
        return None;
    }
    // SAFETY: the pointer is aligned for `Ref` (checked above) and the bytes are whole
    // records, each exactly one `Ref` in `Ref`'s layout (asserted at compile time) with
    // its fields in the machine's byte order (little-endian, checked above). Every bit
    // pattern is a valid u64, u32 or u16; the kind byte holds a valid `Kind` discriminant
    // (0..=3), which `check_records` verified for every record; byte 15 is `Ref`'s
    // padding, which may hold anything. The bytes are borrowed from the mapping for the
    // slice's lifetime, and the mapping is read-only.
    Some(unsafe {
        std::slice::from_raw_parts(
            bytes.as_ptr().cast::<Ref>(),
            bytes.len() / BINARY_RECORD_LEN,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BinaryReader, BinaryWriter, Kind, read_all};
    use std::io::Write;

    fn refs(n: u64) -> Vec<Ref> {
        (0..n)
            .map(|i| Ref {
                addr: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                size: 1 + (i % 64) as u32,
                kind: Kind::ALL[(i % 4) as usize],
                asid: (i % 3) as u16,
            })
            .collect()
    }

    fn file_with(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        f.flush().unwrap();
        f
    }

    fn encoded(refs: &[Ref]) -> Vec<u8> {
        let mut w = BinaryWriter::new(Vec::new()).unwrap();
        w.write_refs(refs).unwrap();
        w.into_inner().unwrap()
    }

    fn mapped(bytes: &[u8]) -> Result<Vec<Ref>, TraceError> {
        let f = file_with(bytes);
        read_all(&mut MappedBinaryReader::new(f.as_file(), "m.bin")?)
    }

    #[test]
    fn reads_what_the_stream_reader_reads() {
        // More than one batch, and a final partial batch.
        let want = refs(3 * DEFAULT_BATCH as u64 + 17);
        let bytes = encoded(&want);
        assert_eq!(mapped(&bytes).unwrap(), want);
        assert_eq!(
            read_all(&mut BinaryReader::new(&bytes[..], "s.bin")).unwrap(),
            want
        );
        assert!(mapped(&encoded(&[])).unwrap().is_empty());
    }

    /// Every reference of the mapped file at `bytes`, read through `next_refs` in
    /// batches of `batch`.
    fn in_place(bytes: &[u8], batch: usize) -> Result<Vec<Ref>, TraceError> {
        let f = file_with(bytes);
        let mut r = MappedBinaryReader::new(f.as_file(), "m.bin")?;
        let mut scratch = Vec::with_capacity(batch);
        let mut all = Vec::new();
        loop {
            let refs = r.next_refs(&mut scratch)?;
            if refs.is_empty() {
                return Ok(all);
            }
            assert!(refs.len() <= batch);
            all.extend_from_slice(refs);
        }
    }

    #[test]
    fn in_place_batches_read_what_copied_batches_read() {
        let want = refs(5000);
        let bytes = encoded(&want);
        assert_eq!(in_place(&bytes, 1024).unwrap(), want);
        assert_eq!(in_place(&bytes, 7).unwrap(), want);
        let mut bad = bytes.clone();
        bad[BINARY_HEADER_LEN + 4000 * BINARY_RECORD_LEN + 14] = 4;
        assert_eq!(
            in_place(&bad, 1024).unwrap_err().to_string(),
            mapped(&bad).unwrap_err().to_string()
        );
    }

    #[test]
    fn errors_name_the_same_offsets_as_the_stream_reader() {
        let good = encoded(&refs(DEFAULT_BATCH as u64 + 5));
        let record = |i: usize| BINARY_HEADER_LEN + i * BINARY_RECORD_LEN;
        let mut cases: Vec<Vec<u8>> = Vec::new();
        let mut bad_kind = good.clone();
        bad_kind[record(DEFAULT_BATCH + 2) + 14] = 7;
        cases.push(bad_kind);
        let mut zero_size = good.clone();
        zero_size[record(3) + 8..record(3) + 12].fill(0);
        cases.push(zero_size);
        let mut reserved = good.clone();
        reserved[record(1) + 15] = 1;
        cases.push(reserved);
        cases.push(good[..good.len() - 5].to_vec());
        cases.push(good[..9].to_vec());
        let mut version = good.clone();
        version[8] = 9;
        cases.push(version);
        for bytes in cases {
            let streamed = read_all(&mut BinaryReader::new(&bytes[..], "m.bin")).unwrap_err();
            let from_map = mapped(&bytes).unwrap_err();
            assert_eq!(from_map.to_string(), streamed.to_string());
        }
    }
}

//! Uncompressed binary traces read through a memory mapping: records are decoded
//! straight from the page cache, without the copy into a read buffer that a `read`
//! system call makes (at 16 bytes a reference, that copy cost as much as decoding).

use std::fs::File;

use memmap2::{Advice, Mmap, MmapOptions};

use crate::binary::{check_header, decode_records};
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
        // `populate` maps every page at once: one system call instead of a page fault
        // per 4 KiB, which at 256 references a page would cost as much as decoding.
        let map =
            unsafe { MmapOptions::new().populate().map(file) }.map_err(|error| TraceError::Io {
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

impl RefSource for MappedBinaryReader {
    fn next_batch(&mut self, out: &mut Vec<Ref>) -> Result<usize, TraceError> {
        out.clear();
        if out.capacity() == 0 {
            out.reserve(DEFAULT_BATCH);
        }
        let rest = &self.map[self.pos..];
        let whole = rest.len() / BINARY_RECORD_LEN;
        if whole == 0 {
            if !rest.is_empty() {
                return Err(TraceError::Binary {
                    source_name: self.name.clone(),
                    offset: self.pos as u64,
                    field: "record",
                    message: format!(
                        "truncated record: {} of {BINARY_RECORD_LEN} bytes",
                        rest.len()
                    ),
                });
            }
            return Ok(0);
        }
        let n = whole.min(out.capacity());
        let bytes = &rest[..n * BINARY_RECORD_LEN];
        decode_records(bytes, self.pos as u64, out, &self.name)?;
        self.pos += bytes.len();
        Ok(n)
    }
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
                pid: (i % 3) as u16,
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

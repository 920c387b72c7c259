//! The metadata journal libFS keeps and ships to the service.
//!
//! A batch is `"JRNL"`, a record count, then records. Each record is its payload length
//! (u32), a CRC-32 of type byte and payload (u32), the type byte, and the payload. The
//! decoder never trusts a length or a count: every failure is a [`DecodeError`] naming
//! the byte offset and the field.

use thiserror::Error;

use crate::inode::Kind;

const BATCH_MAGIC: u32 = 0x4c4e_524a; // "JRNL"
/// Longest payload a record may have (names are at most 255 bytes on the wire).
pub const MAX_RECORD: usize = 1024;

/// One metadata operation, as a client records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Creates object `ino` (a free inode reserved to the client) named `name` in `parent`.
    Create {
        /// Directory to create in.
        parent: u64,
        /// The new name.
        name: String,
        /// The inode the client reserved for the object.
        ino: u64,
        /// File, directory or KVFS object.
        kind: Kind,
        /// Permission bits.
        mode: u32,
        /// Domain of the object's data (ignored for directories).
        domain: u16,
    },
    /// Adds a name for an existing file.
    Link {
        /// Directory to add the name in.
        parent: u64,
        /// The new name.
        name: String,
        /// The file.
        ino: u64,
    },
    /// Removes a file's name; the file goes when its last name goes and no one has it open.
    Unlink {
        /// Directory holding the name.
        parent: u64,
        /// The name.
        name: String,
        /// The inode the client believes the name refers to.
        ino: u64,
    },
    /// Removes an empty directory.
    Rmdir {
        /// Directory holding the name.
        parent: u64,
        /// The name.
        name: String,
        /// The directory's inode.
        ino: u64,
    },
    /// Moves a name. If `replace` is not 0, the target name exists and names file
    /// `replace`, which loses that name in the same step (POSIX rename over an existing
    /// file: no moment where neither or both names exist); otherwise it must not exist.
    Rename {
        /// Directory holding the name now.
        from_parent: u64,
        /// The name now.
        from_name: String,
        /// Directory to move to.
        to_parent: u64,
        /// The new name.
        to_name: String,
        /// The object moved.
        ino: u64,
        /// The file the target name refers to now and loses it (0: the name is free).
        replace: u64,
    },
    /// Sets a file's size; pages wholly beyond the new size are freed.
    SetSize {
        /// The file.
        ino: u64,
        /// New size in bytes.
        size: u64,
    },
    /// Maps `count` data pages starting at `page` (reserved to the client, in the file's
    /// domain) at file page index `index` onwards: an extent allocation.
    MapPages {
        /// The file.
        ino: u64,
        /// First file page index.
        index: u64,
        /// First data page.
        page: u64,
        /// Number of pages.
        count: u64,
    },
    /// Stamps what the operations after it change (until the next stamp) with time
    /// `now`, in nanoseconds since the Unix epoch: the client's clock when it recorded
    /// them. The service takes the stamp only within a window behind its own clock
    /// ([`crate::apply::Authority::stamp`]); operations before any stamp get the
    /// service's clock.
    Stamp {
        /// When the client recorded the operations.
        now: u64,
    },
}

impl Op {
    /// A short name for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Create { .. } => "create",
            Op::Link { .. } => "link",
            Op::Unlink { .. } => "unlink",
            Op::Rmdir { .. } => "rmdir",
            Op::Rename { .. } => "rename",
            Op::SetSize { .. } => "set-size",
            Op::MapPages { .. } => "map-pages",
            Op::Stamp { .. } => "stamp",
        }
    }
}

/// A journal that does not decode.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("journal byte {offset}: {field}: {why}")]
pub struct DecodeError {
    /// Byte offset in the batch where decoding failed.
    pub offset: usize,
    /// The field being read.
    pub field: &'static str,
    /// What is wrong.
    pub why: String,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    let n = b.len().min(255);
    out.push(n as u8);
    out.extend_from_slice(&b[..n]);
}

/// Encodes one record.
pub fn encode_op(op: &Op, out: &mut Vec<u8>) {
    // The payload goes straight after a header filled in once its length and checksum
    // are known: no buffer of its own per record.
    let head = out.len();
    out.extend_from_slice(&[0u8; 9]);
    let p = &mut *out;
    let ty: u8 = match op {
        Op::Create {
            parent,
            name,
            ino,
            kind,
            mode,
            domain,
        } => {
            p.extend_from_slice(&parent.to_le_bytes());
            p.extend_from_slice(&ino.to_le_bytes());
            p.push(*kind as u8);
            p.extend_from_slice(&mode.to_le_bytes());
            p.extend_from_slice(&domain.to_le_bytes());
            put_str(p, name);
            1
        }
        // Link, unlink and rmdir name the same fields; only the type code differs.
        Op::Link { parent, name, ino }
        | Op::Unlink { parent, name, ino }
        | Op::Rmdir { parent, name, ino } => {
            p.extend_from_slice(&parent.to_le_bytes());
            p.extend_from_slice(&ino.to_le_bytes());
            put_str(p, name);
            match op {
                Op::Link { .. } => 2,
                Op::Unlink { .. } => 3,
                _ => 4,
            }
        }
        Op::Rename {
            from_parent,
            from_name,
            to_parent,
            to_name,
            ino,
            replace,
        } => {
            p.extend_from_slice(&from_parent.to_le_bytes());
            p.extend_from_slice(&to_parent.to_le_bytes());
            p.extend_from_slice(&ino.to_le_bytes());
            p.extend_from_slice(&replace.to_le_bytes());
            put_str(p, from_name);
            put_str(p, to_name);
            5
        }
        Op::SetSize { ino, size } => {
            p.extend_from_slice(&ino.to_le_bytes());
            p.extend_from_slice(&size.to_le_bytes());
            6
        }
        Op::MapPages {
            ino,
            index,
            page,
            count,
        } => {
            for v in [ino, index, page, count] {
                p.extend_from_slice(&v.to_le_bytes());
            }
            7
        }
        Op::Stamp { now } => {
            p.extend_from_slice(&now.to_le_bytes());
            8
        }
    };
    let payload = head + 9;
    out[head + 8] = ty;
    let len = (out.len() - payload) as u32;
    let crc = crc32fast::hash(&out[head + 8..]);
    out[head..head + 4].copy_from_slice(&len.to_le_bytes());
    out[head + 4..head + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Encodes a batch.
pub fn encode_batch(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 48 * ops.len());
    out.extend_from_slice(&BATCH_MAGIC.to_le_bytes());
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        encode_op(op, &mut out);
    }
    out
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
    base: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&[u8], DecodeError> {
        if self.b.len() - self.pos < n {
            return Err(DecodeError {
                offset: self.base + self.pos,
                field,
                why: format!("needs {n} bytes, {} remain", self.b.len() - self.pos),
            });
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u64(&mut self, f: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8, f)?.try_into().unwrap()))
    }
    fn u32(&mut self, f: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4, f)?.try_into().unwrap()))
    }
    fn u16(&mut self, f: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.take(2, f)?.try_into().unwrap()))
    }
    fn u8(&mut self, f: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, f)?[0])
    }
    fn str(&mut self, f: &'static str) -> Result<String, DecodeError> {
        let at = self.base + self.pos;
        let n = self.u8(f)? as usize;
        let b = self.take(n, f)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError {
            offset: at,
            field: f,
            why: "not UTF-8".into(),
        })
    }
}

/// Decodes one record starting at `b[0]`, which lies at byte `base` of the batch.
/// Returns the operation and the bytes consumed.
pub fn decode_op(b: &[u8], base: usize) -> Result<(Op, usize), DecodeError> {
    let mut c = Cursor { b, pos: 0, base };
    let len = c.u32("record length")? as usize;
    if len > MAX_RECORD {
        return Err(DecodeError {
            offset: base,
            field: "record length",
            why: format!("{len} exceeds {MAX_RECORD}"),
        });
    }
    let crc = c.u32("record checksum")?;
    let body = c.take(len + 1, "record body")?;
    let computed = crc32fast::hash(body);
    if computed != crc {
        return Err(DecodeError {
            offset: base + 4,
            field: "record checksum",
            why: format!("{crc:#010x} stored, {computed:#010x} computed"),
        });
    }
    let ty = body[0];
    let mut p = Cursor {
        b: &body[1..],
        pos: 0,
        base: base + 9,
    };
    let op = decode_body(ty, &mut p)?;
    if p.pos != len {
        return Err(DecodeError {
            offset: base + 9 + p.pos,
            field: "record body",
            why: format!("{} trailing bytes", len - p.pos),
        });
    }
    Ok((op, c.pos))
}

/// The operation of a record of type `ty` whose body `p` reads (the record's
/// header at byte `p.base - 9` of the batch).
fn decode_body(ty: u8, p: &mut Cursor<'_>) -> Result<Op, DecodeError> {
    Ok(match ty {
        1 => decode_create(p)?,
        2..=4 => {
            let parent = p.u64("parent")?;
            let ino = p.u64("ino")?;
            let name = p.str("name")?;
            match ty {
                2 => Op::Link { parent, name, ino },
                3 => Op::Unlink { parent, name, ino },
                _ => Op::Rmdir { parent, name, ino },
            }
        }
        5 => {
            let from_parent = p.u64("from parent")?;
            let to_parent = p.u64("to parent")?;
            let ino = p.u64("ino")?;
            let replace = p.u64("replace")?;
            let from_name = p.str("from name")?;
            let to_name = p.str("to name")?;
            Op::Rename {
                from_parent,
                from_name,
                to_parent,
                to_name,
                ino,
                replace,
            }
        }
        6 => Op::SetSize {
            ino: p.u64("ino")?,
            size: p.u64("size")?,
        },
        7 => Op::MapPages {
            ino: p.u64("ino")?,
            index: p.u64("index")?,
            page: p.u64("page")?,
            count: p.u64("count")?,
        },
        8 => Op::Stamp {
            now: p.u64("stamp")?,
        },
        t => {
            return Err(DecodeError {
                offset: p.base - 1,
                field: "record type",
                why: format!("{t} is not a record type"),
            });
        }
    })
}

/// The body of a create record.
fn decode_create(p: &mut Cursor<'_>) -> Result<Op, DecodeError> {
    let parent = p.u64("parent")?;
    let ino = p.u64("ino")?;
    let kat = p.base + p.pos;
    let k = p.u8("kind")?;
    let kind = match Kind::from_u8(k) {
        Some(k) if k != Kind::Free => k,
        _ => {
            return Err(DecodeError {
                offset: kat,
                field: "kind",
                why: format!("{k} is not an object kind"),
            });
        }
    };
    let mode = p.u32("mode")?;
    let domain = p.u16("domain")?;
    let name = p.str("name")?;
    Ok(Op::Create {
        parent,
        name,
        ino,
        kind,
        mode,
        domain,
    })
}

/// Decodes a whole batch; any damage anywhere rejects it whole.
pub fn decode_batch(b: &[u8]) -> Result<Vec<Op>, DecodeError> {
    let mut c = Cursor { b, pos: 0, base: 0 };
    let magic = c.u32("batch magic")?;
    if magic != BATCH_MAGIC {
        return Err(DecodeError {
            offset: 0,
            field: "batch magic",
            why: format!("{magic:#010x} is not a journal batch"),
        });
    }
    let n = c.u32("record count")? as usize;
    // Each record takes at least 9 bytes, so a count beyond that is a lie.
    if n > (b.len() - 8) / 9 {
        return Err(DecodeError {
            offset: 4,
            field: "record count",
            why: format!("{n} records cannot fit {} bytes", b.len() - 8),
        });
    }
    let mut ops = Vec::with_capacity(n);
    let mut pos = 8;
    for _ in 0..n {
        let (op, used) = decode_op(&b[pos..], pos)?;
        ops.push(op);
        pos += used;
    }
    if pos != b.len() {
        return Err(DecodeError {
            offset: pos,
            field: "batch",
            why: format!("{} bytes after the last record", b.len() - pos),
        });
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_name() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._-]{1,40}"
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (
                any::<u64>(),
                arb_name(),
                any::<u64>(),
                1u8..4,
                any::<u32>(),
                any::<u16>()
            )
                .prop_map(|(parent, name, ino, k, mode, domain)| Op::Create {
                    parent,
                    name,
                    ino,
                    kind: Kind::from_u8(k).unwrap(),
                    mode,
                    domain
                }),
            (any::<u64>(), arb_name(), any::<u64>()).prop_map(|(parent, name, ino)| Op::Link {
                parent,
                name,
                ino
            }),
            (any::<u64>(), arb_name(), any::<u64>()).prop_map(|(parent, name, ino)| Op::Unlink {
                parent,
                name,
                ino
            }),
            (any::<u64>(), arb_name(), any::<u64>()).prop_map(|(parent, name, ino)| Op::Rmdir {
                parent,
                name,
                ino
            }),
            (
                any::<u64>(),
                arb_name(),
                any::<u64>(),
                arb_name(),
                any::<u64>(),
                any::<u64>()
            )
                .prop_map(
                    |(from_parent, from_name, to_parent, to_name, ino, replace)| {
                        Op::Rename {
                            from_parent,
                            from_name,
                            to_parent,
                            to_name,
                            ino,
                            replace,
                        }
                    }
                ),
            (any::<u64>(), any::<u64>()).prop_map(|(ino, size)| Op::SetSize { ino, size }),
            (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
                |(ino, index, page, count)| Op::MapPages {
                    ino,
                    index,
                    page,
                    count
                }
            ),
            any::<u64>().prop_map(|now| Op::Stamp { now }),
        ]
    }

    proptest! {
        #[test]
        fn batches_round_trip(ops in proptest::collection::vec(arb_op(), 0..20)) {
            let b = encode_batch(&ops);
            prop_assert_eq!(decode_batch(&b).unwrap(), ops);
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_batch(&b);
            let _ = decode_op(&b, 0);
        }

        #[test]
        fn any_single_flip_is_caught(ops in proptest::collection::vec(arb_op(), 1..6), at in any::<prop::sample::Index>(), bit in 0u8..8) {
            let mut b = encode_batch(&ops);
            let i = at.index(b.len());
            b[i] ^= 1 << bit;
            // A flipped bit either fails to decode or (only in the count or a length
            // field) cannot yield the same operations.
            if let Ok(d) = decode_batch(&b) { prop_assert_ne!(d, ops) }
        }
    }

    #[test]
    fn errors_name_the_offset() {
        let mut b = encode_batch(&[Op::SetSize { ino: 3, size: 9 }]);
        b[20] ^= 0xff;
        let e = decode_batch(&b).unwrap_err();
        assert_eq!((e.offset, e.field), (12, "record checksum"));
        assert_eq!(
            decode_batch(b"NOPE\0\0\0\0").unwrap_err().field,
            "batch magic"
        );
    }
}

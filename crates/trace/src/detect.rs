//! Opening a trace: decompression and format recognition by magic bytes and first lines.

use std::fs::File;
use std::io::{Cursor, Read, Seek};
use std::str::FromStr;

use crate::{
    BINARY_MAGIC, BinaryReader, DinReader, LackeyReader, MappedBinaryReader, RefSource, TraceError,
};

/// A trace format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Dinero IV extended din, `-informat D`.
    DinExtended,
    /// Dinero traditional din, `-informat d`.
    DinTraditional,
    /// valgrind lackey `--trace-mem=yes` output.
    Lackey,
    /// pmlab's binary format.
    Binary,
}

impl Format {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::DinExtended => "D",
            Format::DinTraditional => "d",
            Format::Lackey => "lackey",
            Format::Binary => "bin",
        }
    }
}

impl FromStr for Format {
    type Err = String;

    /// Accepts Dinero's `D` and `d`, and `din`/`xdin` for extended din, `lackey`,
    /// `bin`/`binary`/`pmlab`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "D" | "din" | "xdin" => Ok(Format::DinExtended),
            "d" => Ok(Format::DinTraditional),
            "lackey" => Ok(Format::Lackey),
            "bin" | "binary" | "pmlab" => Ok(Format::Binary),
            _ => Err(format!(
                "unknown trace format '{s}' (expected D, d, lackey or bin)"
            )),
        }
    }
}

/// A compression wrapper recognised by its magic bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Plain bytes.
    None,
    /// xz (`FD 37 7A 58 5A 00`).
    Xz,
    /// zstd (`28 B5 2F FD`).
    Zstd,
}

/// The compression of a stream starting with `head`.
pub fn detect_compression(head: &[u8]) -> Compression {
    if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Compression::Xz
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// The format of an uncompressed trace starting with `head`, if recognisable: the binary
/// magic, else the first line that is not a valgrind banner: `I  `, ` L `, ` S `, ` M `
/// for lackey, a single access letter then a blank for extended din, hex digits then a
/// blank for traditional din.
pub fn detect_format(head: &[u8]) -> Option<Format> {
    if head.starts_with(&BINARY_MAGIC) {
        return Some(Format::Binary);
    }
    for line in head.split(|&b| b == b'\n') {
        if line.starts_with(b"==")
            || line.starts_with(b"--")
            || line.iter().all(|b| b.is_ascii_whitespace())
        {
            continue;
        }
        if line.starts_with(b"I  ")
            || line.starts_with(b" L ")
            || line.starts_with(b" S ")
            || line.starts_with(b" M ")
        {
            return Some(Format::Lackey);
        }
        let trimmed: &[u8] = {
            let start = line
                .iter()
                .position(|b| !matches!(b, b' ' | b'\t'))
                .unwrap_or(line.len());
            &line[start..]
        };
        let token_len = trimmed
            .iter()
            .position(|b| matches!(b, b' ' | b'\t'))
            .unwrap_or(trimmed.len());
        let token = &trimmed[..token_len];
        if token.len() == 1 && b"rwimcvRWIMCV".contains(&token[0]) {
            return Some(Format::DinExtended);
        }
        if !token.is_empty() && token.iter().all(|b| b.is_ascii_hexdigit()) {
            return Some(Format::DinTraditional);
        }
        return None;
    }
    None
}

/// Reads up to `n` bytes (fewer only at the end of the stream).
fn peek(r: &mut dyn Read, n: usize, name: &str) -> Result<Vec<u8>, TraceError> {
    let mut head = Vec::with_capacity(n);
    r.take(n as u64)
        .read_to_end(&mut head)
        .map_err(|error| TraceError::Io {
            source_name: name.to_string(),
            error,
        })?;
    Ok(head)
}

/// Opens the trace at `path` (`-` for standard input), decompressing xz or zstd and
/// detecting the format unless `format` is given.
pub fn open_trace(
    path: &str,
    format: Option<Format>,
) -> Result<Box<dyn RefSource + Send>, TraceError> {
    if path == "-" {
        trace_from_reader(Box::new(std::io::stdin()), "<stdin>", format)
    } else {
        let io = |error| TraceError::Io {
            source_name: path.to_string(),
            error,
        };
        let mut file = File::open(path).map_err(io)?;
        if let Some(mapped) = try_mapped(&mut file, path, format).map_err(io)? {
            return Ok(mapped);
        }
        trace_from_reader(Box::new(file), path, format)
    }
}

/// A reader that maps `file` when it is a regular file holding an uncompressed binary
/// trace (the fast way to read one); `None`, with the file rewound, otherwise.
fn try_mapped(
    file: &mut File,
    path: &str,
    format: Option<Format>,
) -> std::io::Result<Option<Box<dyn RefSource + Send>>> {
    if !matches!(format, None | Some(Format::Binary)) || !file.metadata()?.is_file() {
        return Ok(None);
    }
    let mut magic = [0u8; BINARY_MAGIC.len()];
    let is_binary = match file.read_exact(&mut magic) {
        Ok(()) => magic == BINARY_MAGIC,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => false,
        Err(e) => return Err(e),
    };
    file.rewind()?;
    if !is_binary {
        return Ok(None);
    }
    // A file that cannot be mapped is still read, through the stream reader.
    Ok(MappedBinaryReader::new(file, path)
        .ok()
        .map(|r| Box::new(r) as Box<dyn RefSource + Send>))
}

/// A trace reader over `raw`, decompressing xz or zstd and detecting the format unless
/// `format` is given; `name` is used in errors.
pub fn trace_from_reader(
    mut raw: Box<dyn Read + Send>,
    name: &str,
    format: Option<Format>,
) -> Result<Box<dyn RefSource + Send>, TraceError> {
    let magic = peek(&mut raw, 6, name)?;
    let compression = detect_compression(&magic);
    let rejoined: Box<dyn Read + Send> = Box::new(Cursor::new(magic).chain(raw));
    let decoded = match compression {
        Compression::None => Ok(rejoined),
        Compression::Xz => crate::decompress::xz(rejoined),
        Compression::Zstd => crate::decompress::zstd(rejoined),
    };
    let mut plain = decoded.map_err(|error| TraceError::Io {
        source_name: name.to_string(),
        error,
    })?;
    let format = match format {
        Some(f) => f,
        None => {
            let head = peek(&mut plain, 4096, name)?;
            let f = detect_format(&head).ok_or_else(|| TraceError::Format {
                source_name: name.to_string(),
                message: "cannot recognise the trace format from its first bytes; name it (D, d, lackey or bin)"
                    .into(),
            })?;
            plain = Box::new(Cursor::new(head).chain(plain));
            f
        }
    };
    Ok(match format {
        Format::DinExtended => Box::new(DinReader::extended(plain, name)),
        Format::DinTraditional => Box::new(DinReader::traditional(plain, name)),
        Format::Lackey => Box::new(LackeyReader::new(plain, name)),
        Format::Binary => Box::new(BinaryReader::new(plain, name)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_each_format() {
        assert_eq!(detect_format(b"PMLTRACE\x01\x00"), Some(Format::Binary));
        assert_eq!(
            detect_format(b"==1== Lackey\n==1== x\nI  0400,3\n"),
            Some(Format::Lackey)
        );
        assert_eq!(detect_format(b"i 04936970 2\n"), Some(Format::DinExtended));
        assert_eq!(detect_format(b"2 4936970\n"), Some(Format::DinTraditional));
        assert_eq!(detect_format(b"hello world\n"), None);
        assert_eq!(detect_format(b""), None);
    }

    #[test]
    fn format_names_parse() {
        for f in [
            Format::DinExtended,
            Format::DinTraditional,
            Format::Lackey,
            Format::Binary,
        ] {
            assert_eq!(f.name().parse::<Format>(), Ok(f));
        }
        assert!("x".parse::<Format>().is_err());
    }
}

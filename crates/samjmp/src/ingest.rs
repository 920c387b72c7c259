//! Reading SAM and BAM through noodles into the arena.
//!
//! SAM is read a line at a time so that an error names its line; each line is
//! parsed by noodles' SAM reader and its fields checked one by one, so that an error
//! also names its field. BAM is decoded by noodles' BAM reader and each record
//! written as SAM text by noodles' writer, then taken the same way (one path for
//! both formats; a record's place is then its number in the file).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use noodles::sam::alignment::io::Write as _;
use noodles::sam::alignment::record::cigar::op::Kind;
use noodles::{bam, sam};

use crate::arena::{Addressing, Arena};
use crate::error::{Place, SamError};
use crate::layout::{MAX_END, MAX_POS, Rec, Ref, RefSeq};
use crate::publish::Slot;

/// The names of SAM's mandatory fields, in order.
const FIELDS: [&str; 11] = [
    "QNAME", "FLAG", "RNAME", "POS", "MAPQ", "CIGAR", "RNEXT", "PNEXT", "TLEN", "SEQ", "QUAL",
];

/// An input's format, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Plain SAM text.
    Sam,
    /// BGZF-compressed BAM.
    Bam,
}

/// Decides the format: gzip magic means BAM (BGZF), anything else SAM.
pub fn detect(path: &Path) -> Result<Format, SamError> {
    let mut f = File::open(path).map_err(|e| SamError::io("open", path, e))?;
    let mut m = [0u8; 2];
    let n = f.read(&mut m).map_err(|e| SamError::io("read", path, e))?;
    Ok(if n == 2 && m == [0x1f, 0x8b] {
        Format::Bam
    } else {
        Format::Sam
    })
}

/// What a load did.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadStats {
    /// Records stored.
    pub records: u64,
    /// Arena bytes used.
    pub bytes_used: u64,
    /// Input bytes read (SAM) or records decoded (BAM).
    pub input_bytes: u64,
}

/// Loads `path` (SAM or BAM) into a freshly initialised arena and marks it complete.
pub fn load<A: Addressing>(
    arena: &mut Arena<A>,
    path: &Path,
    progress: bool,
) -> Result<LoadStats, SamError> {
    arena.init()?;
    if crate::crash::broken(crate::crash::Broken::PublishFirst) {
        arena.publish(Slot::Complete, 1)?;
    }
    let bar = progress_bar(path, progress);
    let mut sink = Sink {
        arena,
        refs: Vec::new(),
        header: sam::Header::default(),
        file: path,
        rec: sam::Record::default(),
    };
    let input_bytes = match detect(path)? {
        Format::Sam => read_sam(&mut sink, path, &bar)?,
        Format::Bam => read_bam(&mut sink, path, &bar)?,
    };
    bar.finish_and_clear();
    let Sink { arena, refs, .. } = sink;
    let n = refs.len() as u64;
    let table = arena.put_slice(&refs)?;
    let root = arena.root_mut();
    root.records = table;
    root.n_records = n;
    // Everything written back, then published by one store: a structure whose load
    // stopped half-way is refused later (and a new load may replace it).
    if !crate::crash::broken(crate::crash::Broken::PublishFirst) {
        let used = arena.root().used;
        arena.persist_offsets(0, used)?;
        arena.publish(Slot::Complete, 1)?;
    }
    Ok(LoadStats {
        records: n,
        bytes_used: arena.root().used,
        input_bytes,
    })
}

fn progress_bar(path: &Path, progress: bool) -> ProgressBar {
    if !progress {
        return ProgressBar::hidden();
    }
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} {msg}")
            .expect("valid template"),
    );
    b.set_message("loading");
    b
}

/// Where parsed records go.
struct Sink<'a, A: Addressing> {
    arena: &'a mut Arena<A>,
    refs: Vec<Ref>,
    header: sam::Header,
    file: &'a Path,
    rec: sam::Record,
}

impl<A: Addressing> Sink<'_, A> {
    fn set_header(&mut self, text: &[u8], header: sam::Header) -> Result<(), SamError> {
        let h = self.arena.put_bytes(text)?;
        let mut seqs = Vec::new();
        for (name, rs) in header.reference_sequences() {
            let name_ref = self.arena.put_bytes(name)?;
            seqs.push(RefSeq {
                name: name_ref,
                name_len: name.len() as u64,
                len: rs.length().get() as u64,
            });
        }
        let table = self.arena.put_slice(&seqs)?;
        let root = self.arena.root_mut();
        root.header = h;
        root.header_len = text.len() as u64;
        root.refs = table;
        root.n_refs = seqs.len() as u64;
        self.header = header;
        Ok(())
    }

    /// Parses one SAM line (without its newline) and stores it.
    fn take_line(&mut self, line: &[u8], place: Place) -> Result<(), SamError> {
        let mut reader = sam::io::Reader::new(line);
        if let Err(e) = reader.read_record(&mut self.rec) {
            let fields = line.split(|&b| b == b'\t').count();
            return Err(match FIELDS.get(fields) {
                Some(missing) if fields < 11 => bad(
                    self.file,
                    place,
                    missing,
                    format!("missing: the record has {fields} of SAM's 11 mandatory fields"),
                ),
                _ => bad(self.file, place, "record", e.to_string()),
            });
        }
        let f = fields(&self.rec, line, &self.header, self.file, place)?;
        let r = put_record(self.arena, &f)?;
        self.refs.push(r);
        Ok(())
    }
}

/// One record's fields, checked.
struct Fields<'r> {
    name: &'r [u8],
    flag: u16,
    tid: i32,
    pos: i64,
    mapq: u8,
    cigar: Vec<u32>,
    rlen: i64,
    mtid: i32,
    mpos: i64,
    tlen: i32,
    seq: &'r [u8],
    qual: &'r [u8],
    aux: &'r [u8],
}

fn bad(file: &Path, place: Place, field: &'static str, problem: impl Into<String>) -> SamError {
    SamError::Record {
        file: file.to_path_buf(),
        place,
        field,
        problem: problem.into(),
    }
}

/// Checks one parsed record's fields.
fn fields<'r>(
    r: &'r sam::Record,
    line: &'r [u8],
    header: &sam::Header,
    file: &Path,
    place: Place,
) -> Result<Fields<'r>, SamError> {
    let e = |field, err: std::io::Error| bad(file, place, field, err.to_string());
    let flag = r.flags().map_err(|x| e("FLAG", x))?.bits();
    let tid = reference_id(r.reference_sequence_id(header), file, place, "RNAME")?;
    let pos = zero_based(r.alignment_start(), file, place, "POS")?;
    let mapq = match r.mapping_quality() {
        None => 255,
        Some(q) => u8::from(q.map_err(|x| e("MAPQ", x))?),
    };
    if pos > MAX_POS {
        return Err(bad(
            file,
            place,
            "POS",
            format!("{} is past 2^31 - 1", pos + 1),
        ));
    }
    let (cigar, rlen, qlen) = cigar(r, file, place)?;
    if pos + rlen.max(1) > MAX_END {
        return Err(bad(
            file,
            place,
            "CIGAR",
            format!("covers {rlen} reference bases"),
        ));
    }
    let mtid = reference_id(r.mate_reference_sequence_id(header), file, place, "RNEXT")?;
    let mpos = zero_based(r.mate_alignment_start(), file, place, "PNEXT")?;
    let tlen = r.template_length().map_err(|x| e("TLEN", x))?;
    let (seq, qual, aux) = raw_columns(line, qlen, !cigar.is_empty(), file, place)?;
    for field in r.data().iter() {
        field.map_err(|x| e("TAG", x))?;
    }
    Ok(Fields {
        name: r.name().map_or(b"*", |n| n.as_ref()),
        flag,
        tid,
        pos,
        mapq,
        cigar,
        rlen,
        mtid,
        mpos,
        tlen,
        seq,
        qual,
        aux,
    })
}

/// A reference index (RNAME or RNEXT), -1 for `*`.
fn reference_id(
    id: Option<std::io::Result<usize>>,
    file: &Path,
    place: Place,
    field: &'static str,
) -> Result<i32, SamError> {
    match id {
        None => Ok(-1),
        Some(Ok(i)) => Ok(i as i32),
        Some(Err(_)) => Err(bad(
            file,
            place,
            field,
            "not a reference sequence of the header",
        )),
    }
}

/// A 1-based position (POS or PNEXT) as BAM's 0-based one, -1 for 0.
fn zero_based(
    pos: Option<std::io::Result<noodles::core::Position>>,
    file: &Path,
    place: Place,
    field: &'static str,
) -> Result<i64, SamError> {
    match pos {
        None => Ok(-1),
        Some(p) => Ok(p.map_err(|x| bad(file, place, field, x.to_string()))?.get() as i64 - 1),
    }
}

/// SEQ, QUAL and the tags, as bytes of the line.
type RawColumns<'r> = (&'r [u8], &'r [u8], &'r [u8]);

/// SEQ, QUAL and the tags as the line has them (empty for `*`), checked against the
/// query length the CIGAR covers.
fn raw_columns<'r>(
    line: &'r [u8],
    qlen: u64,
    has_cigar: bool,
    file: &Path,
    place: Place,
) -> Result<RawColumns<'r>, SamError> {
    // noodles split the line already; its raw SEQ, QUAL and tags are taken from
    // the line itself, to be copied as they are.
    let mut cols = line.splitn(12, |&b| b == b'\t').skip(9);
    let star = |c: Option<&'r [u8]>| c.filter(|&c| c != b"*").unwrap_or(b"");
    let (seq, qual) = (star(cols.next()), star(cols.next()));
    let aux = cols.next().unwrap_or(b"");
    if !seq.is_empty() && has_cigar && qlen != seq.len() as u64 {
        let problem = format!("covers {qlen} query bases, SEQ has {}", seq.len());
        return Err(bad(file, place, "CIGAR", problem));
    }
    if !qual.is_empty() && qual.len() != seq.len() {
        let problem = format!("{} quality scores for {} bases", qual.len(), seq.len());
        return Err(bad(file, place, "QUAL", problem));
    }
    Ok((seq, qual, aux))
}

/// The CIGAR in BAM's encoding, with the reference and query lengths it covers.
fn cigar(r: &sam::Record, file: &Path, place: Place) -> Result<(Vec<u32>, i64, u64), SamError> {
    {
        let mut ops = Vec::new();
        let (mut rlen, mut qlen) = (0i64, 0u64);
        for op in r.cigar().iter() {
            let op = op.map_err(|x| bad(file, place, "CIGAR", x.to_string()))?;
            let code = match op.kind() {
                Kind::Match => 0,
                Kind::Insertion => 1,
                Kind::Deletion => 2,
                Kind::Skip => 3,
                Kind::SoftClip => 4,
                Kind::HardClip => 5,
                Kind::Pad => 6,
                Kind::SequenceMatch => 7,
                Kind::SequenceMismatch => 8,
            };
            let len = op.len();
            if len >= 1 << 28 {
                return Err(bad(
                    file,
                    place,
                    "CIGAR",
                    format!("operation length {len} too long"),
                ));
            }
            if matches!(code, 0 | 2 | 3 | 7 | 8) {
                rlen += len as i64;
            }
            if matches!(code, 0 | 1 | 4 | 7 | 8) {
                qlen += len as u64;
            }
            ops.push(((len as u32) << 4) | code);
        }
        Ok((ops, rlen, qlen))
    }
}

/// Stores one record: the `Rec` and its variable parts in one block.
fn put_record<A: Addressing>(arena: &mut Arena<A>, f: &Fields<'_>) -> Result<Ref, SamError> {
    let head = std::mem::size_of::<Rec>() as u64;
    let cig = 4 * f.cigar.len() as u64;
    let var = [f.name, f.seq, f.qual, f.aux];
    let total = head + cig + var.iter().map(|v| v.len() as u64).sum::<u64>();
    let r = arena.alloc(total, 8)?;
    let a = arena.addressing();
    let p = a.ptr(r);
    let mut off = head + cig;
    let mut refs = [0u64; 4];
    for (i, v) in var.iter().enumerate() {
        refs[i] = r + off;
        // SAFETY: `alloc` returned `total` bytes at `p`; the pieces lie inside.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p.add(off as usize), v.len()) };
        off += v.len() as u64;
    }
    // htslib's bam_endpos: an unmapped read, or one whose CIGAR covers no reference
    // base, covers one base for region queries.
    let rlen = if f.flag & 4 != 0 || f.rlen == 0 {
        1
    } else {
        f.rlen
    };
    let rec = Rec {
        name: refs[0],
        cigar: r + head,
        seq: refs[1],
        qual: refs[2],
        aux: refs[3],
        pos: f.pos,
        end: f.pos + rlen,
        mpos: f.mpos,
        tid: f.tid,
        mtid: f.mtid,
        tlen: f.tlen,
        name_len: f.name.len() as u32,
        n_cigar: f.cigar.len() as u32,
        l_seq: f.seq.len() as u32,
        l_qual: f.qual.len() as u32,
        aux_len: f.aux.len() as u32,
        flag: f.flag,
        mapq: f.mapq,
        pad: [0; 5],
    };
    // SAFETY: the block starts 8-aligned with room for a `Rec` and the CIGAR.
    unsafe {
        p.cast::<Rec>().write(rec);
        std::ptr::copy_nonoverlapping(
            f.cigar.as_ptr(),
            p.add(head as usize).cast::<u32>(),
            f.cigar.len(),
        );
    }
    Ok(r)
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let l = line.strip_suffix(b"\n").unwrap_or(line);
    l.strip_suffix(b"\r").unwrap_or(l)
}

fn read_sam<A: Addressing>(
    sink: &mut Sink<'_, A>,
    path: &Path,
    bar: &ProgressBar,
) -> Result<u64, SamError> {
    let f = File::open(path).map_err(|e| SamError::io("open", path, e))?;
    let mut r = BufReader::with_capacity(1 << 20, f);
    let io = |e| SamError::io("read", path, e);
    let (mut line, mut header_text) = (Vec::new(), Vec::new());
    let (mut lineno, mut bytes) = (0u64, 0u64);
    let mut first = None;
    loop {
        line.clear();
        let n = r.read_until(b'\n', &mut line).map_err(io)?;
        if n == 0 {
            break;
        }
        lineno += 1;
        bytes += n as u64;
        if line[0] == b'@' {
            header_text.extend_from_slice(&line);
        } else {
            first = Some(std::mem::take(&mut line));
            break;
        }
    }
    let header = sam::io::Reader::new(&header_text[..])
        .read_header()
        .map_err(|e| SamError::Header {
            file: path.to_path_buf(),
            problem: e.to_string(),
        })?;
    sink.set_header(&header_text, header)?;
    if let Some(l) = first {
        sink.take_line(trim_newline(&l), Place::Line(lineno))?;
    }
    loop {
        line.clear();
        let n = r.read_until(b'\n', &mut line).map_err(io)?;
        if n == 0 {
            break;
        }
        lineno += 1;
        bytes += n as u64;
        sink.take_line(trim_newline(&line), Place::Line(lineno))?;
        if lineno % 65536 == 0 {
            bar.set_position(bytes);
        }
    }
    Ok(bytes)
}

fn read_bam<A: Addressing>(
    sink: &mut Sink<'_, A>,
    path: &Path,
    bar: &ProgressBar,
) -> Result<u64, SamError> {
    let f = File::open(path).map_err(|e| SamError::io("open", path, e))?;
    let mut reader = bam::io::Reader::new(BufReader::with_capacity(1 << 20, f));
    let truncated = |records, e: std::io::Error| SamError::Bam {
        file: path.to_path_buf(),
        records,
        problem: e.to_string(),
    };
    let header = reader.read_header().map_err(|e| truncated(0, e))?;
    let mut text = Vec::new();
    sam::io::Writer::new(&mut text)
        .write_header(&header)
        .map_err(|e| SamError::io("format header of", path, e))?;
    sink.set_header(&text, header.clone())?;
    let mut rec = bam::Record::default();
    let mut line = Vec::new();
    let mut n = 0u64;
    loop {
        match reader.read_record(&mut rec) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(truncated(n, e)),
        }
        n += 1;
        line.clear();
        sam::io::Writer::new(&mut line)
            .write_alignment_record(&header, &rec)
            .map_err(|e| SamError::Record {
                file: path.to_path_buf(),
                place: Place::Record(n),
                field: "record",
                problem: e.to_string(),
            })?;
        sink.take_line(trim_newline(&line), Place::Record(n))?;
        if n % 65536 == 0 {
            bar.set_message(format!("{n} records"));
        }
    }
    Ok(n)
}

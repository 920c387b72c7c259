//! A seeded generator of realistic alignments (SAM text) over a generated reference.
//!
//! Every random choice is xoshiro256++ (`rand_xoshiro::Xoshiro256PlusPlus`) seeded
//! from the run's seed, so a seed and a size name one data set. What it makes:
//!
//! * a reference of 8 chromosomes (`chr1`..`chr8`, 2 to 9 Mbp, random bases);
//! * read pairs of 100 bp in random (aligner-like, unsorted) order, named like
//!   Illumina reads (`SIM:1:FC01:LANE:TILE:X:Y`), insert sizes about 300 ± 60;
//! * flags as an aligner sets them: paired, read1/read2, mate strands, about 92%
//!   properly paired, 2% of reads unmapped (placed at their mate, as BWA does),
//!   0.5% pairs wholly unmapped, 1% of mates on another chromosome, 4% duplicates,
//!   1% QC-failed, and extra secondary (1%) and supplementary (0.5%) records;
//! * CIGARs: mostly `100M`, 10% soft-clipped, 6% with a 1-4 bp insertion or deletion;
//! * SEQ from the reference with 1% mismatches (reverse-complemented on the reverse
//!   strand), qualities falling along the read, MAPQ mostly 60, and `NM`, `AS`, `RG`
//!   tags.

use std::io::{self, Write};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const READ_LEN: usize = 100;
const CHROMS: usize = 8;

/// What was generated.
#[derive(Clone, Copy, Debug, Default)]
pub struct Generated {
    /// Records written.
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
}

struct Gen {
    rng: Xoshiro256PlusPlus,
    refs: Vec<Vec<u8>>,
    line: Vec<u8>,
    records: u64,
}

/// One alignment of one read.
struct Aln {
    flag: u16,
    tid: i32,
    pos: i64,
    mapq: u8,
    cigar: String,
    mtid: i32,
    mpos: i64,
    tlen: i64,
    seq: Vec<u8>,
    nm: u32,
}

/// Writes a SAM data set of at least `target_bytes` to `out`.
pub fn generate(out: &mut impl Write, target_bytes: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let refs: Vec<Vec<u8>> = (0..CHROMS)
        .map(|_| {
            let len = rng.gen_range(2_000_000..9_000_000);
            (0..len).map(|_| b"ACGT"[rng.gen_range(0..4)]).collect()
        })
        .collect();
    let mut header = String::from("@HD\tVN:1.6\tSO:unsorted\n");
    for (i, r) in refs.iter().enumerate() {
        header += &format!("@SQ\tSN:chr{}\tLN:{}\n", i + 1, r.len());
    }
    header += "@RG\tID:grp1\tSM:sample1\tPL:ILLUMINA\n";
    header += "@PG\tID:pmlab-generate\tPN:pmlab\n";
    out.write_all(header.as_bytes())?;
    let mut g = Gen {
        rng,
        refs,
        line: Vec::with_capacity(1024),
        records: 0,
    };
    let mut bytes = header.len() as u64;
    let mut pair = 0u64;
    while bytes < target_bytes {
        g.line.clear();
        g.pair(pair);
        out.write_all(&g.line)?;
        bytes += g.line.len() as u64;
        pair += 1;
    }
    Ok(Generated {
        records: g.records,
        bytes,
    })
}

fn revcomp(s: &[u8]) -> Vec<u8> {
    s.iter()
        .rev()
        .map(|&b| match b {
            b'A' => b'T',
            b'C' => b'G',
            b'G' => b'C',
            b'T' => b'A',
            x => x,
        })
        .collect()
}

impl Gen {
    fn chance(&mut self, p: f64) -> bool {
        self.rng.gen_bool(p)
    }

    /// A read's bases from `tid:pos` with 1% mismatches, and its CIGAR and NM.
    fn read(&mut self, tid: usize, pos: usize, rev: bool) -> (Vec<u8>, String, u32) {
        let r = &self.refs[tid];
        let mut seq: Vec<u8> = r[pos..pos + READ_LEN].to_vec();
        let mut nm = 0;
        for b in seq.iter_mut() {
            if self.rng.gen_bool(0.01) {
                *b = b"ACGT"[(b"ACGT".iter().position(|x| x == b).unwrap_or(0) + 1) % 4];
                nm += 1;
            }
        }
        let cigar = if self.chance(0.10) {
            let clip = self.rng.gen_range(3..30);
            if self.chance(0.5) {
                format!("{clip}S{}M", READ_LEN - clip)
            } else {
                format!("{}M{clip}S", READ_LEN - clip)
            }
        } else if self.chance(0.066) {
            let at = self.rng.gen_range(20..80);
            let len = self.rng.gen_range(1..5);
            nm += len as u32;
            if self.chance(0.5) {
                format!("{at}M{len}I{}M", READ_LEN - at - len)
            } else {
                format!("{at}M{len}D{}M", READ_LEN - at)
            }
        } else {
            format!("{READ_LEN}M")
        };
        if rev {
            seq = revcomp(&seq);
        }
        (seq, cigar, nm)
    }

    fn qualities(&mut self) -> Vec<u8> {
        (0..READ_LEN)
            .map(|i| {
                let top = 40 - (i * 15 / READ_LEN) as i32;
                let q = (top - self.rng.gen_range(0..12)).clamp(2, 41);
                (q as u8) + 33
            })
            .collect()
    }

    fn name(&mut self, pair: u64) -> String {
        let lane = 1 + pair % 8;
        let tile = 1101 + (pair / 8) % 64;
        format!(
            "SIM:1:FC01:{lane}:{tile}:{}:{}",
            self.rng.gen_range(1000..30000),
            self.rng.gen_range(1000..30000)
        )
    }
}

impl Gen {
    /// Places a read: chromosome and position with room for the read.
    fn place(&mut self, tid: Option<usize>) -> (usize, usize) {
        let tid = tid.unwrap_or_else(|| self.rng.gen_range(0..CHROMS));
        let pos = self
            .rng
            .gen_range(0..self.refs[tid].len() - 2 * READ_LEN - 800);
        (tid, pos)
    }

    /// One read pair (and its secondary or supplementary records) as SAM lines.
    fn pair(&mut self, pair: u64) {
        let name = self.name(pair);
        let both_unmapped = self.chance(0.005);
        let other_chr = !both_unmapped && self.chance(0.01);
        let (tid1, pos1) = self.place(None);
        let insert = 180 + self.rng.gen_range(0..120) + self.rng.gen_range(0..120);
        let (tid2, pos2) = if other_chr {
            let shift = self.rng.gen_range(0..CHROMS - 1);
            self.place(Some((tid1 + 1 + shift) % CHROMS))
        } else {
            (tid1, pos1 + insert - READ_LEN)
        };
        let unmapped = [
            both_unmapped || self.chance(0.02),
            both_unmapped || self.chance(0.02),
        ];
        let first_rev = self.chance(0.5);
        let proper = !other_chr && !unmapped[0] && !unmapped[1] && self.chance(0.94);
        let dup = self.chance(0.04);
        let qcfail = self.chance(0.01);
        let mut alns = Vec::with_capacity(3);
        for (i, &(tid, pos)) in [(tid1, pos1), (tid2, pos2)].iter().enumerate() {
            let rev = first_rev ^ (i == 1);
            let (seq, cigar, nm) = self.read(tid, pos, rev);
            let mut flag = 0x1 | if i == 0 { 0x40 } else { 0x80 };
            flag |= if rev { 0x10 } else { 0 } | if !rev { 0x20 } else { 0 };
            flag |= if proper { 0x2 } else { 0 } | if dup { 0x400 } else { 0 };
            flag |= if qcfail { 0x200 } else { 0 };
            let mapq = match self.rng.gen_range(0..100) {
                0..=4 => 0,
                5..=14 => self.rng.gen_range(1..60),
                _ => 60,
            };
            alns.push(Aln {
                flag,
                tid: tid as i32,
                pos: pos as i64,
                mapq,
                cigar,
                mtid: 0,
                mpos: 0,
                tlen: 0,
                seq,
                nm,
            });
        }
        self.mate_up(&mut alns, unmapped, insert as i64);
        let (a, b) = (alns.remove(0), alns.remove(0));
        for x in [&a, &b] {
            self.emit(&name, x);
        }
        if !unmapped[0] && self.chance(0.01) {
            self.extra(&name, &a, 0x100);
        }
        if !unmapped[1] && self.chance(0.005) {
            self.extra(&name, &b, 0x800);
        }
    }

    /// Sets mate fields, and places unmapped reads at their mate as aligners do.
    fn mate_up(&mut self, alns: &mut [Aln], unmapped: [bool; 2], insert: i64) {
        for i in 0..2 {
            if unmapped[i] {
                let a = &mut alns[i];
                a.flag = (a.flag | 0x4) & !0x2 & !0x10;
                a.mapq = 0;
                a.cigar = "*".into();
                a.nm = 0;
                if unmapped[1 - i] {
                    a.tid = -1;
                    a.pos = -1;
                }
            }
        }
        for i in 0..2 {
            if unmapped[i] && !unmapped[1 - i] {
                alns[i].tid = alns[1 - i].tid;
                alns[i].pos = alns[1 - i].pos;
            }
        }
        for i in 0..2 {
            let (m_flag, m_tid, m_pos) = (alns[1 - i].flag, alns[1 - i].tid, alns[1 - i].pos);
            let a = &mut alns[i];
            a.flag &= !0x28;
            if m_flag & 0x4 != 0 {
                a.flag |= 0x8;
            }
            if m_flag & 0x10 != 0 {
                a.flag |= 0x20;
            }
            a.mtid = m_tid;
            a.mpos = m_pos;
            let same = a.tid == m_tid && a.tid >= 0 && (unmapped == [false, false]);
            a.tlen = if same {
                if a.pos <= m_pos { insert } else { -insert }
            } else {
                0
            };
        }
    }

    /// A secondary or supplementary alignment of `a` elsewhere.
    fn extra(&mut self, name: &str, a: &Aln, kind: u16) {
        let (tid, pos) = self.place(None);
        let (seq, _, nm) = self.read(tid, pos, false);
        let clip = self.rng.gen_range(30..70);
        let x = Aln {
            flag: (a.flag & !0x12 & !0x10) | kind,
            tid: tid as i32,
            pos: pos as i64,
            mapq: self.rng.gen_range(0..20),
            cigar: if kind == 0x800 {
                format!("{}M{clip}H", READ_LEN - clip)
            } else {
                format!("{READ_LEN}M")
            },
            mtid: a.mtid,
            mpos: a.mpos,
            tlen: 0,
            seq: if kind == 0x800 {
                seq[..READ_LEN - clip].to_vec()
            } else {
                seq
            },
            nm,
        };
        self.emit(name, &x);
    }

    fn emit(&mut self, name: &str, a: &Aln) {
        let chr = |t: i32| {
            if t < 0 {
                "*".to_string()
            } else {
                format!("chr{}", t + 1)
            }
        };
        let rnext = if a.mtid < 0 {
            "*".to_string()
        } else if a.mtid == a.tid {
            "=".to_string()
        } else {
            chr(a.mtid)
        };
        let qual = {
            let q = self.qualities();
            q[..a.seq.len()].to_vec()
        };
        let l = &mut self.line;
        let _ = write!(
            l,
            "{name}\t{}\t{}\t{}\t{}\t{}\t{rnext}\t{}\t{}\t",
            a.flag,
            chr(a.tid),
            a.pos + 1,
            a.mapq,
            a.cigar,
            a.mpos + 1,
            a.tlen
        );
        l.extend_from_slice(&a.seq);
        l.push(b'\t');
        l.extend_from_slice(&qual);
        let score = (a.seq.len() as u32).saturating_sub(5 * a.nm);
        let _ = writeln!(l, "\tNM:i:{}\tAS:i:{score}\tRG:Z:grp1", a.nm);
        self.records += 1;
    }
}

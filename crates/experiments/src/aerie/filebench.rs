//! FileBench's fileserver, webserver, webproxy and varmail personalities, reimplemented
//! from FileBench's own `workloads/*.f`: the same filesets (nfiles, meandirwidth,
//! meanfilesize, prealloc) and the same flowop sequence per iteration, run by one thread
//! (the paper reports the latency of one iteration) or by as many as FileBench runs
//! ([`Personality::filebench_threads`]), threads of one process that share its file
//! system client (one libFS per process, as in the paper) or, on tmpfs, the kernel.
//!
//! Choices FileBench makes that are kept: file sizes are drawn from a gamma distribution
//! with shape 1.5 (FileBench's default `filesizegamma` of 1500) and the fileset's mean;
//! `createfile` picks a file that does not exist, `openfile`, `deletefile` and
//! `statfile` one that does, uniformly at random; `appendfilerand` appends a size drawn
//! uniformly from 1 to its iosize; `readwholefile` and `writewholefile` move the file in
//! iosize pieces. Where FileBench draws each directory's width from a gamma distribution
//! with mean `meandirwidth`, every directory here holds exactly `meandirwidth` entries
//! and the tree is round(ln nfiles / ln meandirwidth) levels deep (at least one), so a
//! path has the mean depth FileBench aims for. Every random choice comes from one
//! xoshiro256++ generator seeded by the caller.

mod fileset;
mod posix;
mod runner;

pub use fileset::{Fileset, SIZE_GAMMA_SHAPE, gamma};
pub use posix::PosixTarget;
pub use runner::{LOG_PATH, Run, Target, run};

use serde::Serialize;

/// A FileBench personality.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Personality {
    /// `fileserver.f`: create/write, append, read, delete, stat.
    Fileserver,
    /// `webserver.f`: ten open/read/close and one append to a log.
    Webserver,
    /// `webproxy.f`: delete, create/append/close, five open/read/close.
    Webproxy,
    /// `varmail.f`: delete, create/append/fsync, open/read/append/fsync, open/read.
    Varmail,
}

/// One FileBench flowop. `fd` slots are FileBench's `fd=1` (the only one these
/// personalities use for fileset files; webserver's log is `fd=2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Flowop {
    /// `createfile`: a file that does not exist, opened for writing.
    CreateFile,
    /// `writewholefile`: the file's whole (drawn) size in iosize pieces.
    WriteWholeFile,
    /// `appendfilerand` on the open file, iosize = the personality's append size.
    AppendFileRand,
    /// `closefile`.
    CloseFile,
    /// `openfile` of an existing file.
    OpenFile,
    /// `readwholefile` in iosize pieces.
    ReadWholeFile,
    /// `deletefile` of an existing file.
    DeleteFile,
    /// `statfile` of an existing file.
    StatFile,
    /// `fsync` of the open file.
    Fsync,
    /// webserver's `appendfilerand` to the one-file `logfiles` fileset (fd=2).
    AppendLog,
}

/// Every flowop kind, in the order counts are reported.
pub const FLOWOPS: [Flowop; 10] = [
    Flowop::CreateFile,
    Flowop::WriteWholeFile,
    Flowop::AppendFileRand,
    Flowop::CloseFile,
    Flowop::OpenFile,
    Flowop::ReadWholeFile,
    Flowop::DeleteFile,
    Flowop::StatFile,
    Flowop::Fsync,
    Flowop::AppendLog,
];

impl Flowop {
    /// FileBench's name of the flowop.
    pub fn name(self) -> &'static str {
        match self {
            Flowop::CreateFile => "createfile",
            Flowop::WriteWholeFile => "writewholefile",
            Flowop::AppendFileRand => "appendfilerand",
            Flowop::CloseFile => "closefile",
            Flowop::OpenFile => "openfile",
            Flowop::ReadWholeFile => "readwholefile",
            Flowop::DeleteFile => "deletefile",
            Flowop::StatFile => "statfile",
            Flowop::Fsync => "fsync",
            Flowop::AppendLog => "appendfilerand(log)",
        }
    }
}

use Flowop::*;

const FILESERVER: &[Flowop] = &[
    CreateFile,
    WriteWholeFile,
    CloseFile,
    OpenFile,
    AppendFileRand,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    DeleteFile,
    StatFile,
];
const WEBSERVER: &[Flowop] = &[
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    AppendLog,
];
const WEBPROXY: &[Flowop] = &[
    DeleteFile,
    CreateFile,
    AppendFileRand,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
];
const VARMAIL: &[Flowop] = &[
    DeleteFile,
    CreateFile,
    AppendFileRand,
    Fsync,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    AppendFileRand,
    Fsync,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
];

/// A fileset and the sizes a personality runs with.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Params {
    /// Files in the fileset (`$nfiles`).
    pub nfiles: usize,
    /// Entries per directory (`$meandirwidth`).
    pub meandirwidth: usize,
    /// Mean file size in bytes (`$meanfilesize`).
    pub meanfilesize: u64,
    /// Piece size of whole-file reads and writes (`$iosize`).
    pub iosize: u64,
    /// Upper bound of `appendfilerand` sizes (`$meanappendsize`, webproxy's `$meaniosize`).
    pub appendsize: u64,
    /// Percent of the files that exist before the run (`prealloc`).
    pub prealloc: u32,
    /// Iterations timed.
    pub iterations: usize,
}

impl Personality {
    /// All four, in the order tables list them.
    pub const ALL: [Personality; 4] = [
        Personality::Fileserver,
        Personality::Webserver,
        Personality::Webproxy,
        Personality::Varmail,
    ];

    /// Lower-case name, as FileBench's file is named.
    pub fn name(self) -> &'static str {
        match self {
            Personality::Fileserver => "fileserver",
            Personality::Webserver => "webserver",
            Personality::Webproxy => "webproxy",
            Personality::Varmail => "varmail",
        }
    }

    /// The flowops of one iteration, in FileBench's order.
    pub fn flowops(self) -> &'static [Flowop] {
        match self {
            Personality::Fileserver => FILESERVER,
            Personality::Webserver => WEBSERVER,
            Personality::Webproxy => WEBPROXY,
            Personality::Varmail => VARMAIL,
        }
    }

    /// Threads FileBench runs the personality with (`nthreads` in its `.f` file): the
    /// paper's runs used these; the latency it reports is that of one iteration.
    pub fn filebench_threads(self) -> usize {
        match self {
            Personality::Fileserver => 50,
            Personality::Webserver => 100,
            Personality::Webproxy => 100,
            Personality::Varmail => 16,
        }
    }

    /// FileBench's defaults from its `.f` file.
    pub fn filebench_defaults(self) -> Params {
        let p = |nfiles, meandirwidth, meanfilesize, appendsize, prealloc| Params {
            nfiles,
            meandirwidth,
            meanfilesize,
            iosize: 1 << 20,
            appendsize,
            prealloc,
            iterations: 1000,
        };
        match self {
            Personality::Fileserver => p(10_000, 20, 128 << 10, 16 << 10, 80),
            Personality::Webserver => p(1000, 20, 16 << 10, 16 << 10, 100),
            Personality::Webproxy => p(10_000, 1_000_000, 16 << 10, 16 << 10, 80),
            Personality::Varmail => p(1000, 1_000_000, 16 << 10, 16 << 10, 80),
        }
    }

    /// The paper's variant (§6.2): Fileserver and Webservice with 10,000 files, directory
    /// width 20, 1 MB I/O and mean sizes 128 KB and 16 KB; Webproxy with 1000 files,
    /// width 1500, 16 KB files. Varmail, which the paper does not run, keeps FileBench's
    /// defaults.
    pub fn paper(self) -> Params {
        let d = self.filebench_defaults();
        match self {
            Personality::Fileserver => d,
            Personality::Webserver => Params {
                nfiles: 10_000,
                ..d
            },
            Personality::Webproxy => Params {
                nfiles: 1000,
                meandirwidth: 1500,
                ..d
            },
            Personality::Varmail => d,
        }
    }
}

/// How many flowops of each kind ran, in [`FLOWOPS`] order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts(pub [u64; FLOWOPS.len()]);

impl Counts {
    fn add(&mut self, op: Flowop) {
        self.0[op as usize] += 1;
    }

    fn merge(&mut self, other: &Counts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// The count of one flowop kind.
    pub fn of(&self, op: Flowop) -> u64 {
        self.0[op as usize]
    }

    /// What `iterations` iterations of `p` define.
    pub fn expected(p: Personality, iterations: usize) -> Counts {
        let mut c = Counts::default();
        for _ in 0..iterations {
            for &op in p.flowops() {
                c.add(op);
            }
        }
        c
    }
}

//! `pmlab reproduce PAPER`: run a paper's evaluation and lay it beside the paper.
//!
//! Each paper is a subcommand with its own options; every one writes its tables (CSV),
//! plots (SVG) and one `PAPER.json` under `results/PAPER/` unless `--out` says otherwise.

mod aerie;
mod kessler_hill;
mod loc;
mod osp;
mod spacejmp;

use std::path::PathBuf;

/// Arguments of `pmlab reproduce`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    paper: Paper,
}

#[derive(clap::Subcommand)]
enum Paper {
    /// Kessler & Hill, careful page mapping: Tables 1-4, Figures 3, 4, 11, 12.
    KesslerHill(kessler_hill::Args),
    /// Aerie: Table 2 (file operations) and Figure 2 (FileBench personalities).
    Aerie(aerie::Args),
    /// OSP (paper 000): Figure 4a, Figure 4b and Table 1 on the machine model, the
    /// super page, asynchronous consolidation, and crash exploration.
    Osp(osp::Args),
    /// LOC (Loose-Ordering Consistency): Figures 6-9, throughput of S-WAL, H-WAL,
    /// EC-WAL, LOC-WAL, Kiln and LOC-Kiln normalized to no persistence.
    Loc(loc::Args),
    /// SpaceJMP: Figure 1, Table 2, Figure 6, the native vas_switch, GUPS (Figures 8, 9).
    Spacejmp(spacejmp::Args),
}

/// Options every paper's reproduction takes.
#[derive(clap::Args)]
pub struct Common {
    /// Quick mode: a reduced run of the same experiments (see the paper's `--help`).
    #[arg(long)]
    quick: bool,
    /// First seed of the xoshiro256++ generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where tables (CSV), JSON and plots (SVG) are written (default: results/PAPER).
    #[arg(long)]
    out: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

impl Common {
    /// The output directory: `--out`, or `results/<paper>`.
    fn out_dir(&self, paper: &str) -> PathBuf {
        self.out
            .clone()
            .unwrap_or_else(|| PathBuf::from("results").join(paper))
    }
}

/// Runs `pmlab reproduce`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.paper {
        Paper::KesslerHill(a) => kessler_hill::run(a),
        Paper::Aerie(a) => aerie::run(a),
        Paper::Osp(a) => osp::run(a),
        Paper::Loc(a) => loc::run(a),
        Paper::Spacejmp(a) => spacejmp::run(a),
    }
}

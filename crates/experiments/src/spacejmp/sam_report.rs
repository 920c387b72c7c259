//! Figures 11 and 12 as a table, JSON, CSV and SVG.

use std::path::Path;

use pmlab_report::{BarPlot, Table, write_json};

use super::SpaceJmpError;
use super::sam::SamBench;

fn secs(v: Option<f64>) -> String {
    v.map_or("-".into(), |s| format!("{s:.3}"))
}

fn ratio(a: Option<f64>, b: f64) -> String {
    a.map_or("-".into(), |a| format!("{:.1}x", a / b))
}

/// The table: seconds per operation, and how many times faster the VAS version is.
pub fn table(b: &SamBench) -> Table {
    let mut t = Table::new(
        "Figures 11 and 12: SAMtools operations, samtools (SAM, BAM on tmpfs) vs pmlab in a VAS and over an mmap'ed region file (median seconds)",
        &[
            "operation",
            "samtools SAM s",
            "samtools BAM s",
            "VAS s",
            "mmap s",
            "VAS proc s",
            "mmap proc s",
            "SAM/VAS",
            "BAM/VAS",
            "mmap/VAS",
        ],
    );
    for r in &b.rows {
        t.row(vec![
            r.op.clone(),
            secs(r.samtools_sam_s),
            secs(r.samtools_bam_s),
            secs(Some(r.vas_s)),
            secs(Some(r.mmap_s)),
            secs(Some(r.vas_process_s)),
            secs(Some(r.mmap_process_s)),
            ratio(r.samtools_sam_s, r.vas_s),
            ratio(r.samtools_bam_s, r.vas_s),
            format!("{:.2}", r.mmap_s / r.vas_s),
        ]);
    }
    let short: Vec<&str> = b
        .rows
        .iter()
        .filter(|r| r.reps > b.reps)
        .map(|r| r.op.as_str())
        .collect();
    let extra = if short.is_empty() {
        String::new()
    } else {
        format!(
            " ({} under {} s: {} reps)",
            short.join(", "),
            super::sam::SHORT_OP_S,
            super::sam::SHORT_OP_REPS
        )
    };
    t.note(format!(
        "data: {} records, {:.0} MiB SAM, {:.0} MiB BAM (seed {}, xoshiro256++); {}; {} reps{extra}, interleaved",
        b.records,
        b.sam_bytes as f64 / (1 << 20) as f64,
        b.bam_bytes as f64 / (1 << 20) as f64,
        b.seed,
        b.samtools,
        b.reps
    ));
    t.note(format!(
        "one-time load of the SAM file: VAS {:.2} s, region file {:.2} s (samtools has no such step)",
        b.load_vas_s, b.load_mmap_s
    ));
    t.note("samtools cannot index or region-query plain SAM: '-'");
    t.note("samtools: whole process; VAS s, mmap s: inside the process, reaching the structure + the work, to before exit (as the paper); proc s: the whole pmlab process; ratios use VAS s");
    t.note(format!(
        "load average at start: {}; at end: {}",
        b.loadavg.0, b.loadavg.1
    ));
    t
}

/// Whether each operation met the paper's targets: faster than samtools on both
/// formats, and level with the mmap version: at most 10% slower (the paper's point
/// is that the VAS costs nothing over mmap; a VAS faster than mmap meets it).
pub fn targets(b: &SamBench) -> Vec<String> {
    b.rows
        .iter()
        .map(|r| {
            let faster = [r.samtools_sam_s, r.samtools_bam_s]
                .iter()
                .flatten()
                .all(|&s| s > r.vas_s);
            let level = r.vas_s <= 1.10 * r.mmap_s;
            format!(
                "{}: faster than samtools: {}; at most 10% slower than mmap: {} ({:.4} vs {:.4} s)",
                r.op,
                if faster { "yes" } else { "NO" },
                if level { "yes" } else { "NO" },
                r.vas_s,
                r.mmap_s
            )
        })
        .collect()
}

/// Writes `sam.json`, `fig11.csv`, `fig11.svg`, `fig12.svg` into `dir`.
pub fn write(b: &SamBench, dir: &Path) -> Result<(), SpaceJmpError> {
    write_json(&dir.join("sam.json"), b)?;
    table(b).write_csv(&dir.join("fig11.csv"))?;
    let ops: Vec<String> = b.rows.iter().map(|r| r.op.clone()).collect();
    let speed = |f: &dyn Fn(&super::sam::SamRow) -> Option<f64>| {
        b.rows
            .iter()
            .map(|r| f(r).map_or(f64::NAN, |s| s / r.vas_s))
            .collect::<Vec<_>>()
    };
    BarPlot {
        title: "Figure 11: speedup of the VAS version over samtools".into(),
        y_label: "samtools time / VAS time".into(),
        categories: ops.clone(),
        series: vec![
            ("over SAM".into(), speed(&|r| r.samtools_sam_s)),
            ("over BAM".into(), speed(&|r| r.samtools_bam_s)),
        ],
    }
    .write_svg(&dir.join("fig11.svg"))?;
    BarPlot {
        title: "Figure 12: mmap vs VAS (seconds)".into(),
        y_label: "seconds".into(),
        categories: ops,
        series: vec![
            ("mmap".into(), b.rows.iter().map(|r| r.mmap_s).collect()),
            ("VAS".into(), b.rows.iter().map(|r| r.vas_s).collect()),
        ],
    }
    .write_svg(&dir.join("fig12.svg"))?;
    Ok(())
}

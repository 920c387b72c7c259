//! `pmlab trace`: convert, summarise, interleave, record and time memory-reference traces.
//! The formats and the logic live in `pmlab-trace`; this module wires them to flags.

use std::time::Instant;

use anyhow::{Context, bail};
use clap::Subcommand;
use pmlab_trace::record::{RecordOptions, record};
use pmlab_trace::{
    DEFAULT_BATCH, Format, Interleave, RefSink, RefSource, SwitchUnit, TraceInfo,
    create_trace_writer, open_trace,
};

/// Arguments of `pmlab trace`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Convert a trace between formats (`-` is standard input/output).
    Convert {
        /// Input trace (xz/zstd detected by magic).
        input: String,
        /// Output trace; `.zst`/`.xz` endings compress.
        output: String,
        /// Input format: D, d, lackey, bin (default: detected).
        #[arg(long)]
        from: Option<Format>,
        /// Output format: bin or D (default: D if the name contains `.din`, else bin).
        #[arg(long)]
        to: Option<Format>,
        /// zstd level for `.zst` output.
        #[arg(long, default_value_t = 19)]
        level: i32,
    },
    /// Summarise a trace: counts by kind and process, address range, 4 KiB-page footprint.
    Info {
        /// Input trace (`-` for standard input).
        input: String,
        /// Input format (default: detected).
        #[arg(long)]
        from: Option<Format>,
    },
    /// Interleave per-process traces round-robin (Kessler & Hill's multiprogrammed traces);
    /// process i (from 0) gets asid i unless --asids names them.
    Interleave {
        /// Quantum: instructions (or references with --unit refs) between switches;
        /// Mult2.2 used 214000, Mult2 134000.
        #[arg(long)]
        switch: u64,
        /// What the quantum counts: instr or refs.
        #[arg(long, default_value = "instr")]
        unit: String,
        /// Process ids, comma-separated, one per input.
        #[arg(long, value_delimiter = ',')]
        asids: Option<Vec<u16>>,
        /// Input traces.
        #[arg(required = true)]
        inputs: Vec<String>,
        /// Output trace (binary; `.zst`/`.xz` compress).
        #[arg(short = 'o', long)]
        output: String,
        /// Output format: bin or D.
        #[arg(long)]
        to: Option<Format>,
        /// zstd level for `.zst` output.
        #[arg(long, default_value_t = 19)]
        level: i32,
    },
    /// Record a program's references with valgrind lackey into the binary format.
    Record {
        /// Stop after this many references.
        #[arg(long)]
        max_refs: Option<u64>,
        /// Drop this many references first (program start-up).
        #[arg(long, default_value_t = 0)]
        skip_refs: u64,
        /// Output trace (`.zst` compresses); standard output if omitted.
        #[arg(short = 'o', long, default_value = "-")]
        output: String,
        /// zstd level for `.zst` output.
        #[arg(long, default_value_t = 19)]
        level: i32,
        /// The command and its arguments (after `--`).
        #[arg(required = true, last = true)]
        command: Vec<String>,
    },
    /// Read a trace to its end and report the reader's throughput.
    Throughput {
        /// Input trace.
        input: String,
        /// Input format (default: detected).
        #[arg(long)]
        from: Option<Format>,
        /// References per batch.
        #[arg(long, default_value_t = DEFAULT_BATCH)]
        batch: usize,
    },
}

/// Runs `pmlab trace`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        TraceCommand::Convert {
            input,
            output,
            from,
            to,
            level,
        } => {
            let mut source = open_trace(&input, from)?;
            let n = copy(&mut *source, writer(&output, to, level)?)?;
            eprintln!("{n} references written to {output}");
            Ok(())
        }
        TraceCommand::Info { input, from } => {
            let mut source = open_trace(&input, from)?;
            println!("{}", TraceInfo::gather(&mut *source)?);
            Ok(())
        }
        TraceCommand::Interleave {
            switch,
            unit,
            asids,
            inputs,
            output,
            to,
            level,
        } => {
            let merged = interleaved(switch, &unit, asids, &inputs)?;
            write_interleaved(merged, &output, to, level)
        }
        TraceCommand::Record {
            max_refs,
            skip_refs,
            output,
            level,
            command,
        } => {
            let options = RecordOptions {
                skip_refs,
                max_refs,
                ..RecordOptions::default()
            };
            record_program(&command, &options, &output, level)
        }
        TraceCommand::Throughput { input, from, batch } => throughput(&input, from, batch),
    }
}

/// A writer for `output`, in `to` or the format its name implies.
fn writer(
    output: &str,
    to: Option<Format>,
    level: i32,
) -> anyhow::Result<Box<dyn pmlab_trace::RefSink>> {
    Ok(create_trace_writer(
        output,
        to.unwrap_or_else(|| output_format(output)),
        level,
    )?)
}

/// The round-robin mix of `inputs`, process `i` getting `asids[i]` (default `i`).
fn interleaved(
    switch: u64,
    unit: &str,
    asids: Option<Vec<u16>>,
    inputs: &[String],
) -> anyhow::Result<Interleave> {
    let unit = match unit {
        "instr" | "instructions" => SwitchUnit::Instructions,
        "refs" | "references" => SwitchUnit::References,
        other => bail!("--unit {other}: expected instr or refs"),
    };
    if switch == 0 {
        bail!("--switch must be at least 1");
    }
    let asids = match asids {
        Some(p) if p.len() != inputs.len() => {
            bail!(
                "--asids names {} processes but {} traces were given",
                p.len(),
                inputs.len()
            )
        }
        Some(p) => p,
        None => (0..inputs.len())
            .map(|i| u16::try_from(i).context("too many inputs"))
            .collect::<anyhow::Result<_>>()?,
    };
    let mut merged = Interleave::new(switch, unit);
    for (input, &asid) in inputs.iter().zip(&asids) {
        merged.add(asid, open_trace(input, None)?);
    }
    Ok(merged)
}

fn write_interleaved(
    mut merged: Interleave,
    output: &str,
    to: Option<Format>,
    level: i32,
) -> anyhow::Result<()> {
    let n = copy(&mut merged, writer(output, to, level)?)?;
    eprintln!(
        "{n} references, {} context switches, written to {output}",
        merged.switches()
    );
    for end in merged.ended() {
        eprintln!(
            "asid {} ended after reference {} ({} refs, {} instructions)",
            end.asid, end.at_ref, end.refs, end.instructions
        );
    }
    Ok(())
}

/// `pmlab trace record`: runs `command` under valgrind into `output` (binary format).
fn record_program(
    command: &[String],
    options: &RecordOptions,
    output: &str,
    level: i32,
) -> anyhow::Result<()> {
    let mut sink = create_trace_writer(output, Format::Binary, level)?;
    let summary = record(command, options, &mut *sink)?;
    sink.finish()?;
    let early = if summary.stopped_early {
        ", stopped at --max-refs"
    } else {
        ""
    };
    eprintln!(
        "recorded {} references (skipped {}) from `{}`{early}",
        summary.refs,
        summary.skipped,
        command.join(" "),
    );
    if let Some(status) = summary.status.filter(|s| !s.success()) {
        eprintln!("warning: the recorded program exited with {status}");
    }
    Ok(())
}

/// `pmlab trace throughput`: how fast the reader delivers `input`.
fn throughput(input: &str, from: Option<Format>, batch: usize) -> anyhow::Result<()> {
    let mut source = open_trace(input, from)?;
    let mut buf = Vec::with_capacity(batch.max(1));
    let cpu_start = thread_cpu_seconds();
    let start = Instant::now();
    let (mut n, mut checksum) = (0u64, 0u64);
    while source.next_batch(&mut buf)? > 0 {
        n += buf.len() as u64;
        // Touch every record so the work cannot be skipped.
        checksum = buf
            .iter()
            .fold(checksum, |c, r| c.wrapping_add(r.addr ^ r.size as u64));
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = match (cpu_start, thread_cpu_seconds()) {
        (Some(a), Some(b)) => format!(", {:.1} M refs/s of CPU time", n as f64 / (b - a) / 1e6),
        _ => String::new(),
    };
    println!(
        "{n} references in {secs:.3} s: {:.1} M refs/s{cpu} (checksum {checksum:x})",
        n as f64 / secs / 1e6
    );
    Ok(())
}

/// CPU time of the calling thread in seconds (Linux `schedstat`): on a busy machine the
/// wall-clock rate understates what the reader can do.
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// The output format a file name implies: extended din if it contains `.din`, else binary.
fn output_format(path: &str) -> Format {
    if path.contains(".din") {
        Format::DinExtended
    } else {
        Format::Binary
    }
}

/// Copies `source` into `sink` and finishes it; returns the number of references.
fn copy(source: &mut dyn RefSource, mut sink: Box<dyn RefSink>) -> anyhow::Result<u64> {
    let mut buf = Vec::with_capacity(DEFAULT_BATCH * 16);
    let mut n = 0u64;
    while source.next_batch(&mut buf)? > 0 {
        sink.write_refs(&buf)?;
        n += buf.len() as u64;
    }
    sink.finish()?;
    Ok(n)
}

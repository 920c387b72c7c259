//! A whole `dineroIV` run: header, summary of options, simulation over a trace, and the
//! final report, printed in Dinero IV's layout.

use crate::dinero_args::DineroArgs;
use crate::hierarchy::Hierarchy;
use crate::report;
use pmlab_trace::{Ref, RefSource, TraceError};
use std::io::Write;

/// A run that could not complete.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The trace is malformed or unreadable.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// Writing the report failed.
    #[error("writing the report: {0}")]
    Output(#[from] std::io::Error),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
}

/// Dinero IV's banner, printed unchanged so that tools that recognise Dinero IV output
/// recognise pmlab's.
pub const BANNER: &str = "---Dinero IV cache simulator, version 8
---Written by Jan Edler and Mark D. Hill
---Copyright (C) 1997 NEC Research Institute, Inc. and Mark D. Hill.
---All rights reserved.
---Copyright (C) 1985, 1989 Mark D. Hill.  All rights reserved.
---See -copyright option for details
";

/// Simulates `source` under `args` and writes Dinero IV's complete output to `out`;
/// `warn` receives Dinero IV's warnings (standard error in the command). Returns the
/// number of references simulated.
pub fn run(
    args: &DineroArgs,
    source: &mut dyn RefSource,
    out: &mut dyn Write,
    warn: &mut dyn Write,
) -> Result<u64, RunError> {
    let mut h = Hierarchy::new(&args.hierarchy, args.seed)?;
    out.write_all(BANNER.as_bytes())?;
    write!(
        out,
        "\n---Summary of options (-help option gives usage information).\n\n{}",
        args.summary()
    )?;
    writeln!(out, "\n---Simulation begins.")?;
    out.flush()?;

    let mut buf: Vec<Ref> = Vec::with_capacity(pmlab_trace::DEFAULT_BATCH);
    let mut to_skip = args.skipcount;
    let mut count: u64 = 0;
    let per_ref = args.stat_interval != 0 || args.flushcount != 0;
    let mut until_stats = args.stat_interval;
    let mut until_flush = args.flushcount;
    'trace: loop {
        if source.next_batch(&mut buf)? == 0 {
            if to_skip > 0 {
                writeln!(
                    warn,
                    "pmlab dinero: warning: input ended before -skipcount satisfied"
                )?;
            }
            break;
        }
        let mut refs = &buf[..];
        if to_skip > 0 {
            let n = (to_skip as usize).min(refs.len());
            refs = &refs[n..];
            to_skip -= n as u64;
        }
        if args.maxcount != 0 && count + refs.len() as u64 > args.maxcount {
            let room = (args.maxcount - count) as usize;
            // Dinero IV notices the limit when it reads one more reference.
            run_slice(
                &mut h,
                &refs[..room],
                per_ref,
                args,
                &mut until_stats,
                &mut until_flush,
                out,
            )?;
            writeln!(out, "---Maximum address count exceeded.")?;
            count = args.maxcount;
            break 'trace;
        }
        run_slice(
            &mut h,
            refs,
            per_ref,
            args,
            &mut until_stats,
            &mut until_flush,
            out,
        )?;
        count += refs.len() as u64;
    }
    h.finish();
    writeln!(out, "---Simulation complete.")?;
    out.write_all(report::render_all(&h.stats(), args.stat_idcombine).as_bytes())?;
    writeln!(out, "---Execution complete.")?;
    out.flush()?;
    Ok(count)
}

fn run_slice(
    h: &mut Hierarchy,
    refs: &[Ref],
    per_ref: bool,
    args: &DineroArgs,
    until_stats: &mut u64,
    until_flush: &mut u64,
    out: &mut dyn Write,
) -> Result<(), RunError> {
    if !per_ref {
        h.run(refs);
        return Ok(());
    }
    for r in refs {
        h.access(r.kind, r.addr, r.size);
        if args.stat_interval != 0 {
            *until_stats -= 1;
            if *until_stats == 0 {
                out.write_all(report::render_all(&h.stats(), args.stat_idcombine).as_bytes())?;
                *until_stats = args.stat_interval;
            }
        }
        if args.flushcount != 0 {
            *until_flush -= 1;
            if *until_flush == 0 {
                h.flush_all();
                *until_flush = args.flushcount;
            }
        }
    }
    Ok(())
}

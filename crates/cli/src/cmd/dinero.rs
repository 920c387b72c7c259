//! `pmlab dinero`: a drop-in for `dineroIV`. Takes Dinero IV's single-dash flags, reads
//! the trace on standard input, prints Dinero IV's report.

use anyhow::Context;
use pmlab_cache::dinero_args::{DineroArgs, usage};
use pmlab_trace::Format;

/// Arguments of `pmlab dinero`: Dinero IV's flags, passed through unparsed by clap and
/// parsed by `pmlab_cache::DineroArgs` (`-help` lists them).
#[derive(clap::Args)]
pub struct Args {
    /// Dinero IV flags, e.g. `-l1-dsize 32k -l1-dbsize 32 -l1-isize 32k -l1-ibsize 32`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

/// Runs `pmlab dinero`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let parsed = DineroArgs::parse(&args.rest)?;
    if parsed.help {
        print!("{}", usage());
        return Ok(());
    }
    let format: Format = parsed
        .informat
        .parse()
        .map_err(|e: String| anyhow::anyhow!("-informat {}: {e}", parsed.informat))?;
    let mut source =
        pmlab_trace::trace_from_reader(Box::new(std::io::stdin()), "<stdin>", Some(format))
            .context("opening the trace on standard input")?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    pmlab_cache::dinero_run::run(&parsed, &mut *source, &mut out, &mut std::io::stderr())?;
    Ok(())
}

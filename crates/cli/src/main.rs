//! The `pmlab` command-line front end: one subcommand per job, each in its own module
//! under `cmd/`.

mod cmd;

use clap::{Parser, Subcommand};

/// pmlab: a reference system for memory-centric computing with persistent memory.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Reproduce a paper's evaluation (tables beside the paper's figures, JSON/CSV, plots).
    Reproduce(cmd::reproduce::Args),
    /// A Dinero IV-compatible cache simulator: Dinero IV flags, trace on standard input.
    #[command(disable_help_flag = true)]
    Dinero(cmd::dinero::Args),
    /// Read, convert and record memory-reference traces.
    Trace(cmd::trace::Args),
    /// Page placement (Kessler & Hill): the analytic conflict model and friends.
    Placement(cmd::placement::Args),
    /// Simulator throughput benchmarks, side by side with Dinero IV.
    Bench(cmd::bench::Args),
    /// Storage-class memory regions on this machine: create, inspect, check.
    Scm(cmd::scm::Args),
    /// The Aerie file system: serve a volume, fsck, stress.
    Fs(cmd::fs::Args),
    /// SpaceJMP address spaces and segments: create, list, inspect, remove, check, stress.
    Vas(cmd::vas::Args),
    /// Durable transactions: the papers' workloads under each protocol, timed beside
    /// PMDK, crash-explored on the model, killed at random moments.
    Tx(cmd::tx::Args),
    /// Redis_JMP: a key-value store in a lockable segment that clients switch into;
    /// its benchmark beside the real Redis.
    Kv(cmd::kv::Args),
    /// Alignments (SAM/BAM) in a persistent address space: load, flagstat, sort, index, view.
    Sam(cmd::sam::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Reproduce(a) => cmd::reproduce::run(a),
        Command::Dinero(a) => cmd::dinero::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Placement(a) => cmd::placement::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Scm(a) => cmd::scm::run(a),
        Command::Fs(a) => cmd::fs::run(a),
        Command::Vas(a) => cmd::vas::run(a),
        Command::Tx(a) => cmd::tx::run(a),
        Command::Kv(a) => cmd::kv::run(a),
        Command::Sam(a) => cmd::sam::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pmlab: error: {}", describe(&e));
            std::process::ExitCode::from(1)
        }
    }
}

/// The error and its causes, each said once. Most of the project's errors name their
/// source in their own message (`"{what}: {source}"`), which anyhow's alternate form
/// (`{:#}`) would print a second time after it.
fn describe(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let m = cause.to_string();
        if out.contains(&m) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::describe;

    /// An error in the project's style: it names its source in its own message.
    #[derive(Debug)]
    struct Named {
        what: &'static str,
        source: std::io::Error,
    }

    impl std::fmt::Display for Named {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.what, self.source)
        }
    }

    impl std::error::Error for Named {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_is_said_once() {
        let io = std::io::Error::other("disk full");
        let e = anyhow::Error::new(Named {
            what: "writing x",
            source: io,
        });
        assert_eq!(describe(&e), "writing x: disk full");
        let e = anyhow::Error::msg("disk full").context("writing y");
        assert_eq!(describe(&e), "writing y: disk full");
    }
}

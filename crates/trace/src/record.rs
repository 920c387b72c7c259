//! Recording a real program's trace with valgrind lackey.
//!
//! `valgrind --tool=lackey --trace-mem=yes --log-fd=N CMD ARGS` runs the program on
//! valgrind's synthetic CPU and prints every instruction fetch and data access to fd N.
//! N is the write end of a pipe this process reads, so lackey's text (tens of bytes per
//! reference) streams through the lackey parser straight into the sink and is never
//! stored. Recording stops after `max_refs` references by killing valgrind.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Child, Command, ExitStatus, Stdio};

use crate::{DEFAULT_BATCH, LackeyReader, RefSink, RefSource, TraceError};

/// What to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// References to drop before recording starts (program start-up).
    pub skip_refs: u64,
    /// Stop after this many recorded references.
    pub max_refs: Option<u64>,
    /// The valgrind executable.
    pub valgrind: String,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            skip_refs: 0,
            max_refs: None,
            valgrind: "valgrind".to_string(),
        }
    }
}

/// What a recording produced.
#[derive(Clone, Debug)]
pub struct RecordSummary {
    /// References written to the sink.
    pub refs: u64,
    /// References skipped before recording.
    pub skipped: u64,
    /// Whether recording stopped at `max_refs` (valgrind was then killed).
    pub stopped_early: bool,
    /// valgrind's exit status when the program ran to its end.
    pub status: Option<ExitStatus>,
}

/// Why a recording failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// valgrind is not installed.
    #[error("valgrind ('{0}') not found: install valgrind: apt-get install valgrind")]
    ValgrindMissing(String),
    /// No command was given.
    #[error("no command to record")]
    NoCommand,
    /// A system call failed.
    #[error("{what}: {error}")]
    System {
        /// What was being done.
        what: &'static str,
        /// The error.
        error: std::io::Error,
    },
    /// lackey's output did not parse, or the sink failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// valgrind produced no references.
    #[error("valgrind produced no references ({0}); is the command right?")]
    Empty(String),
}

/// Runs `command` under valgrind lackey and writes its references to `sink`. The
/// program's standard output is discarded (it could otherwise mix with a trace written
/// to standard output); its standard input and error are inherited.
pub fn record(
    command: &[String],
    options: &RecordOptions,
    sink: &mut dyn RefSink,
) -> Result<RecordSummary, RecordError> {
    let (program, args) = command.split_first().ok_or(RecordError::NoCommand)?;
    let (read_end, write_end) = lackey_pipe()?;
    let mut child = spawn_valgrind(options, program, args, write_end)?;
    let mut reader = LackeyReader::new(File::from(read_end), "valgrind lackey output");
    let mut counts = Counts::default();
    let result = stream(&mut reader, options, sink, &mut counts);
    if counts.stopped_early || result.is_err() {
        // Our own child, by handle; it may already have exited.
        let _ = child.kill();
    }
    drop(reader);
    let status = child.wait().map_err(|error| RecordError::System {
        what: "waiting for valgrind",
        error,
    })?;
    result?;
    if counts.refs == 0 && counts.skipped == 0 {
        return Err(RecordError::Empty(status.to_string()));
    }
    Ok(RecordSummary {
        refs: counts.refs,
        skipped: counts.skipped,
        stopped_early: counts.stopped_early,
        status: (!counts.stopped_early).then_some(status),
    })
}

/// The pipe lackey writes to: (read end, write end).
fn lackey_pipe() -> Result<(OwnedFd, OwnedFd), RecordError> {
    let system = |what| {
        move |e: nix::Error| RecordError::System {
            what,
            error: e.into(),
        }
    };
    let (read_end, write_end) = nix::unistd::pipe().map_err(system("creating the lackey pipe"))?;
    // The read end must not leak into valgrind (it would never see the pipe close);
    // the write end must, so it is left inheritable and named by --log-fd.
    nix::fcntl::fcntl(
        read_end.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(system("configuring the lackey pipe"))?;
    // A larger pipe means fewer wake-ups for a stream of ~20 bytes per reference; failing
    // to enlarge it only costs speed.
    let _ = nix::fcntl::fcntl(
        read_end.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 20),
    );
    Ok((read_end, write_end))
}

/// Starts `program` under lackey, logging to `write_end` (closed here in this process).
fn spawn_valgrind(
    options: &RecordOptions,
    program: &str,
    args: &[String],
    write_end: OwnedFd,
) -> Result<Child, RecordError> {
    let spawned = Command::new(&options.valgrind)
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg(format!("--log-fd={}", write_end.as_raw_fd()))
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .spawn();
    drop(write_end);
    spawned.map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            RecordError::ValgrindMissing(options.valgrind.clone())
        } else {
            RecordError::System {
                what: "starting valgrind",
                error,
            }
        }
    })
}

/// What the stream has done so far.
#[derive(Default)]
struct Counts {
    refs: u64,
    skipped: u64,
    stopped_early: bool,
}

/// Moves lackey's references into `sink`, skipping `skip_refs` first and stopping at
/// `max_refs`.
fn stream(
    reader: &mut LackeyReader<File>,
    options: &RecordOptions,
    sink: &mut dyn RefSink,
    counts: &mut Counts,
) -> Result<(), RecordError> {
    let mut buf = Vec::with_capacity(DEFAULT_BATCH * 16);
    while reader.next_batch(&mut buf)? > 0 {
        let mut batch = &buf[..];
        if counts.skipped < options.skip_refs {
            let n = (options.skip_refs - counts.skipped).min(batch.len() as u64);
            counts.skipped += n;
            batch = &batch[n as usize..];
        }
        if let Some(max) = options.max_refs {
            let room = max - counts.refs;
            if (batch.len() as u64) >= room {
                batch = &batch[..room as usize];
                counts.stopped_early = true;
            }
        }
        sink.write_refs(batch)?;
        counts.refs += batch.len() as u64;
        if counts.stopped_early {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ref;

    #[test]
    fn missing_valgrind_says_how_to_install_it() {
        let options = RecordOptions {
            valgrind: "/nonexistent/valgrind".into(),
            ..RecordOptions::default()
        };
        let mut sink: Vec<Ref> = Vec::new();
        let e = record(&["true".to_string()], &options, &mut sink).unwrap_err();
        assert!(matches!(e, RecordError::ValgrindMissing(_)));
        assert!(e.to_string().contains("apt-get install valgrind"), "{e}");
        assert!(matches!(
            record(&[], &options, &mut sink),
            Err(RecordError::NoCommand)
        ));
    }
}

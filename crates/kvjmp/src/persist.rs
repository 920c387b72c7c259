//! How far a SET is durable when it returns: the store's persistence domain.
//!
//! Both choices run the same redo transaction with the same ordering of its stores
//! (log records, the checksummed header that commits them, then the writes in place);
//! they differ only in what a fence waits for.
//!
//! - [`Persist::Power`]: every line a commit step wrote is written back (`clwb`, or the
//!   best flush this CPU has) and fenced (`sfence`) before the next step, so that an
//!   acknowledged SET survives power loss when the segment is persistent memory (the
//!   store's default, pmlab's durable figure).
//! - [`Persist::Process`]: no write-back and no hardware fence, only a compiler fence
//!   where `Power` fences. The stores of a process reach the shared mapping in program
//!   order (x86-TSO), and a process that is SIGKILLed leaves every store it executed
//!   visible to the next one, so an acknowledged SET survives any process being
//!   killed, with the lock taken over and the log replayed exactly as in `Power` — but
//!   not a crash of the machine. That is the guarantee of Redis in its default
//!   configuration (no `fsync` per write: a SET lives in the server's memory), and the
//!   one it is compared against; `Power` is compared against Redis with
//!   `appendfsync always`.
//!
//! A store is only as durable as its weakest writer: the choice is a client's, and a
//! `Power` client after a `Process` one writes back only the lines it wrote itself.

/// The persistence domain a client's SETs commit to (see the module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Persist {
    /// Written back and fenced: survives power loss on persistent memory.
    #[default]
    Power,
    /// Ordered by the compiler only: survives any process being killed.
    Process,
}

impl Persist {
    /// Both, the durable one first.
    pub const ALL: [Persist; 2] = [Persist::Power, Persist::Process];

    /// The name the CLI prints and parses.
    pub fn name(self) -> &'static str {
        match self {
            Persist::Power => "power",
            Persist::Process => "process",
        }
    }

    /// Parses `power` or `process`.
    pub fn parse(s: &str) -> Result<Persist, String> {
        Persist::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("{s:?}: the persistence domains are power and process"))
    }
}

impl std::fmt::Display for Persist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

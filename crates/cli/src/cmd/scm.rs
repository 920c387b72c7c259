//! `pmlab scm`.

/// Arguments of `pmlab scm`.
#[derive(clap::Args)]
pub struct Args {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

/// Runs `pmlab scm`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`pmlab scm` is not built yet")
}

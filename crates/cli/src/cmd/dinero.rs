//! `pmlab dinero`.

/// Arguments of `pmlab dinero`.
#[derive(clap::Args)]
pub struct Args {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

/// Runs `pmlab dinero`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`pmlab dinero` is not built yet")
}

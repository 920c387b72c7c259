//! `pmlab trace`.

/// Arguments of `pmlab trace`.
#[derive(clap::Args)]
pub struct Args {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

/// Runs `pmlab trace`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`pmlab trace` is not built yet")
}

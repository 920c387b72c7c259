//! `pmlab fs`.

/// Arguments of `pmlab fs`.
#[derive(clap::Args)]
pub struct Args {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

/// Runs `pmlab fs`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`pmlab fs` is not built yet")
}

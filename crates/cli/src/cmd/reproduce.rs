//! `pmlab reproduce`.

/// Arguments of `pmlab reproduce`.
#[derive(clap::Args)]
pub struct Args {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

/// Runs `pmlab reproduce`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`pmlab reproduce` is not built yet")
}

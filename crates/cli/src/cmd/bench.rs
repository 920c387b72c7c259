//! `pmlab bench`.

/// Arguments of `pmlab bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

/// Runs `pmlab bench`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`pmlab bench` is not built yet")
}

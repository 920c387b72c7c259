//! `pmlab placement`.

/// Arguments of `pmlab placement`.
#[derive(clap::Args)]
pub struct Args {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

/// Runs `pmlab placement`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`pmlab placement` is not built yet")
}

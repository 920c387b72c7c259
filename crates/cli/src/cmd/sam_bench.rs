//! `pmlab sam bench`: Figures 11 and 12 on their own.

/// Arguments of `pmlab sam bench`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `pmlab sam bench`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}

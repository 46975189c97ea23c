//! `fjord pipeline`.

/// Command-line arguments of `fjord pipeline`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `fjord pipeline`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("fjord pipeline is not built yet")
}

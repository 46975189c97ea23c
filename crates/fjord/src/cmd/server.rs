//! `fjord server`.

/// Command-line arguments of `fjord server`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `fjord server`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("fjord server is not built yet")
}

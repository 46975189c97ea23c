//! `fjord scan`: placeholder wired into the dispatcher at the start of the
//! session; its owner replaces this file with the real command.

/// Arguments of `fjord scan` (none yet).
#[derive(clap::Args)]
pub struct Args {}

/// Refuses to run: the command is not built yet.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("fjord scan is not implemented yet")
}

//! One module per `fjord` subcommand.

pub mod pipeline;
pub mod quickstart;
pub mod server;

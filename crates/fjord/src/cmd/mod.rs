//! One module per `fjord` subcommand.

pub mod bench;
pub mod input;
pub mod lookup;
pub mod partitions;
pub mod pipeline;
pub mod produce;
pub mod progress;
pub mod quickstart;
pub mod scan;
pub mod server;
pub mod sql;

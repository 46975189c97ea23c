//! fjord-cdc

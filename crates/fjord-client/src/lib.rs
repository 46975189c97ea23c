//! fjord-client

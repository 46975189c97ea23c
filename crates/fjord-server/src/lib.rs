//! fjord-server

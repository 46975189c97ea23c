//! fjord-proto

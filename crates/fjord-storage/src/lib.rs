//! fjord-storage

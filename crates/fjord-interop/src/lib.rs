//! fjord-interop

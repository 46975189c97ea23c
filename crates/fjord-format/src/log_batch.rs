//! The Fluss log record batch header: layout, validation, stamping.

//! Table-driven tests of the merge engines (filled in the next commits).

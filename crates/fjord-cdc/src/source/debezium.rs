//! The `debezium-json` source: Debezium change-event envelopes read from a file
//! or stdin (being built).

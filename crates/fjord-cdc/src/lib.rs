//! fjord-cdc: Fjord's change-data-capture pipeline.
//!
//! Layout, following a change from database to sink:
//! - [`types`], [`schema`], [`row`]: column types (Flink CDC's type system and
//!   MySQL mapping), versioned table schemas, the compact binary row and its
//!   writer, prepared once per schema version.
//! - [`event`]: change and schema-change events in reusable [`event::EventBatch`]es.
//! - [`position`]: [`position::SourcePosition`], where a source resumes.
//! - [`filter`]: `tables` / `tables.exclude` / route patterns; [`route`]: routes.
//! - [`config`]: the Flink CDC 3 pipeline YAML.
//! - [`source`]: the [`source::Source`] trait, the MySQL/MariaDB source
//!   (`source::mysql`) and the Debezium JSON source (`source::debezium`).
//! - [`sink`]: the [`sink::Sink`] trait and the built-in sinks.
//! - [`offsets`]: the durable source position; [`runtime`]: the threads that
//!   drive a source into a sink and commit positions.
//!
//! Architecture invariants: sources and sinks exchange whole batches, never
//! single records, between threads; nothing is derived per row that can be
//! derived per table schema version; this crate depends on nothing of the
//! server side.

pub mod config;
pub mod event;
pub mod filter;
pub mod offsets;
pub mod position;
pub mod route;
pub mod row;
pub mod runtime;
pub mod schema;
pub mod sink;
pub mod source;
pub mod types;

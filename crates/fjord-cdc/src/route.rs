//! Routes: `route` rules mapping source tables to sink tables, applied once
//! per table schema version (cached), never per row.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::RouteDef;
use crate::event::EventBatch;
use crate::schema::{TableId, TableSchema};

/// Compiled route rules plus a cache of routed schemas.
#[derive(Debug, Default)]
pub struct Router {
    rules: Vec<RouteDef>,
    /// (source table, schema version) → routed schema.
    cache: HashMap<(TableId, u32), Arc<TableSchema>>,
}

impl Router {
    /// A router over `rules` (first match wins).
    pub fn new(rules: Vec<RouteDef>) -> Router {
        Router {
            rules,
            cache: HashMap::new(),
        }
    }

    /// Whether there is any rule (no rules: batches pass untouched).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The sink table for `source`, or `None` when no rule matches (the table keeps its id).
    pub fn route(&self, source: &TableId) -> Option<TableId> {
        let rule = self
            .rules
            .iter()
            .find(|r| r.source_table.matches(source.database(), source.table()))?;
        let sink = match &rule.replace_symbol {
            Some(symbol) if !symbol.is_empty() => rule.sink_table.replace(symbol, source.table()),
            _ => rule.sink_table.clone(),
        };
        // `sink-table` was checked to contain a dot when parsed.
        let (database, table) = sink.split_once('.').unwrap_or(("", &sink));
        Some(TableId::new(database, table))
    }

    fn routed(&mut self, schema: &Arc<TableSchema>) -> Arc<TableSchema> {
        let key = (schema.id().clone(), schema.version());
        if let Some(hit) = self.cache.get(&key) {
            return Arc::clone(hit);
        }
        let routed = match self.route(schema.id()) {
            Some(id) => Arc::new(schema.with_id(id)),
            None => Arc::clone(schema),
        };
        self.cache.insert(key, Arc::clone(&routed));
        routed
    }

    /// Rewrites the table ids of a batch's events (per table in the batch).
    pub fn apply(&mut self, batch: &mut EventBatch) {
        if self.rules.is_empty() {
            return;
        }
        batch.map_tables(|schema| self.routed(schema));
        let rules = &*self;
        batch.map_dropped_table_ids(|id| rules.route(id).unwrap_or_else(|| id.clone()));
    }
}

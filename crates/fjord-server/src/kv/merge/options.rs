//! A primary-key table's merge settings, read once from its properties and
//! schema: the merge engine, the delete behaviour, the changelog image and,
//! for the aggregation engine, each column's function.
//!
//! The option names and the refusals are Fluss's (`ConfigOptions`,
//! `TableDescriptorValidation.checkMergeEngine` / `checkDeleteBehavior` and
//! `AggFunction.validateParameters` / `validateDataType` in 0.9.1): every
//! refusal is INVALID_CONFIG_EXCEPTION, raised when the table is created, so
//! a table that exists always has options [`MergeOptions::from_table`]
//! accepts.

use std::collections::BTreeMap;

use fjord_format::{Column, Schema, TypeKind};

use super::aggregate::functions::AggFunctionType;
use crate::error::{ApiError, ErrorCode};

/// Table option naming the merge engine (`first_row`, `versioned`,
/// `aggregation`; unset = the default engine, which keeps the latest row).
pub const TABLE_MERGE_ENGINE: &str = "table.merge-engine";
/// Table option naming the version column of the `versioned` engine.
pub const TABLE_MERGE_ENGINE_VERSION_COLUMN: &str = "table.merge-engine.versioned.ver-column";
/// Table option naming what a delete does (`allow`, `ignore`, `disable`).
pub const TABLE_DELETE_BEHAVIOR: &str = "table.delete.behavior";
/// Table option naming the changelog image (`FULL`, the default, or `WAL`).
pub const TABLE_CHANGELOG_IMAGE: &str = "table.changelog.image";

/// The delimiter `listagg` / `string_agg` use when none is given.
pub const DEFAULT_LISTAGG_DELIMITER: &str = ",";
/// The one parameter an aggregation function accepts (`listagg` and
/// `string_agg` only).
pub const PARAM_DELIMITER: &str = "delimiter";

/// How rows with the same primary key are merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeEngine {
    /// No merge engine: the latest row wins; partial updates allowed.
    Default,
    /// `first_row`: the first row of a key is kept, later ones are dropped.
    FirstRow,
    /// `versioned`: the row with the largest version (`>=` wins) is kept.
    Versioned {
        /// Position of the version column in the schema.
        column: usize,
    },
    /// `aggregation`: each column is aggregated with its own function.
    Aggregation,
}

/// What a delete record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteBehavior {
    /// The row is deleted (partially, for a partial delete).
    Allow,
    /// The delete is dropped without an error.
    Ignore,
    /// The delete fails with DELETION_DISABLED_EXCEPTION.
    Disable,
}

/// Which rows an update writes to the changelog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangelogImage {
    /// `-U old` and `+U new`.
    Full,
    /// `+U new` only; with the default engine and full-row writes the old
    /// value is not even read, so inserts are `+U` too.
    Wal,
}

/// One column's aggregation function, resolved and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ColumnAgg {
    pub(crate) function: AggFunctionType,
    /// `listagg` / `string_agg` delimiter; empty for every other function.
    pub(crate) delimiter: String,
}

/// A primary-key table's merge settings, validated.
///
/// Guarantees: the combination is one Fluss accepts at table creation; the
/// version column exists and has a version type; every aggregation
/// function is valid for its column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeOptions {
    engine: MergeEngine,
    delete_behavior: DeleteBehavior,
    changelog_image: ChangelogImage,
    /// Per column, for the aggregation engine only (empty otherwise).
    aggregation: Vec<ColumnAgg>,
}

impl Default for MergeOptions {
    /// A table without merge options: default engine, deletes allowed, FULL image.
    fn default() -> Self {
        Self {
            engine: MergeEngine::Default,
            delete_behavior: DeleteBehavior::Allow,
            changelog_image: ChangelogImage::Full,
            aggregation: Vec::new(),
        }
    }
}

impl MergeOptions {
    /// Reads and checks the merge settings of a table with `schema` and
    /// `properties`, refusing what Fluss refuses at table creation (all with
    /// INVALID_CONFIG_EXCEPTION).
    ///
    /// Unset `table.delete.behavior` means `allow` for the default engine and
    /// `ignore` for the three merge engines (Fluss's coordinator writes that
    /// default into the table; its mergers assume it too).
    pub fn from_table(
        schema: &Schema,
        properties: &BTreeMap<String, String>,
    ) -> Result<Self, ApiError> {
        let engine_name = properties.get(TABLE_MERGE_ENGINE);
        let delete_name = properties.get(TABLE_DELETE_BEHAVIOR);
        let image_name = properties.get(TABLE_CHANGELOG_IMAGE);
        let engine_kind = engine_name.map(|v| parse_engine(v)).transpose()?;
        let delete_behavior = delete_name.map(|v| parse_delete(v)).transpose()?;
        let changelog_image = image_name
            .map(|v| parse_image(v))
            .transpose()?
            .unwrap_or(ChangelogImage::Full);
        let has_primary_key = schema.primary_key().is_some();

        // Fluss's checkMergeEngine.
        let mut aggregation = Vec::new();
        let engine = match engine_kind {
            None => MergeEngine::Default,
            Some(_) if !has_primary_key => {
                return Err(invalid_config(
                    "a merge engine can only be set on a primary-key table".to_string(),
                ));
            }
            Some(EngineKind::FirstRow) => MergeEngine::FirstRow,
            Some(EngineKind::Versioned) => MergeEngine::Versioned {
                column: version_column(schema, properties)?,
            },
            Some(EngineKind::Aggregation) => {
                if changelog_image == ChangelogImage::Wal {
                    return Err(invalid_config(format!(
                        "the aggregation merge engine needs the FULL changelog image (its \
                         undo recovery reads the -U rows): set '{TABLE_CHANGELOG_IMAGE}' to \
                         'FULL' or leave it unset"
                    )));
                }
                aggregation = aggregation_functions(schema)?;
                MergeEngine::Aggregation
            }
        };

        // Fluss's checkDeleteBehavior.
        if delete_behavior.is_some() && !has_primary_key {
            return Err(invalid_config(format!(
                "'{TABLE_DELETE_BEHAVIOR}' can only be set on a primary-key table"
            )));
        }
        if delete_behavior == Some(DeleteBehavior::Allow)
            && matches!(
                engine,
                MergeEngine::FirstRow | MergeEngine::Versioned { .. }
            )
        {
            return Err(invalid_config(format!(
                "the {} merge engine cannot delete rows: set '{TABLE_DELETE_BEHAVIOR}' to \
                 'ignore' or 'disable', not 'allow'",
                engine_name_of(engine)
            )));
        }
        let delete_behavior = delete_behavior.unwrap_or(match engine {
            MergeEngine::Default => DeleteBehavior::Allow,
            _ => DeleteBehavior::Ignore,
        });

        Ok(Self {
            engine,
            delete_behavior,
            changelog_image,
            aggregation,
        })
    }

    /// The merge engine.
    pub fn engine(&self) -> MergeEngine {
        self.engine
    }

    /// The effective delete behaviour (the per-engine default when unset).
    pub fn delete_behavior(&self) -> DeleteBehavior {
        self.delete_behavior
    }

    /// The changelog image.
    pub fn changelog_image(&self) -> ChangelogImage {
        self.changelog_image
    }

    /// Per column, the aggregation function (aggregation engine only).
    pub(crate) fn aggregation(&self) -> &[ColumnAgg] {
        &self.aggregation
    }
}

#[derive(Clone, Copy)]
enum EngineKind {
    FirstRow,
    Versioned,
    Aggregation,
}

fn engine_name_of(engine: MergeEngine) -> &'static str {
    match engine {
        MergeEngine::Default => "default",
        MergeEngine::FirstRow => "first_row",
        MergeEngine::Versioned { .. } => "versioned",
        MergeEngine::Aggregation => "aggregation",
    }
}

fn invalid_config(message: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidConfigException, message)
}

/// Fluss parses enum options case-insensitively against the constant names.
fn parse_enum<T: Copy>(
    key: &str,
    value: &str,
    choices: &[(&'static str, T)],
) -> Result<T, ApiError> {
    for &(name, choice) in choices {
        if value.eq_ignore_ascii_case(name) {
            return Ok(choice);
        }
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    Err(invalid_config(format!(
        "invalid value '{value}' for table option '{key}': expected one of {} (any case)",
        names.join(", ")
    )))
}

fn parse_engine(value: &str) -> Result<EngineKind, ApiError> {
    parse_enum(
        TABLE_MERGE_ENGINE,
        value,
        &[
            ("first_row", EngineKind::FirstRow),
            ("versioned", EngineKind::Versioned),
            ("aggregation", EngineKind::Aggregation),
        ],
    )
}

fn parse_delete(value: &str) -> Result<DeleteBehavior, ApiError> {
    parse_enum(
        TABLE_DELETE_BEHAVIOR,
        value,
        &[
            ("allow", DeleteBehavior::Allow),
            ("ignore", DeleteBehavior::Ignore),
            ("disable", DeleteBehavior::Disable),
        ],
    )
}

fn parse_image(value: &str) -> Result<ChangelogImage, ApiError> {
    parse_enum(
        TABLE_CHANGELOG_IMAGE,
        value,
        &[("FULL", ChangelogImage::Full), ("WAL", ChangelogImage::Wal)],
    )
}

fn version_column(
    schema: &Schema,
    properties: &BTreeMap<String, String>,
) -> Result<usize, ApiError> {
    let Some(name) = properties.get(TABLE_MERGE_ENGINE_VERSION_COLUMN) else {
        return Err(invalid_config(format!(
            "the versioned merge engine needs '{TABLE_MERGE_ENGINE_VERSION_COLUMN}' naming \
             its version column"
        )));
    };
    let Some(index) = schema.column_index(name) else {
        return Err(invalid_config(format!(
            "the version column '{name}' of the versioned merge engine is not a column of \
             the table"
        )));
    };
    let data_type = &schema.columns()[index].data_type;
    match data_type.kind() {
        TypeKind::Int
        | TypeKind::BigInt
        | TypeKind::Timestamp { .. }
        | TypeKind::TimestampLtz { .. } => Ok(index),
        _ => Err(invalid_config(format!(
            "the version column '{name}' of the versioned merge engine must be INT, BIGINT, \
             TIMESTAMP or TIMESTAMP_LTZ, not {data_type}"
        ))),
    }
}

/// Each column's function: `last_value` for key columns, the declared one
/// (checked) or `last_value_ignore_nulls` for the others. A function name
/// Fluss does not know is dropped when Fluss reads the schema, so such a
/// column aggregates with the default too.
fn aggregation_functions(schema: &Schema) -> Result<Vec<ColumnAgg>, ApiError> {
    let primary_key = schema.primary_key().unwrap_or(&[]);
    let mut out = Vec::with_capacity(schema.columns().len());
    for column in schema.columns() {
        if primary_key.contains(&column.name) {
            out.push(ColumnAgg {
                function: AggFunctionType::LastValue,
                delimiter: String::new(),
            });
            continue;
        }
        let declared = column
            .agg_function
            .as_ref()
            .and_then(|agg| AggFunctionType::from_name(&agg.kind).map(|f| (f, agg)));
        let Some((function, agg)) = declared else {
            out.push(ColumnAgg {
                function: AggFunctionType::LastValueIgnoreNulls,
                delimiter: String::new(),
            });
            continue;
        };
        let mut delimiter = String::new();
        for (name, value) in agg.parameters.iter().flatten() {
            if !function.accepts_delimiter() || name != PARAM_DELIMITER {
                return Err(bad_function(
                    column,
                    format!(
                        "parameter '{name}' is not accepted by '{}' (it accepts {})",
                        function.name(),
                        if function.accepts_delimiter() {
                            "only 'delimiter'"
                        } else {
                            "no parameters"
                        }
                    ),
                ));
            }
            if value.is_empty() {
                return Err(bad_function(
                    column,
                    format!("'{}' needs a non-empty '{name}'", function.name()),
                ));
            }
            delimiter.clone_from(value);
        }
        if function.accepts_delimiter() && delimiter.is_empty() {
            delimiter.push_str(DEFAULT_LISTAGG_DELIMITER);
        }
        if !function.accepts_type(column.data_type.kind()) {
            return Err(bad_function(
                column,
                format!(
                    "'{}' cannot aggregate a {} column (it takes {})",
                    function.name(),
                    column.data_type,
                    function.accepted_types()
                ),
            ));
        }
        out.push(ColumnAgg {
            function,
            delimiter,
        });
    }
    Ok(out)
}

fn bad_function(column: &Column, reason: String) -> ApiError {
    invalid_config(format!(
        "invalid aggregation function for column '{}': {reason}",
        column.name
    ))
}

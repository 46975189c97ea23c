//! Snapshot reading shared by the chunked and the whole-table reads (see
//! `chunks`): the consistent view a table without an integer key is read
//! in (`START TRANSACTION WITH CONSISTENT SNAPSHOT` and the binlog position
//! that view corresponds to), and the converter of snapshot rows.
//!
//! MariaDB reports that position for the open snapshot itself
//! (`binlog_snapshot_file` / `binlog_snapshot_position`), so no global lock
//! is taken; on MySQL the position is read under a short
//! `FLUSH TABLES WITH READ LOCK`.
//!
//! The source converts the binary-protocol values with a converter prepared
//! once per table.

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::{Row, Value};

use crate::event::EventBatch;
use crate::row::RowWriter;
use crate::schema::TableSchema;
use crate::source::SourceError;
use crate::types::DataType;

use super::coltype::{Base, MySqlType};
use super::schema_cache::TableInfo;
use super::temporal;

/// Starts the consistent snapshot on `conn` and returns the binlog position it
/// corresponds to.
pub(crate) async fn begin(
    conn: &mut mysql_async::Conn,
    mariadb: bool,
) -> Result<(String, u64), SourceError> {
    let db = |context: &'static str| {
        move |e: mysql_async::Error| SourceError::Database(format!("{context}: {e}"))
    };
    conn.query_drop("SET SESSION time_zone = '+00:00'")
        .await
        .map_err(db("setting the snapshot session's time zone"))?;
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await
        .map_err(db("setting the snapshot isolation level"))?;
    if mariadb {
        conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            .await
            .map_err(db("starting the snapshot transaction"))?;
        let rows: Vec<(String, String)> = conn
            .query("SHOW STATUS LIKE 'binlog_snapshot_%'")
            .await
            .map_err(db("reading binlog_snapshot_file/position"))?;
        let get = |name: &str| {
            rows.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let file = get("binlog_snapshot_file").unwrap_or_default();
        let pos = get("binlog_snapshot_position").and_then(|p| p.parse().ok());
        match (file.is_empty(), pos) {
            (false, Some(pos)) => Ok((file, pos)),
            _ => Err(SourceError::Database(
                "the server reports no binlog_snapshot_file/position: is log_bin on?".into(),
            )),
        }
    } else {
        conn.query_drop("FLUSH TABLES WITH READ LOCK")
            .await
            .map_err(db(
                "FLUSH TABLES WITH READ LOCK (needs the RELOAD privilege)",
            ))?;
        let result = async {
            conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                .await
                .map_err(db("starting the snapshot transaction"))?;
            super::master_status(conn).await
        }
        .await;
        conn.query_drop("UNLOCK TABLES")
            .await
            .map_err(db("UNLOCK TABLES"))?;
        result
    }
}

/// How one column's text value is converted.
#[derive(Clone, Copy, Debug)]
enum Conv {
    Int,
    Bool,
    UnsignedDecimal,
    Float,
    Double,
    Decimal { scale: u8 },
    BitBool,
    Raw,
    Text,
    Date,
    DateTime,
    Time,
}

/// A table's snapshot converter, prepared once per table.
pub(crate) struct SnapshotTable {
    pub schema: Arc<TableSchema>,
    convs: Box<[Conv]>,
}

impl SnapshotTable {
    /// Prepares the converter of `info`'s columns.
    pub(crate) fn new(info: &TableInfo) -> SnapshotTable {
        let convs = info
            .schema
            .columns()
            .iter()
            .zip(&info.types)
            .map(|(c, ty)| conv(c.data_type, ty))
            .collect();
        SnapshotTable {
            schema: Arc::clone(&info.schema),
            convs,
        }
    }

    /// Appends one row as an insert.
    pub(crate) fn push_row(&self, row: &Row, batch: &mut EventBatch) -> Result<(), SourceError> {
        if row.len() != self.convs.len() {
            return Err(SourceError::Unsupported(format!(
                "snapshot of {}: rows have {} columns, the schema read at start {}; the table \
                 was altered while its snapshot ran (DDL during the snapshot is not supported: \
                 run the pipeline again)",
                self.schema.id(),
                row.len(),
                self.convs.len()
            )));
        }
        let slot = batch.table_slot(&self.schema);
        let mut w = batch.row_writer(slot);
        for (i, conv) in self.convs.iter().enumerate() {
            match row.as_ref(i) {
                None | Some(Value::NULL) => {}
                Some(Value::Bytes(bytes)) => {
                    if set(&mut w, i, *conv, bytes).is_none() {
                        return Err(SourceError::Decode(format!(
                            "snapshot of {}, column {}: cannot read {:?} as {}",
                            self.schema.id(),
                            self.schema.columns()[i].name,
                            String::from_utf8_lossy(bytes),
                            self.schema.columns()[i].data_type
                        )));
                    }
                }
                Some(other) => {
                    if set_binary(&mut w, i, *conv, other).is_none() {
                        return Err(SourceError::Decode(format!(
                            "snapshot of {}, column {}: cannot read {other:?} as {}",
                            self.schema.id(),
                            self.schema.columns()[i].name,
                            self.schema.columns()[i].data_type
                        )));
                    }
                }
            }
        }
        let handle = w.finish().map_err(|e| SourceError::Decode(e.to_string()))?;
        batch.push_insert(slot, handle);
        Ok(())
    }
}

fn conv(data_type: DataType, ty: &MySqlType) -> Conv {
    match (data_type, ty.base) {
        (DataType::Boolean, Base::Bit) => Conv::BitBool,
        (DataType::Boolean, _) => Conv::Bool,
        (DataType::Decimal { .. }, Base::BigInt) => Conv::UnsignedDecimal,
        (DataType::Decimal { scale, .. }, _) => Conv::Decimal { scale },
        (DataType::Float, _) => Conv::Float,
        (DataType::Double, _) => Conv::Double,
        (DataType::TinyInt | DataType::SmallInt | DataType::Int | DataType::BigInt, _) => Conv::Int,
        (DataType::Date, _) => Conv::Date,
        (DataType::Time { .. }, _) => Conv::Time,
        (DataType::Timestamp { .. } | DataType::TimestampLtz { .. }, _) => Conv::DateTime,
        (DataType::Binary { .. } | DataType::Varbinary { .. } | DataType::Bytes, _) => Conv::Raw,
        (
            DataType::Char { .. } | DataType::Varchar { .. } | DataType::String | DataType::Json,
            _,
        ) => Conv::Text,
    }
}

/// Stores one binary-protocol value (numbers, dates, times); strings and
/// decimals arrive as bytes and go through [`set`].
fn set_binary(w: &mut RowWriter<'_>, i: usize, conv: Conv, value: &Value) -> Option<()> {
    match (conv, value) {
        (Conv::Int, Value::Int(v)) => w.set_i64(i, *v),
        (Conv::Int, Value::UInt(v)) => w.set_i64(i, i64::try_from(*v).ok()?),
        (Conv::Bool, Value::Int(v)) => w.set_bool(i, *v != 0),
        (Conv::Bool, Value::UInt(v)) => w.set_bool(i, *v != 0),
        (Conv::UnsignedDecimal, Value::UInt(v)) => {
            let mut buf = itoa::Buffer::new();
            w.set_decimal_digits(i, false, buf.format(*v).as_bytes());
        }
        (Conv::UnsignedDecimal, Value::Int(v)) => {
            let mut buf = itoa::Buffer::new();
            w.set_decimal_digits(i, false, buf.format(u64::try_from(*v).ok()?).as_bytes());
        }
        (Conv::Float, Value::Float(v)) => w.set_f32(i, *v),
        (Conv::Double, Value::Double(v)) => w.set_f64(i, *v),
        (
            Conv::Date | Conv::DateTime,
            Value::Date(year, month, day, hour, minute, second, micros),
        ) => {
            if *month == 0 || *day == 0 {
                return Some(()); // zero date: NULL, as in the binlog phase
            }
            let days =
                temporal::days_from_civil(i64::from(*year), u32::from(*month), u32::from(*day));
            if matches!(conv, Conv::Date) {
                w.set_i64(i, days);
            } else {
                let seconds = days * 86_400
                    + i64::from(*hour) * 3600
                    + i64::from(*minute) * 60
                    + i64::from(*second);
                w.set_micros(
                    i,
                    seconds * temporal::MICROS_PER_SECOND + i64::from(*micros),
                );
            }
        }
        (Conv::Time, Value::Time(negative, days, hours, minutes, seconds, micros)) => {
            let total = ((i64::from(*days) * 24 + i64::from(*hours)) * 3600
                + i64::from(*minutes) * 60
                + i64::from(*seconds))
                * temporal::MICROS_PER_SECOND
                + i64::from(*micros);
            w.set_micros(i, if *negative { -total } else { total });
        }
        _ => return None,
    }
    Some(())
}

fn parse_i64(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Stores one text value; `None` if it does not parse as the column's type.
fn set(w: &mut RowWriter<'_>, i: usize, conv: Conv, bytes: &[u8]) -> Option<()> {
    match conv {
        Conv::Int => w.set_i64(i, parse_i64(bytes)?),
        Conv::Bool => w.set_bool(i, parse_i64(bytes)? != 0),
        Conv::BitBool => w.set_bool(i, bytes.iter().any(|&b| b != 0)),
        Conv::UnsignedDecimal => {
            if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
                return None;
            }
            w.set_decimal_digits(i, false, bytes);
        }
        Conv::Float => w.set_f32(i, std::str::from_utf8(bytes).ok()?.parse().ok()?),
        Conv::Double => w.set_f64(i, std::str::from_utf8(bytes).ok()?.parse().ok()?),
        Conv::Decimal { scale } => {
            let (negative, body) = match bytes.split_first() {
                Some((b'-', rest)) => (true, rest),
                _ => (false, bytes),
            };
            let (int, frac) = match body.iter().position(|&c| c == b'.') {
                Some(dot) => (&body[..dot], &body[dot + 1..]),
                None => (body, &[][..]),
            };
            if frac.len() > usize::from(scale) || int.len() + usize::from(scale) > 96 {
                return None;
            }
            let mut digits = [b'0'; 96];
            digits[..int.len()].copy_from_slice(int);
            digits[int.len()..int.len() + frac.len()].copy_from_slice(frac);
            let all = &digits[..int.len() + usize::from(scale)];
            if !all.iter().all(u8::is_ascii_digit) {
                return None;
            }
            w.set_decimal_digits(i, negative, all);
        }
        Conv::Raw => w.set_bytes(i, bytes),
        Conv::Text => w.set_str(i, std::str::from_utf8(bytes).ok()?),
        Conv::Date => {
            // Zero dates read as NULL, as in the binlog phase.
            if let Some(days) = temporal::parse_date(bytes) {
                w.set_i64(i, days);
            }
        }
        Conv::DateTime => {
            if let Some(micros) = temporal::parse_datetime(bytes) {
                w.set_micros(i, micros);
            } else if !bytes.starts_with(b"0000-00-00") {
                return None;
            }
        }
        Conv::Time => w.set_micros(i, temporal::parse_time(bytes)?),
    }
    Some(())
}

//! Binlog row decoding: `TABLE_MAP` events, and the bodies of
//! `WRITE/UPDATE/DELETE_ROWS` events (v1 as MariaDB writes them, v2 as MySQL
//! writes them) decoded straight into the batch's compact rows.
//!
//! A [`RowDecoder`] is prepared once per table map and table schema version:
//! it pairs each binlog column (type code + metadata) with the column's
//! parsed MySQL type and the row slot it fills, so decoding a row is one pass
//! over the bytes with no per-row type dispatch beyond a `match` on a
//! prepared enum, no allocation and no formatting.

use std::sync::Arc;

use crate::event::{EventBatch, TableSlot};
use crate::row::RowWriter;
use crate::schema::TableSchema;
use crate::source::SourceError;
use crate::types::DataType;

use super::coltype::{Base, Charset, MySqlType};
use super::schema_cache::TableInfo;
use super::temporal;

/// Binlog column type codes (`enum_field_types`).
pub(crate) mod field {
    pub const DECIMAL: u8 = 0;
    pub const TINY: u8 = 1;
    pub const SHORT: u8 = 2;
    pub const LONG: u8 = 3;
    pub const FLOAT: u8 = 4;
    pub const DOUBLE: u8 = 5;
    pub const TIMESTAMP: u8 = 7;
    pub const LONGLONG: u8 = 8;
    pub const INT24: u8 = 9;
    pub const DATE: u8 = 10;
    pub const TIME: u8 = 11;
    pub const DATETIME: u8 = 12;
    pub const YEAR: u8 = 13;
    pub const NEWDATE: u8 = 14;
    pub const VARCHAR: u8 = 15;
    pub const BIT: u8 = 16;
    pub const TIMESTAMP2: u8 = 17;
    pub const DATETIME2: u8 = 18;
    pub const TIME2: u8 = 19;
    pub const JSON: u8 = 245;
    pub const NEWDECIMAL: u8 = 246;
    pub const ENUM: u8 = 247;
    pub const SET: u8 = 248;
    pub const TINY_BLOB: u8 = 249;
    pub const MEDIUM_BLOB: u8 = 250;
    pub const LONG_BLOB: u8 = 251;
    pub const BLOB: u8 = 252;
    pub const VAR_STRING: u8 = 253;
    pub const STRING: u8 = 254;
    pub const GEOMETRY: u8 = 255;
}

/// Rows event type codes.
pub(crate) mod rows_event {
    pub const WRITE_V1: u8 = 23;
    pub const UPDATE_V1: u8 = 24;
    pub const DELETE_V1: u8 = 25;
    pub const WRITE_V2: u8 = 30;
    pub const UPDATE_V2: u8 = 31;
    pub const DELETE_V2: u8 = 32;
    /// MariaDB `log_bin_compress` rows events (166..=171): refused with a clear error.
    pub const MARIADB_COMPRESSED_FIRST: u8 = 166;
    pub const MARIADB_COMPRESSED_LAST: u8 = 171;
}

/// A byte reader over an event body whose every read is bounds-checked.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// Marker error: the event body ended early or held an impossible value.
/// Turned into a [`SourceError`] naming the table by the caller (rarely).
#[derive(Debug)]
pub(crate) struct Malformed(pub &'static str);

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, at: 0 }
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.at.checked_add(n).ok_or(Malformed("length overflow"))?;
        let s = self
            .bytes
            .get(self.at..end)
            .ok_or(Malformed("event truncated"))?;
        self.at = end;
        Ok(s)
    }

    #[inline]
    fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    #[inline]
    fn le(&mut self, n: usize) -> Result<u64, Malformed> {
        let s = self.take(n)?;
        // Fixed-width fast paths for the integer widths rows use most.
        Ok(match *s {
            [a] => u64::from(a),
            [a, b] => u64::from(u16::from_le_bytes([a, b])),
            [a, b, c, d] => u64::from(u32::from_le_bytes([a, b, c, d])),
            [a, b, c, d, e, f, g, h] => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
            _ => s
                .iter()
                .rev()
                .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)),
        })
    }

    fn lenenc(&mut self) -> Result<u64, Malformed> {
        match self.u8()? {
            n @ 0..=250 => Ok(u64::from(n)),
            252 => self.le(2),
            253 => self.le(3),
            254 => self.le(8),
            _ => Err(Malformed("bad length-encoded integer")),
        }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }
}

/// A parsed `TABLE_MAP` event: which table a table id names in the events that
/// follow, and each column's binlog type code and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableMap {
    pub table_id: u64,
    pub database: String,
    pub table: String,
    /// `(type code, metadata)` per column, in table order.
    pub columns: Vec<(u8, u16)>,
}

fn malformed_map(what: &'static str) -> SourceError {
    SourceError::Decode(format!("malformed TABLE_MAP event: {}", what))
}

impl TableMap {
    /// Parses a `TABLE_MAP` event body (post-header included, checksum excluded).
    pub(crate) fn parse(data: &[u8]) -> Result<TableMap, SourceError> {
        Self::parse_inner(data).map_err(|m| malformed_map(m.0))
    }

    fn parse_inner(data: &[u8]) -> Result<TableMap, Malformed> {
        let mut c = Cursor::new(data);
        let table_id = c.le(6)?;
        c.take(2)?; // flags
        let db_len = usize::from(c.u8()?);
        let database = String::from_utf8_lossy(c.take(db_len)?).into_owned();
        c.take(1)?;
        let table_len = usize::from(c.u8()?);
        let table = String::from_utf8_lossy(c.take(table_len)?).into_owned();
        c.take(1)?;
        let count = c.lenenc()? as usize;
        if count > crate::schema::COLUMNS_MAX {
            return Err(Malformed("too many columns"));
        }
        let types = c.take(count)?;
        let meta_len = c.lenenc()? as usize;
        let mut meta = Cursor::new(c.take(meta_len)?);
        let mut columns = Vec::with_capacity(count);
        for &t in types {
            let m = match t {
                field::FLOAT
                | field::DOUBLE
                | field::TIMESTAMP2
                | field::DATETIME2
                | field::TIME2
                | field::JSON
                | field::TINY_BLOB
                | field::MEDIUM_BLOB
                | field::LONG_BLOB
                | field::BLOB
                | field::GEOMETRY => u16::from(meta.u8()?),
                field::VARCHAR | field::VAR_STRING => meta.le(2)? as u16,
                // Two bytes in order: precision/scale, bits%8/bytes, real type/length.
                field::NEWDECIMAL | field::BIT | field::STRING | field::ENUM | field::SET => {
                    let a = meta.u8()?;
                    let b = meta.u8()?;
                    u16::from(a) << 8 | u16::from(b)
                }
                _ => 0,
            };
            columns.push((t, m));
        }
        Ok(TableMap {
            table_id,
            database,
            table,
            columns,
        })
    }
}

/// Where a decoded integer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IntOut {
    I64,
    Bool,
    /// `BIGINT UNSIGNED` → `DECIMAL(20, 0)`.
    U64Decimal,
}

/// How text/binary bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BytesOut {
    /// UTF-8 text, validated.
    Utf8,
    /// Latin-1 text, converted to UTF-8.
    Latin1,
    /// Raw bytes.
    Raw,
    /// `BINARY(n)`: raw bytes right-padded with zero bytes to `n` (the binlog
    /// drops trailing zeros, a `SELECT` returns them).
    Padded(u32),
}

/// One column's prepared decoder.
#[derive(Clone, Debug)]
enum Col {
    Int {
        bytes: u8,
        signed: bool,
        out: IntOut,
    },
    Year,
    Float,
    Double,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Bit {
        bytes: u8,
        as_bool: bool,
    },
    Date,
    Time2 {
        fsp: u8,
    },
    DateTime2 {
        fsp: u8,
    },
    Timestamp2 {
        fsp: u8,
    },
    TimestampOld,
    Var {
        len_bytes: u8,
        out: BytesOut,
    },
    Enum {
        bytes: u8,
        members: Arc<[Box<str>]>,
    },
    Set {
        bytes: u8,
        members: Arc<[Box<str>]>,
    },
}

/// The decoder of one table's rows at one table-map and schema version.
pub(crate) struct RowDecoder {
    /// The schema whose row layout the decoded rows follow.
    pub schema: Arc<TableSchema>,
    cols: Box<[Col]>,
    /// The primary key's column when the key is one signed-range integer
    /// column (the chunk key of the snapshot), read by the keyed decoding.
    key_col: Option<usize>,
}

/// What to do with one decoded row change, decided from the keys of its
/// rows (see [`RowDecoder::decode_event_keyed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keyed {
    /// Deliver the change as it is.
    Keep,
    /// Drop it.
    Skip,
    /// An update whose new key is not wanted: deliver only the delete of its before image.
    DeleteBefore,
    /// An update whose old key is not wanted: deliver only the insert of its after image.
    InsertAfter,
}

/// Reusable per-source scratch space for values that need conversion (SET
/// member lists, Latin-1 text, padded binary, decimal digits).
#[derive(Default)]
pub(crate) struct Scratch {
    text: String,
    bytes: Vec<u8>,
}

fn mismatch(schema: &TableSchema, index: usize, binlog_type: u8, ty: &MySqlType) -> SourceError {
    SourceError::Decode(format!(
        "table {}: binlog column {} ({}) has type code {} but the table's known type is {:?}; \
         the source's schema is out of date (a DDL it could not follow?)",
        schema.id(),
        index,
        schema.columns()[index].name,
        binlog_type,
        ty.base
    ))
}

fn text_out(ty: &MySqlType, target: DataType) -> BytesOut {
    match target {
        DataType::Binary { length } => BytesOut::Padded(length),
        DataType::Varbinary { .. } | DataType::Bytes => BytesOut::Raw,
        _ => match ty.charset {
            Charset::Latin1 => BytesOut::Latin1,
            Charset::Binary if ty.base == Base::Blob => BytesOut::Raw,
            _ => BytesOut::Utf8,
        },
    }
}

impl RowDecoder {
    /// Prepares the decoder for rows of `info`'s table under `map`. Fails if the
    /// binlog's columns do not agree with the known schema.
    pub(crate) fn new(map: &TableMap, info: &TableInfo) -> Result<RowDecoder, SourceError> {
        let schema = &info.schema;
        if map.columns.len() != schema.columns().len() {
            return Err(SourceError::Decode(format!(
                "table {}: the binlog has {} columns but the source knows {} ({}); the source's \
                 schema is out of date (a DDL it could not follow, or a start position older \
                 than the table's last DDL)",
                schema.id(),
                map.columns.len(),
                schema.columns().len(),
                schema
                    .columns()
                    .iter()
                    .map(|c| &*c.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let mut cols = Vec::with_capacity(map.columns.len());
        for (i, (&(code, meta), ty)) in map.columns.iter().zip(&info.types).enumerate() {
            let target = schema.columns()[i].data_type;
            let int = |bytes: u8| {
                let out = match target {
                    DataType::Boolean => IntOut::Bool,
                    DataType::Decimal { .. } => IntOut::U64Decimal,
                    _ => IntOut::I64,
                };
                Col::Int {
                    bytes,
                    signed: !ty.unsigned,
                    out,
                }
            };
            let col = match (code, ty.base) {
                (field::TINY, Base::TinyInt) => int(1),
                (field::SHORT, Base::SmallInt) => int(2),
                (field::INT24, Base::MediumInt) => int(3),
                (field::LONG, Base::Int) => int(4),
                (field::LONGLONG, Base::BigInt) => int(8),
                (field::YEAR, Base::Year) => Col::Year,
                (field::FLOAT, Base::Float) => Col::Float,
                (field::DOUBLE, Base::Double) => Col::Double,
                (field::NEWDECIMAL, Base::Decimal) => {
                    let (precision, scale) = ((meta >> 8) as u8, (meta & 0xff) as u8);
                    // The binlog's metadata must agree with the schema: the
                    // decimal's bytes and digits are sized from it.
                    if precision != ty.precision || scale != ty.scale {
                        return Err(mismatch(schema, i, code, ty));
                    }
                    Col::Decimal { precision, scale }
                }
                (field::BIT, Base::Bit) => {
                    let bits_rem = (meta >> 8) as u8;
                    let full = (meta & 0xff) as u8;
                    Col::Bit {
                        bytes: full + u8::from(bits_rem != 0),
                        as_bool: target == DataType::Boolean,
                    }
                }
                (field::DATE | field::NEWDATE, Base::Date) => Col::Date,
                (field::TIME2, Base::Time) if meta <= 6 => Col::Time2 { fsp: meta as u8 },
                (field::DATETIME2, Base::DateTime) if meta <= 6 => {
                    Col::DateTime2 { fsp: meta as u8 }
                }
                (field::TIMESTAMP2, Base::Timestamp) if meta <= 6 => {
                    Col::Timestamp2 { fsp: meta as u8 }
                }
                (field::TIMESTAMP, Base::Timestamp) => Col::TimestampOld,
                (
                    field::VARCHAR | field::VAR_STRING,
                    Base::Varchar | Base::Varbinary | Base::Char | Base::Binary,
                ) => Col::Var {
                    len_bytes: if meta > 255 { 2 } else { 1 },
                    out: text_out(ty, target),
                },
                (
                    field::TINY_BLOB | field::MEDIUM_BLOB | field::LONG_BLOB | field::BLOB,
                    Base::Text | Base::Blob | Base::Json,
                ) => {
                    if !(1..=4).contains(&meta) {
                        return Err(mismatch(schema, i, code, ty));
                    }
                    Col::Var {
                        len_bytes: meta as u8,
                        out: text_out(ty, target),
                    }
                }
                (field::STRING, _) => {
                    let byte0 = (meta >> 8) as u8;
                    let byte1 = meta & 0xff;
                    let (real_type, length) = if byte0 & 0x30 != 0x30 {
                        (
                            byte0 | 0x30,
                            byte1 | (u16::from((byte0 & 0x30) ^ 0x30) << 4),
                        )
                    } else {
                        (byte0, byte1)
                    };
                    match (real_type, ty.base) {
                        (field::ENUM, Base::Enum) => Col::Enum {
                            bytes: byte1 as u8,
                            members: Arc::clone(&ty.members),
                        },
                        (field::SET, Base::Set) => Col::Set {
                            bytes: byte1 as u8,
                            members: Arc::clone(&ty.members),
                        },
                        (field::STRING, Base::Char | Base::Binary) => Col::Var {
                            len_bytes: if length > 255 { 2 } else { 1 },
                            out: text_out(ty, target),
                        },
                        _ => return Err(mismatch(schema, i, code, ty)),
                    }
                }
                (field::ENUM, Base::Enum) => Col::Enum {
                    bytes: (meta & 0xff) as u8,
                    members: Arc::clone(&ty.members),
                },
                (field::SET, Base::Set) => Col::Set {
                    bytes: (meta & 0xff) as u8,
                    members: Arc::clone(&ty.members),
                },
                (field::JSON, _) => {
                    return Err(SourceError::Unsupported(format!(
                        "table {}, column {}: MySQL's binary JSON binlog encoding is not \
                         supported yet (MariaDB's text JSON is)",
                        schema.id(),
                        schema.columns()[i].name
                    )))
                }
                (field::DATETIME | field::TIME | field::DECIMAL, _) => {
                    return Err(SourceError::Unsupported(format!(
                        "table {}, column {}: pre-5.6 temporal/decimal binlog encoding (type \
                         code {code}); rebuild the table (ALTER TABLE ... FORCE) to upgrade it",
                        schema.id(),
                        schema.columns()[i].name
                    )))
                }
                _ => return Err(mismatch(schema, i, code, ty)),
            };
            if let Col::Enum { bytes, .. } | Col::Set { bytes, .. } = col {
                if !(1..=8).contains(&bytes) {
                    return Err(mismatch(schema, i, code, ty));
                }
            }
            cols.push(col);
        }
        let key_col = match info.schema.primary_key() {
            [k] => Some(usize::from(*k)).filter(|&k| {
                matches!(
                    cols.get(k),
                    Some(Col::Int {
                        out: IntOut::I64,
                        ..
                    })
                )
            }),
            _ => None,
        };
        Ok(RowDecoder {
            schema: Arc::clone(&info.schema),
            cols: cols.into_boxed_slice(),
            key_col,
        })
    }

    /// As [`Self::decode_event`], but each row change is delivered as
    /// `filter` decides from the keys of its before and after images
    /// (`None` for an image the change has not, or a NULL key).
    #[allow(clippy::too_many_arguments)] // decode_event's, plus the filter
    pub(crate) fn decode_event_keyed(
        &self,
        event_type: u8,
        data: &[u8],
        batch: &mut EventBatch,
        slot: TableSlot,
        skip: u64,
        scratch: &mut Scratch,
        filter: &mut dyn FnMut(Option<i64>, Option<i64>) -> Keyed,
    ) -> Result<u64, SourceError> {
        self.decode_inner(event_type, data, batch, slot, skip, scratch, Some(filter))
            .map_err(|e| self.failure(e))
    }

    fn failure(&self, e: DecodeFailure) -> SourceError {
        match e {
            DecodeFailure::Malformed(m) => {
                SourceError::Decode(format!("rows event of table {}: {}", self.schema.id(), m.0))
            }
            DecodeFailure::Column(i, what) => SourceError::Decode(format!(
                "rows event of table {}, column {}: {}",
                self.schema.id(),
                self.schema.columns()[i].name,
                what
            )),
            DecodeFailure::Other(e) => e,
        }
    }

    /// Decodes every row of a rows event body (post-header included) into
    /// `batch` as change events of `slot`, skipping the first `skip` row
    /// changes (already delivered before a restart). Returns the number of row
    /// changes in the event (skipped ones included).
    pub(crate) fn decode_event(
        &self,
        event_type: u8,
        data: &[u8],
        batch: &mut EventBatch,
        slot: TableSlot,
        skip: u64,
        scratch: &mut Scratch,
    ) -> Result<u64, SourceError> {
        self.decode_inner(event_type, data, batch, slot, skip, scratch, None)
            .map_err(|e| self.failure(e))
    }

    #[allow(clippy::too_many_arguments)]
    fn decode_inner(
        &self,
        event_type: u8,
        data: &[u8],
        batch: &mut EventBatch,
        slot: TableSlot,
        skip: u64,
        scratch: &mut Scratch,
        mut filter: Option<&mut dyn FnMut(Option<i64>, Option<i64>) -> Keyed>,
    ) -> Result<u64, DecodeFailure> {
        let key_col = if filter.is_some() { self.key_col } else { None };
        let mut c = Cursor::new(data);
        c.take(6 + 2)?; // table id, flags
        let v2 = matches!(
            event_type,
            rows_event::WRITE_V2 | rows_event::UPDATE_V2 | rows_event::DELETE_V2
        );
        if v2 {
            let extra = c.le(2)? as usize;
            c.take(
                extra
                    .checked_sub(2)
                    .ok_or(Malformed("bad extra-data length"))?,
            )?;
        }
        let count = c.lenenc()? as usize;
        if count != self.cols.len() {
            return Err(Malformed("column count differs from the table map").into());
        }
        let bitmap_len = count.div_ceil(8);
        let present = c.take(bitmap_len)?;
        let is_update = matches!(event_type, rows_event::UPDATE_V1 | rows_event::UPDATE_V2);
        let present_after = if is_update {
            c.take(bitmap_len)?
        } else {
            present
        };
        let present_count = count_ones(present, count);
        let present_after_count = count_ones(present_after, count);
        let mut rows = 0u64;
        while c.remaining() > 0 {
            let mut key = None;
            let before_or_only = self.decode_row(
                &mut c,
                present,
                present_count,
                batch,
                slot,
                scratch,
                key_col,
                &mut key,
            )?;
            let change = rows;
            rows += 1;
            if is_update {
                let mut after_key = None;
                let after = self.decode_row(
                    &mut c,
                    present_after,
                    present_after_count,
                    batch,
                    slot,
                    scratch,
                    key_col,
                    &mut after_key,
                )?;
                if change >= skip {
                    match filter.as_mut().map_or(Keyed::Keep, |f| f(key, after_key)) {
                        Keyed::Keep => batch.push_update(slot, before_or_only, after),
                        Keyed::DeleteBefore => batch.push_delete(slot, before_or_only),
                        Keyed::InsertAfter => batch.push_insert(slot, after),
                        Keyed::Skip => {}
                    }
                }
                continue;
            }
            if change < skip {
                continue;
            }
            let insert = matches!(event_type, rows_event::WRITE_V1 | rows_event::WRITE_V2);
            if let Some(f) = filter.as_mut() {
                let keyed = if insert { f(None, key) } else { f(key, None) };
                if keyed == Keyed::Skip {
                    continue;
                }
            }
            if insert {
                batch.push_insert(slot, before_or_only)
            } else {
                batch.push_delete(slot, before_or_only)
            }
        }
        Ok(rows)
    }

    /// Decodes one row image; with `key_col` set, also reads that
    /// column's integer into `key` (left `None` when absent or NULL).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn decode_row(
        &self,
        c: &mut Cursor<'_>,
        present: &[u8],
        present_count: usize,
        batch: &mut EventBatch,
        slot: TableSlot,
        scratch: &mut Scratch,
        key_col: Option<usize>,
        key: &mut Option<i64>,
    ) -> Result<crate::row::RowHandle, DecodeFailure> {
        let nulls = c.take(present_count.div_ceil(8))?;
        let mut w = batch.row_writer(slot);
        let mut image_index = 0usize;
        for (i, col) in self.cols.iter().enumerate() {
            if present[i / 8] & (1 << (i % 8)) == 0 {
                continue;
            }
            let null = nulls[image_index / 8] & (1 << (image_index % 8)) != 0;
            image_index += 1;
            if null {
                continue;
            }
            if key_col == Some(i) {
                if let Col::Int { bytes, signed, .. } = *col {
                    let mut peek = Cursor {
                        bytes: c.bytes,
                        at: c.at,
                    };
                    let raw = peek.le(usize::from(bytes))?;
                    *key = Some(if signed {
                        sign_extend(raw, bytes)
                    } else {
                        raw as i64
                    });
                }
            }
            decode_value(col, c, &mut w, i, scratch).map_err(|e| match e {
                DecodeFailure::Malformed(m) => DecodeFailure::Column(i, m.0),
                other => other,
            })?;
        }
        w.finish()
            .map_err(|e| DecodeFailure::Other(SourceError::Decode(e.to_string())))
    }
}

/// Set bits among the first `n` of a column bitmap (bits past the last column
/// do not count, whatever the server left in them).
fn count_ones(bitmap: &[u8], n: usize) -> usize {
    let full = n / 8;
    let mut ones: usize = bitmap[..full].iter().map(|b| b.count_ones() as usize).sum();
    if !n.is_multiple_of(8) {
        ones += (bitmap[full] & ((1u8 << (n % 8)) - 1)).count_ones() as usize;
    }
    ones
}

enum DecodeFailure {
    Malformed(Malformed),
    Column(usize, &'static str),
    Other(SourceError),
}

impl From<Malformed> for DecodeFailure {
    fn from(m: Malformed) -> Self {
        DecodeFailure::Malformed(m)
    }
}

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

/// Bytes of a `DECIMAL(precision, scale)` in MySQL's binary format.
pub(crate) fn decimal_bin_size(precision: u8, scale: u8) -> usize {
    let intg = usize::from(precision - scale);
    let frac = usize::from(scale);
    (intg / 9) * 4 + DIG2BYTES[intg % 9] + (frac / 9) * 4 + DIG2BYTES[frac % 9]
}

/// Decodes MySQL's binary decimal into unscaled ASCII digits (exactly
/// `precision` of them, leading zeros included) and a sign.
pub(crate) fn decode_decimal<'d>(
    bytes: &[u8],
    precision: u8,
    scale: u8,
    digits: &'d mut [u8; 96],
) -> Result<(bool, &'d [u8]), Malformed> {
    let size = decimal_bin_size(precision, scale);
    if bytes.len() != size || size > 40 {
        return Err(Malformed("bad decimal size"));
    }
    let mut buf = [0u8; 40];
    buf[..size].copy_from_slice(bytes);
    let negative = buf[0] & 0x80 == 0;
    buf[0] ^= 0x80;
    if negative {
        for b in &mut buf[..size] {
            *b ^= 0xff;
        }
    }
    let intg = usize::from(precision - scale);
    let frac = usize::from(scale);
    let mut at = 0usize; // byte position in buf
    let mut n = 0usize; // digits written
    let mut group = |buf: &[u8], at: &mut usize, digit_count: usize| -> Result<(), Malformed> {
        if digit_count == 0 {
            return Ok(());
        }
        let width = if digit_count == 9 {
            4
        } else {
            DIG2BYTES[digit_count]
        };
        let mut value = buf[*at..*at + width]
            .iter()
            .fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
        *at += width;
        if u64::from(value) >= 10u64.pow(digit_count as u32) {
            return Err(Malformed("decimal digit group out of range"));
        }
        for k in (0..digit_count).rev() {
            digits[n + k] = b'0' + (value % 10) as u8;
            value /= 10;
        }
        n += digit_count;
        Ok(())
    };
    group(&buf, &mut at, intg % 9)?;
    for _ in 0..intg / 9 {
        group(&buf, &mut at, 9)?;
    }
    for _ in 0..frac / 9 {
        group(&buf, &mut at, 9)?;
    }
    group(&buf, &mut at, frac % 9)?;
    Ok((negative, &digits[..usize::from(precision)]))
}

#[inline]
fn sign_extend(value: u64, bytes: u8) -> i64 {
    let shift = 64 - 8 * u32::from(bytes);
    ((value << shift) as i64) >> shift
}

fn latin1_to_utf8(bytes: &[u8], out: &mut String) {
    out.clear();
    out.extend(bytes.iter().map(|&b| char::from(b)));
}

#[inline]
fn decode_value(
    col: &Col,
    c: &mut Cursor<'_>,
    w: &mut RowWriter<'_>,
    i: usize,
    scratch: &mut Scratch,
) -> Result<(), DecodeFailure> {
    match *col {
        Col::Int { bytes, signed, out } => {
            let raw = c.le(usize::from(bytes))?;
            match out {
                IntOut::I64 => w.set_i64(
                    i,
                    if signed {
                        sign_extend(raw, bytes)
                    } else {
                        raw as i64
                    },
                ),
                IntOut::Bool => w.set_bool(i, raw != 0),
                IntOut::U64Decimal => {
                    let mut buf = itoa::Buffer::new();
                    w.set_decimal_digits(i, false, buf.format(raw).as_bytes());
                }
            }
        }
        Col::Year => {
            let y = c.u8()?;
            w.set_i64(i, if y == 0 { 0 } else { 1900 + i64::from(y) });
        }
        Col::Float => w.set_f32(i, f32::from_bits(c.le(4)? as u32)),
        Col::Double => w.set_f64(i, f64::from_bits(c.le(8)?)),
        Col::Decimal { precision, scale } => {
            let bytes = c.take(decimal_bin_size(precision, scale))?;
            let mut buf = [0u8; 96];
            let (negative, digits) = decode_decimal(bytes, precision, scale, &mut buf)?;
            w.set_decimal_digits(i, negative, digits);
        }
        Col::Bit { bytes, as_bool } => {
            let b = c.take(usize::from(bytes))?;
            if as_bool {
                w.set_bool(i, b.iter().any(|&x| x != 0));
            } else {
                w.set_bytes(i, b);
            }
        }
        Col::Date => {
            let b = c.take(3)?;
            if let Some(days) = temporal::date_days([b[0], b[1], b[2]]) {
                w.set_i64(i, days);
            }
        }
        Col::Time2 { fsp } => {
            let b = c.take(3 + temporal::frac_bytes(fsp))?;
            w.set_micros(i, temporal::time2_micros(b, fsp));
        }
        Col::DateTime2 { fsp } => {
            let b = c.take(5 + temporal::frac_bytes(fsp))?;
            if let Some(micros) = temporal::datetime2_micros(b, fsp) {
                w.set_micros(i, micros);
            }
        }
        Col::Timestamp2 { fsp } => {
            let b = c.take(4 + temporal::frac_bytes(fsp))?;
            w.set_micros(i, temporal::timestamp2_micros(b, fsp));
        }
        Col::TimestampOld => {
            let seconds = c.le(4)? as i64;
            w.set_micros(i, seconds * temporal::MICROS_PER_SECOND);
        }
        Col::Var { len_bytes, out } => {
            let len = c.le(usize::from(len_bytes))? as usize;
            let b = c.take(len)?;
            match out {
                BytesOut::Utf8 => match std::str::from_utf8(b) {
                    Ok(s) => w.set_str(i, s),
                    Err(_) => return Err(DecodeFailure::Column(i, "text is not valid UTF-8")),
                },
                BytesOut::Latin1 => {
                    latin1_to_utf8(b, &mut scratch.text);
                    w.set_str(i, &scratch.text);
                }
                BytesOut::Raw => w.set_bytes(i, b),
                BytesOut::Padded(n) => {
                    if b.len() >= n as usize {
                        w.set_bytes(i, b);
                    } else {
                        scratch.bytes.clear();
                        scratch.bytes.extend_from_slice(b);
                        scratch.bytes.resize(n as usize, 0);
                        w.set_bytes(i, &scratch.bytes);
                    }
                }
            }
        }
        Col::Enum { bytes, ref members } => {
            let index = c.le(usize::from(bytes))? as usize;
            match index {
                0 => w.set_str(i, ""),
                n => match members.get(n - 1) {
                    Some(m) => w.set_str(i, m),
                    None => return Err(DecodeFailure::Column(i, "ENUM index out of range")),
                },
            }
        }
        Col::Set { bytes, ref members } => {
            let mask = c.le(usize::from(bytes))?;
            scratch.text.clear();
            for (bit, m) in members.iter().enumerate().take(64) {
                if mask & (1 << bit) != 0 {
                    if !scratch.text.is_empty() {
                        scratch.text.push(',');
                    }
                    scratch.text.push_str(m);
                }
            }
            w.set_str(i, &scratch.text);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(bytes: &[u8], p: u8, s: u8) -> (bool, String) {
        let mut buf = [0u8; 96];
        let (neg, d) = decode_decimal(bytes, p, s, &mut buf).unwrap();
        (neg, String::from_utf8(d.to_vec()).unwrap())
    }

    #[test]
    fn binary_decimals_decode_exactly() {
        // DECIMAL(5,2) 123.45: intg 3 -> 2 bytes (123), frac 2 -> 1 byte (45).
        assert_eq!(dec(&[0x80, 0x7b, 0x2d], 5, 2), (false, "12345".into()));
        // -123.45: all bytes inverted.
        assert_eq!(dec(&[0x7f, 0x84, 0xd2], 5, 2), (true, "12345".into()));
        // DECIMAL(10,0) 1234567890: 1 digit (1 byte) + 9 digits (4 bytes).
        let mut b = vec![0x81];
        b.extend_from_slice(&234_567_890u32.to_be_bytes());
        assert_eq!(dec(&b, 10, 0), (false, "1234567890".into()));
        assert_eq!(decimal_bin_size(65, 30), 30);
    }

    #[test]
    fn corrupt_decimal_is_an_error_not_a_panic() {
        let mut buf = [0u8; 96];
        assert!(decode_decimal(&[0x80, 0xff, 0xff], 5, 2, &mut buf).is_err());
        assert!(decode_decimal(&[0x80], 5, 2, &mut buf).is_err());
    }

    fn test_table() -> TableInfo {
        use crate::schema::TableId;
        use crate::source::mysql::schema_cache::{ColumnDef, TableInfo};
        let defs: Vec<ColumnDef> = [
            ("a", "bigint"),
            ("b", "varchar(16)"),
            ("c", "timestamp(3)"),
            ("d", "decimal(30,5)"),
            ("e", "enum('x','y')"),
            ("f", "set('p','q')"),
            ("g", "time(6)"),
            ("h", "bit(9)"),
            ("i", "blob"),
        ]
        .iter()
        .map(|(n, t)| ColumnDef {
            name: n.to_string(),
            ty: MySqlType::parse(t, None).unwrap(),
            nullable: true,
        })
        .collect();
        TableInfo::build(TableId::new("d", "t"), 1, &defs, &[]).unwrap()
    }

    fn test_map() -> TableMap {
        TableMap {
            table_id: 1,
            database: "d".into(),
            table: "t".into(),
            columns: vec![
                (field::LONGLONG, 0),
                (field::VARCHAR, 16),
                (field::TIMESTAMP2, 3),
                (field::NEWDECIMAL, 30 << 8 | 5),
                (field::STRING, u16::from(field::ENUM) << 8 | 1),
                (field::STRING, u16::from(field::SET) << 8 | 1),
                (field::TIME2, 6),
                (field::BIT, 1 << 8 | 1),
                (field::BLOB, 2),
            ],
        }
    }

    #[test]
    fn random_rows_event_bodies_never_panic() {
        let info = test_table();
        let decoder = RowDecoder::new(&test_map(), &info).unwrap();
        let mut scratch = Scratch::default();
        let mut batch = EventBatch::default();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..20_000 {
            let len = (next() % 96) as usize;
            // A plausible header (table id, flags, column count 9, full
            // bitmaps) followed by random bytes, or entirely random bytes.
            let mut body: Vec<u8> = if round % 2 == 0 {
                vec![1, 0, 0, 0, 0, 0, 0, 0, 9, 0xff, 0x01]
            } else {
                Vec::new()
            };
            body.extend((0..len).map(|_| next() as u8));
            let kind = [
                rows_event::WRITE_V1,
                rows_event::UPDATE_V1,
                rows_event::DELETE_V2,
            ][round % 3];
            batch.clear();
            let slot = batch.table_slot(&decoder.schema);
            let _ = decoder.decode_event(kind, &body, &mut batch, slot, 0, &mut scratch);
            let _ = TableMap::parse(&body);
        }
    }

    #[test]
    fn mismatched_binlog_metadata_is_refused_when_preparing() {
        let info = test_table();
        let mut map = test_map();
        map.columns[3] = (field::NEWDECIMAL, 80 << 8 | 90); // impossible decimal
        assert!(RowDecoder::new(&map, &info).is_err());
        let mut map = test_map();
        map.columns[2] = (field::TIMESTAMP2, 200); // impossible fsp
        assert!(RowDecoder::new(&map, &info).is_err());
        let mut map = test_map();
        map.columns.pop();
        assert!(RowDecoder::new(&map, &info).is_err());
    }

    #[test]
    fn truncated_table_map_is_an_error_not_a_panic() {
        assert!(TableMap::parse(&[1, 0, 0, 0, 0, 0, 0, 0, 2, b'd']).is_err());
        assert!(TableMap::parse(&[]).is_err());
    }
}

//! MySQL/MariaDB column types as the server spells them (`bigint(20) unsigned`,
//! `decimal(10,2)`, `enum('a','b')`, `datetime(6)`), parsed once per column when
//! a table's schema is loaded or changed by DDL, and mapped to Fjord's
//! [`DataType`] with the Flink CDC MySQL connector's mapping.

use std::sync::Arc;

use crate::types::{DataType, DECIMAL_PRECISION_MAX, TEMPORAL_PRECISION_MAX};

/// The base type of a column, without its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base {
    TinyInt,
    SmallInt,
    MediumInt,
    Int,
    BigInt,
    Float,
    Double,
    Decimal,
    Bit,
    Year,
    Date,
    Time,
    DateTime,
    Timestamp,
    Char,
    Varchar,
    Binary,
    Varbinary,
    Text,
    Blob,
    Json,
    Enum,
    Set,
    Spatial,
}

/// How text bytes of a column are encoded, which decides whether they can be
/// stored as they are (UTF-8) or must be converted (Latin-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Charset {
    /// `utf8mb4`, `utf8mb3`, `utf8`, `ascii`: bytes are UTF-8 (checked per value).
    Utf8,
    /// `latin1`: each byte is one character U+0000..U+00FF.
    Latin1,
    /// `binary` or not a text column.
    Binary,
    /// Anything else: refused when the column is mapped.
    Other,
}

impl Charset {
    /// The charset named by information_schema / DDL (`utf8mb4`, `latin1`, ...).
    pub(crate) fn from_name(name: &str) -> Charset {
        match name.to_ascii_lowercase().as_str() {
            "utf8mb4" | "utf8mb3" | "utf8" | "ascii" => Charset::Utf8,
            "latin1" => Charset::Latin1,
            "binary" => Charset::Binary,
            _ => Charset::Other,
        }
    }
}

/// A parsed MySQL column type with the facts the decoders need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MySqlType {
    pub base: Base,
    pub unsigned: bool,
    /// Display width (integers), length (char/binary types), bits (`BIT`).
    pub length: Option<u32>,
    /// `DECIMAL` precision / scale.
    pub precision: u8,
    pub scale: u8,
    /// Fractional-second digits of `TIME`/`DATETIME`/`TIMESTAMP`.
    pub fsp: u8,
    /// Members of `ENUM` / `SET`, in declaration order (index 0 = value 1 / bit 0).
    pub members: Arc<[Box<str>]>,
    /// Text encoding (text types only; `Binary` otherwise).
    pub charset: Charset,
}

/// A column type could not be parsed or mapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TypeError(pub String);

fn parse_params(rest: &str) -> Result<(Vec<String>, &str), TypeError> {
    // `rest` starts right after the base name: optional `( ... )` then modifiers.
    let rest = rest.trim_start();
    let Some(inner) = rest.strip_prefix('(') else {
        return Ok((Vec::new(), rest));
    };
    let mut params = Vec::new();
    let mut current = String::new();
    let mut chars = inner.char_indices();
    let mut in_quote = false;
    while let Some((i, c)) = chars.next() {
        if in_quote {
            if c == '\'' {
                // '' is an escaped quote inside a quoted member.
                if inner[i + 1..].starts_with('\'') {
                    current.push('\'');
                    chars.next();
                } else {
                    in_quote = false;
                }
            } else if c == '\\' {
                if let Some((_, next)) = chars.next() {
                    current.push(next);
                }
            } else {
                current.push(c);
            }
            continue;
        }
        match c {
            '\'' => in_quote = true,
            ',' => params.push(std::mem::take(&mut current)),
            ')' => {
                params.push(current);
                return Ok((params, &inner[i + 1..]));
            }
            c if c.is_whitespace() => {}
            c => current.push(c),
        }
    }
    Err(TypeError(format!(
        "unbalanced parentheses in type {rest:?}"
    )))
}

fn number<T: std::str::FromStr>(
    params: &[String],
    i: usize,
    text: &str,
) -> Result<Option<T>, TypeError> {
    match params.get(i) {
        None => Ok(None),
        Some(p) => p
            .parse()
            .map(Some)
            .map_err(|_| TypeError(format!("bad parameter {p:?} in type {text:?}"))),
    }
}

impl MySqlType {
    /// Parses a type as `information_schema.COLUMNS.COLUMN_TYPE` or a DDL column
    /// definition spells it. `charset` is the column's character set name, if
    /// known (text types; `None` means UTF-8).
    pub(crate) fn parse(text: &str, charset: Option<&str>) -> Result<MySqlType, TypeError> {
        let trimmed = text.trim();
        let name_end = trimmed
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(trimmed.len());
        let (params, modifiers) = parse_params(&trimmed[name_end..])?;
        let modifiers = modifiers.to_ascii_lowercase();
        let unsigned = modifiers.split_whitespace().any(|w| w == "unsigned");
        MySqlType::from_parts(&trimmed[..name_end], params, unsigned, charset)
            .map_err(|e| TypeError(format!("{} in type {text:?}", e.0)))
    }

    /// Builds a type from its parts as a DDL parser finds them: base name,
    /// parameters (enum members unquoted), `UNSIGNED`, character set.
    pub(crate) fn from_parts(
        name: &str,
        params: Vec<String>,
        unsigned: bool,
        charset: Option<&str>,
    ) -> Result<MySqlType, TypeError> {
        let text = name;
        let name = name.to_ascii_lowercase();
        let base = match name.as_str() {
            "tinyint" | "int1" => Base::TinyInt,
            "bool" | "boolean" => {
                return Ok(MySqlType::simple(Base::TinyInt, false, Some(1)));
            }
            "smallint" | "int2" => Base::SmallInt,
            "mediumint" | "int3" | "middleint" => Base::MediumInt,
            "int" | "integer" | "int4" => Base::Int,
            "bigint" | "int8" => Base::BigInt,
            "serial" => {
                return Ok(MySqlType::simple(Base::BigInt, true, None));
            }
            "float" | "float4" => Base::Float,
            "double" | "real" | "float8" => Base::Double,
            "decimal" | "numeric" | "dec" | "fixed" | "number" => Base::Decimal,
            "bit" => Base::Bit,
            "year" => Base::Year,
            "date" => Base::Date,
            "time" => Base::Time,
            "datetime" => Base::DateTime,
            "timestamp" => Base::Timestamp,
            "char" | "character" | "nchar" => Base::Char,
            "varchar" | "nvarchar" | "varchar2" => Base::Varchar,
            "binary" => Base::Binary,
            "varbinary" => Base::Varbinary,
            "tinytext" | "text" | "mediumtext" | "longtext" | "long" => Base::Text,
            "tinyblob" | "blob" | "mediumblob" | "longblob" => Base::Blob,
            "json" => Base::Json,
            "enum" => Base::Enum,
            "set" => Base::Set,
            "geometry" | "point" | "linestring" | "polygon" | "multipoint" | "multilinestring"
            | "multipolygon" | "geometrycollection" => Base::Spatial,
            _ => return Err(TypeError(format!("unknown column type {text:?}"))),
        };
        let mut t = MySqlType::simple(base, unsigned, None);
        match base {
            Base::Decimal => {
                // DECIMAL defaults to DECIMAL(10, 0).
                t.precision = number(&params, 0, text)?.unwrap_or(10);
                t.scale = number(&params, 1, text)?.unwrap_or(0);
                if t.precision == 0 || t.precision > DECIMAL_PRECISION_MAX || t.scale > t.precision
                {
                    return Err(TypeError(format!("decimal out of range in type {text:?}")));
                }
            }
            Base::Time | Base::DateTime | Base::Timestamp => {
                t.fsp = number(&params, 0, text)?.unwrap_or(0);
                if t.fsp > 6 || t.fsp > TEMPORAL_PRECISION_MAX {
                    return Err(TypeError(format!(
                        "fractional digits out of range in {text:?}"
                    )));
                }
            }
            Base::Enum | Base::Set => {
                t.members = params.into_iter().map(String::into_boxed_str).collect();
            }
            Base::Float | Base::Double => {}
            _ => t.length = number(&params, 0, text)?,
        }
        if base == Base::Bit && t.length.is_none() {
            t.length = Some(1);
        }
        if base == Base::Char || base == Base::Binary {
            t.length = Some(t.length.unwrap_or(1));
        }
        if matches!(
            base,
            Base::Char | Base::Varchar | Base::Text | Base::Enum | Base::Set
        ) {
            t.charset = charset.map_or(Charset::Utf8, Charset::from_name);
        }
        if base == Base::Json {
            t.charset = Charset::Utf8;
        }
        Ok(t)
    }

    fn simple(base: Base, unsigned: bool, length: Option<u32>) -> MySqlType {
        MySqlType {
            base,
            unsigned,
            length,
            precision: 0,
            scale: 0,
            fsp: 0,
            members: Arc::from(Vec::new()),
            charset: Charset::Binary,
        }
    }

    /// The type as a DDL column type that [`MySqlType::parse`] and the DDL
    /// parser read back to an equal value (used to store schemas with positions).
    pub(crate) fn to_sql(&self) -> String {
        let with_len = |name: &str| match self.length {
            Some(n) => format!("{name}({n})"),
            None => name.to_string(),
        };
        let members = |name: &str| {
            let quoted: Vec<String> = self
                .members
                .iter()
                .map(|m| format!("'{}'", m.replace('\\', "\\\\").replace('\'', "''")))
                .collect();
            format!("{name}({})", quoted.join(","))
        };
        let mut out = match self.base {
            Base::TinyInt => with_len("tinyint"),
            Base::SmallInt => with_len("smallint"),
            Base::MediumInt => with_len("mediumint"),
            Base::Int => with_len("int"),
            Base::BigInt => with_len("bigint"),
            Base::Float => "float".into(),
            Base::Double => "double".into(),
            Base::Decimal => format!("decimal({},{})", self.precision, self.scale),
            Base::Bit => with_len("bit"),
            Base::Year => "year".into(),
            Base::Date => "date".into(),
            Base::Time => format!("time({})", self.fsp),
            Base::DateTime => format!("datetime({})", self.fsp),
            Base::Timestamp => format!("timestamp({})", self.fsp),
            Base::Char => with_len("char"),
            Base::Varchar => with_len("varchar"),
            Base::Binary => with_len("binary"),
            Base::Varbinary => with_len("varbinary"),
            Base::Text => "longtext".into(),
            Base::Blob => "longblob".into(),
            Base::Json => "json".into(),
            Base::Enum => members("enum"),
            Base::Set => members("set"),
            Base::Spatial => "geometry".into(),
        };
        if self.unsigned {
            out.push_str(" unsigned");
        }
        if matches!(
            self.base,
            Base::Char | Base::Varchar | Base::Text | Base::Enum | Base::Set
        ) {
            out.push_str(match self.charset {
                Charset::Latin1 => " CHARACTER SET latin1",
                _ => " CHARACTER SET utf8mb4",
            });
        }
        out
    }

    /// Whether this is `TINYINT(1)`/`BOOLEAN` (Flink CDC maps it to `BOOLEAN`).
    pub(crate) fn is_tinyint1(&self) -> bool {
        self.base == Base::TinyInt && self.length == Some(1)
    }

    /// The Flink CDC mapping of this type, or why the column cannot be captured.
    pub(crate) fn data_type(&self) -> Result<DataType, TypeError> {
        let length = self.length.unwrap_or(0);
        Ok(match self.base {
            Base::TinyInt if self.is_tinyint1() => DataType::Boolean,
            Base::TinyInt if self.unsigned => DataType::SmallInt,
            Base::TinyInt => DataType::TinyInt,
            Base::SmallInt if self.unsigned => DataType::Int,
            Base::SmallInt => DataType::SmallInt,
            Base::MediumInt => DataType::Int,
            Base::Int if self.unsigned => DataType::BigInt,
            Base::Int => DataType::Int,
            Base::BigInt if self.unsigned => DataType::Decimal {
                precision: 20,
                scale: 0,
            },
            Base::BigInt => DataType::BigInt,
            Base::Float => DataType::Float,
            Base::Double => DataType::Double,
            Base::Decimal => DataType::Decimal {
                precision: self.precision,
                scale: self.scale,
            },
            Base::Bit if length <= 1 => DataType::Boolean,
            Base::Bit => DataType::Binary {
                length: length.div_ceil(8),
            },
            Base::Year => DataType::Int,
            Base::Date => DataType::Date,
            Base::Time => DataType::Time {
                precision: self.fsp,
            },
            Base::DateTime => DataType::Timestamp {
                precision: self.fsp,
            },
            Base::Timestamp => DataType::TimestampLtz {
                precision: self.fsp,
            },
            Base::Char => DataType::Char { length },
            Base::Varchar => DataType::Varchar { length },
            Base::Binary => DataType::Binary { length },
            Base::Varbinary => DataType::Varbinary { length },
            Base::Text | Base::Enum | Base::Set => DataType::String,
            Base::Blob => DataType::Bytes,
            Base::Json => DataType::Json,
            Base::Spatial => {
                return Err(TypeError(
                    "spatial types (GEOMETRY, POINT, ...) are not supported; exclude the \
                     table with tables.exclude"
                        .into(),
                ))
            }
        })
        .and_then(|t| {
            if self.charset == Charset::Other {
                Err(TypeError(
                    "only utf8mb4/utf8mb3/ascii/latin1 text columns are supported".into(),
                ))
            } else {
                Ok(t)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: DataType) {
        let t = MySqlType::parse(text, None).unwrap();
        assert_eq!(t.data_type().unwrap(), expected, "{text}");
    }

    #[test]
    fn flink_cdc_mapping_of_numeric_types() {
        check("tinyint(1)", DataType::Boolean);
        check("BOOLEAN", DataType::Boolean);
        check("tinyint(4)", DataType::TinyInt);
        check("tinyint(3) unsigned", DataType::SmallInt);
        check("smallint unsigned", DataType::Int);
        check("mediumint(8) unsigned", DataType::Int);
        check("int(10) unsigned", DataType::BigInt);
        check("int", DataType::Int);
        check("bigint(20)", DataType::BigInt);
        check(
            "bigint(20) unsigned zerofill",
            DataType::Decimal {
                precision: 20,
                scale: 0,
            },
        );
        check(
            "decimal(65,30)",
            DataType::Decimal {
                precision: 65,
                scale: 30,
            },
        );
        check(
            "decimal",
            DataType::Decimal {
                precision: 10,
                scale: 0,
            },
        );
        check("double unsigned", DataType::Double);
        check("float", DataType::Float);
        check("bit(1)", DataType::Boolean);
        check("bit(10)", DataType::Binary { length: 2 });
        check("year(4)", DataType::Int);
    }

    #[test]
    fn flink_cdc_mapping_of_text_and_temporal_types() {
        check("varchar(16)", DataType::Varchar { length: 16 });
        check("char(3)", DataType::Char { length: 3 });
        check("char", DataType::Char { length: 1 });
        check("varbinary(7)", DataType::Varbinary { length: 7 });
        check("binary(2)", DataType::Binary { length: 2 });
        check("longtext", DataType::String);
        check("mediumblob", DataType::Bytes);
        check("json", DataType::Json);
        check("enum('a','b,c','it''s')", DataType::String);
        check("datetime(6)", DataType::Timestamp { precision: 6 });
        check("timestamp", DataType::TimestampLtz { precision: 0 });
        check("time(3)", DataType::Time { precision: 3 });
        check("date", DataType::Date);
    }

    #[test]
    fn enum_members_keep_commas_and_quotes() {
        let t = MySqlType::parse("enum('a','b,c','it''s')", None).unwrap();
        let members: Vec<&str> = t.members.iter().map(|m| &**m).collect();
        assert_eq!(members, ["a", "b,c", "it's"]);
    }

    #[test]
    fn types_survive_their_ddl_text() {
        for (text, charset) in [
            ("tinyint(1)", None),
            ("bigint(20) unsigned", None),
            ("serial", None),
            ("decimal(65,30) unsigned", None),
            ("datetime(6)", None),
            ("varchar(7)", Some("latin1")),
            ("char(3)", Some("utf8mb4")),
            ("enum('a','it''s','b\\\\c')", None),
            ("set('x','y')", Some("latin1")),
            ("mediumtext", None),
            ("json", None),
            ("bit(10)", None),
            ("varbinary(9)", None),
        ] {
            let t = MySqlType::parse(text, charset).unwrap();
            let sql = t.to_sql();
            let (name, rest) = sql.split_once(' ').unwrap_or((&sql, ""));
            let charset = rest.split("CHARACTER SET ").nth(1);
            let back = MySqlType::parse(
                &format!("{name} {}", rest.split(" CHARACTER").next().unwrap_or("")),
                charset,
            )
            .unwrap();
            assert_eq!(back, t, "{text} -> {sql}");
        }
    }

    #[test]
    fn unsupported_and_malformed_types_are_errors() {
        assert!(MySqlType::parse("point", None)
            .unwrap()
            .data_type()
            .is_err());
        assert!(MySqlType::parse("varchar(10", None).is_err());
        assert!(MySqlType::parse("decimal(70,2)", None).is_err());
        assert!(MySqlType::parse("frobnicate", None).is_err());
        assert!(MySqlType::parse("varchar(10)", Some("sjis"))
            .unwrap()
            .data_type()
            .is_err());
    }
}

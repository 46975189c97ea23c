//! DDL from binlog `QUERY` events applied to the [`SchemaCache`]: `CREATE
//! TABLE`, `ALTER TABLE` (add / drop / change / modify / rename column, rename
//! table), `RENAME TABLE`, `TRUNCATE`, `DROP TABLE`. Each effect on a captured
//! table becomes a [`SchemaChangeEvent`] carrying the table's new schema, so
//! the rows that follow decode with it.
//!
//! Statements that change no captured column (indexes, options, grants,
//! `BEGIN`) produce nothing. A statement that touches a captured table in a
//! way this parser cannot follow is an error naming the statement, never a
//! silent guess: decoding later rows with a wrong schema would corrupt data.

use std::sync::Arc;

use crate::event::{ColumnPosition, SchemaChange, SchemaChangeEvent};
use crate::filter::TableFilter;
use crate::schema::TableId;
use crate::source::SourceError;

use super::coltype::MySqlType;
use super::schema_cache::{ColumnDef, SchemaCache, TableInfo, FIRST_SCHEMA_VERSION};

/// Longest DDL statement parsed; longer `QUERY` events are treated as
/// non-DDL data statements (bounds the tokenizer's memory).
pub(crate) const DDL_BYTES_MAX: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    /// A bare word (keyword or unquoted identifier), as written.
    Word(String),
    /// A backquoted identifier.
    Ident(String),
    /// A quoted string literal.
    Str(String),
    /// A number or other literal chunk.
    Num(String),
    /// One punctuation character.
    Punct(char),
}

fn tokenize(sql: &str) -> Vec<Tok> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#' || (c == b'-' && b.get(i + 1) == Some(&b'-')) {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            // Executable comments `/*!NNNNN ...*/` hold SQL: keep their inside.
            if b.get(i + 2) == Some(&b'!') {
                i += 3;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                continue;
            }
            match sql[i + 2..].find("*/") {
                Some(end) => i += end + 4,
                None => i = b.len(),
            }
        } else if c == b'*' && b.get(i + 1) == Some(&b'/') {
            i += 2; // end of an executable comment
        } else if c == b'`' || c == b'\'' || c == b'"' {
            let quote = c;
            let mut text = String::new();
            i += 1;
            let mut start = i;
            while i < b.len() {
                if b[i] == quote {
                    text.push_str(&sql[start..i]);
                    if b.get(i + 1) == Some(&quote) {
                        text.push(quote as char);
                        i += 2;
                        start = i;
                        continue;
                    }
                    i += 1;
                    start = usize::MAX;
                    break;
                }
                if b[i] == b'\\' && quote != b'`' && i + 1 < b.len() {
                    text.push_str(&sql[start..i]);
                    let escaped = b[i + 1];
                    text.push(match escaped {
                        b'n' => '\n',
                        b't' => '\t',
                        b'0' => '\0',
                        other => other as char,
                    });
                    i += 2;
                    start = i;
                    continue;
                }
                i += 1;
            }
            if start != usize::MAX && start <= b.len() {
                text.push_str(&sql[start.min(b.len())..]);
            }
            out.push(if quote == b'`' {
                Tok::Ident(text)
            } else {
                Tok::Str(text)
            });
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80 {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80)
            {
                i += 1;
            }
            out.push(Tok::Word(sql[start..i].to_string()));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
            out.push(Tok::Num(sql[start..i].to_string()));
        } else {
            // Multi-byte UTF-8 outside quotes is covered by the word branch.
            out.push(Tok::Punct(c as char));
            i += 1;
        }
    }
    out
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(word))
    }

    fn eat_word(&mut self, word: &str) -> bool {
        if self.is_word(word) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn eat_words(&mut self, words: &[&str]) -> bool {
        let save = self.at;
        for w in words {
            if !self.eat_word(w) {
                self.at = save;
                return false;
            }
        }
        true
    }

    fn is_punct(&self, c: char) -> bool {
        matches!(self.peek(), Some(Tok::Punct(p)) if *p == c)
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> Option<String> {
        match self.next()? {
            Tok::Word(w) | Tok::Ident(w) => Some(w),
            _ => None,
        }
    }

    /// `name` or `db.name`.
    fn table_name(&mut self, default_db: &str) -> Option<TableId> {
        let first = self.ident()?;
        if self.eat_punct('.') {
            let second = self.ident()?;
            Some(TableId::new(&first, &second))
        } else {
            Some(TableId::new(default_db, &first))
        }
    }

    /// Skips a balanced `( ... )` group if one starts here.
    fn skip_group(&mut self) {
        if !self.is_punct('(') {
            return;
        }
        let mut depth = 0usize;
        while let Some(t) = self.next() {
            match t {
                Tok::Punct('(') => depth += 1,
                Tok::Punct(')') => {
                    depth -= 1;
                    if depth == 0 {
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    /// Skips to the next `,` or `)` at depth 0 (not consumed).
    fn skip_item(&mut self) {
        while let Some(t) = self.peek() {
            match t {
                Tok::Punct(',') | Tok::Punct(')') => return,
                Tok::Punct('(') => self.skip_group(),
                _ => self.at += 1,
            }
        }
    }

    /// A column definition: `name type [attributes]`, up to `,`/`)`/end.
    fn column_def(&mut self, name: String) -> Result<ColumnDef, String> {
        let type_name = match self.next() {
            Some(Tok::Word(w)) => w,
            other => {
                return Err(format!(
                    "expected a type for column {name}, found {other:?}"
                ))
            }
        };
        let mut type_name = type_name;
        // `DOUBLE PRECISION`, `CHARACTER VARYING`, `LONG VARCHAR`.
        if type_name.eq_ignore_ascii_case("double") {
            self.eat_word("precision");
        }
        if self.eat_word("varying") {
            type_name = "varchar".into();
        }
        let mut params = Vec::new();
        if self.eat_punct('(') {
            loop {
                match self.next() {
                    Some(Tok::Num(n)) | Some(Tok::Str(n)) | Some(Tok::Word(n)) => params.push(n),
                    Some(Tok::Punct(')')) => break,
                    Some(Tok::Punct(',')) => {}
                    other => return Err(format!("bad type parameters for {name}: {other:?}")),
                }
            }
        }
        let mut unsigned = false;
        let mut nullable = true;
        let mut charset: Option<String> = None;
        loop {
            if self.is_punct(',') || self.is_punct(')') || self.peek().is_none() {
                break;
            }
            if self.eat_word("unsigned") {
                unsigned = true;
            } else if self.eat_word("signed") || self.eat_word("zerofill") {
            } else if self.eat_words(&["not", "null"]) {
                nullable = false;
            } else if self.eat_word("null") {
                nullable = true;
            } else if self.eat_words(&["character", "set"]) || self.eat_word("charset") {
                charset = self.ident();
            } else if self.eat_words(&["primary", "key"]) {
                nullable = false;
            } else if self.is_word("first") || self.is_word("after") {
                break;
            } else if self.is_punct('(') {
                self.skip_group();
            } else {
                self.at += 1;
            }
        }
        if type_name.eq_ignore_ascii_case("serial") {
            nullable = false;
        }
        let ty = MySqlType::from_parts(&type_name, params, unsigned, charset.as_deref())
            .map_err(|e| format!("column {name}: {}", e.0))?;
        Ok(ColumnDef { name, ty, nullable })
    }

    fn position(&mut self) -> Option<ColumnPosition> {
        if self.eat_word("first") {
            Some(ColumnPosition::First)
        } else if self.eat_word("after") {
            self.ident()
                .map(|c| ColumnPosition::After(Arc::from(c.as_str())))
        } else {
            None
        }
    }

    fn column_list(&mut self) -> Vec<String> {
        let mut names = Vec::new();
        if !self.eat_punct('(') {
            return names;
        }
        while let Some(t) = self.next() {
            match t {
                Tok::Word(w) | Tok::Ident(w) => {
                    names.push(w);
                    self.skip_group(); // prefix length `(10)`
                    self.eat_word("asc");
                    self.eat_word("desc");
                }
                Tok::Punct(')') => break,
                _ => {}
            }
        }
        names
    }
}

/// What a DDL statement did, per table.
struct Effects<'c> {
    cache: &'c mut SchemaCache,
    filter: &'c TableFilter,
    events: Vec<SchemaChangeEvent>,
}

impl Effects<'_> {
    fn set(
        &mut self,
        id: &TableId,
        defs: &[ColumnDef],
        key: &[String],
        change: SchemaChange,
    ) -> Result<(), SourceError> {
        let version = self
            .cache
            .tables
            .get(id)
            .map_or(FIRST_SCHEMA_VERSION, |t| t.schema.version() + 1);
        let info = TableInfo::build(id.clone(), version, defs, key)?;
        self.events.push(SchemaChangeEvent {
            table: id.clone(),
            change,
            schema: Some(Arc::clone(&info.schema)),
        });
        self.cache.tables.insert(id.clone(), info);
        Ok(())
    }

    fn drop_table(&mut self, id: &TableId) {
        if self.cache.tables.remove(id).is_some() {
            self.events.push(SchemaChangeEvent {
                table: id.clone(),
                change: SchemaChange::DropTable,
                schema: None,
            });
        }
    }
}

fn parse_error(sql: &str, why: String) -> SourceError {
    let shown: String = sql.chars().take(200).collect();
    SourceError::Unsupported(format!(
        "cannot follow DDL on a captured table ({why}): {shown}"
    ))
}

/// Applies one `QUERY` event's statement (run in database `default_db`) to the
/// cache; returns the schema changes of captured tables, in order.
pub(crate) fn apply(
    cache: &mut SchemaCache,
    filter: &TableFilter,
    default_db: &str,
    sql: &str,
) -> Result<Vec<SchemaChangeEvent>, SourceError> {
    if sql.len() > DDL_BYTES_MAX {
        return Ok(Vec::new());
    }
    // Cheap pre-check on the first word: most QUERY events are BEGIN/COMMIT.
    let first = sql
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("");
    let interesting = ["create", "alter", "drop", "truncate", "rename"]
        .iter()
        .any(|k| first.eq_ignore_ascii_case(k));
    if !interesting {
        return Ok(Vec::new());
    }
    let mut p = Parser {
        toks: tokenize(sql),
        at: 0,
    };
    let mut fx = Effects {
        cache,
        filter,
        events: Vec::new(),
    };
    statement(&mut p, &mut fx, default_db).map_err(|why| parse_error(sql, why))?;
    Ok(fx.events)
}

fn statement(p: &mut Parser, fx: &mut Effects<'_>, db: &str) -> Result<(), String> {
    if p.eat_word("truncate") {
        p.eat_word("table");
        let id = p.table_name(db).ok_or("missing table name")?;
        if let Some(info) = fx.cache.tables.get(&id) {
            let (defs, key) = (info.column_defs(), info.key_names());
            fx.set(&id, &defs, &key, SchemaChange::TruncateTable)
                .map_err(|e| e.to_string())?;
        }
        return Ok(());
    }
    if p.eat_word("drop") {
        p.eat_word("temporary");
        if !p.eat_word("table") {
            return Ok(()); // DROP DATABASE/INDEX/VIEW/...: no captured column changes.
        }
        p.eat_words(&["if", "exists"]);
        loop {
            let id = p.table_name(db).ok_or("missing table name")?;
            fx.drop_table(&id);
            if !p.eat_punct(',') {
                break;
            }
        }
        return Ok(());
    }
    if p.eat_word("rename") {
        if !p.eat_word("table") {
            return Ok(());
        }
        loop {
            let from = p.table_name(db).ok_or("missing table name")?;
            if !p.eat_word("to") {
                return Err("expected TO".into());
            }
            let to = p.table_name(db).ok_or("missing table name")?;
            rename_table(fx, &from, &to)?;
            if !p.eat_punct(',') {
                break;
            }
        }
        return Ok(());
    }
    if p.eat_word("create") {
        p.eat_words(&["or", "replace"]);
        p.eat_word("temporary");
        if !p.eat_word("table") {
            return Ok(()); // CREATE DATABASE/INDEX/VIEW/...
        }
        p.eat_words(&["if", "not", "exists"]);
        let id = p.table_name(db).ok_or("missing table name")?;
        if !fx.filter.matches_id(&id) {
            return Ok(());
        }
        if p.eat_word("like") {
            let source = p.table_name(db).ok_or("missing table name")?;
            let Some(info) = fx.cache.tables.get(&source) else {
                return Err(format!(
                    "CREATE TABLE {id} LIKE {source}: {source} is unknown"
                ));
            };
            let (defs, key) = (info.column_defs(), info.key_names());
            return fx
                .set(&id, &defs, &key, SchemaChange::CreateTable)
                .map_err(|e| e.to_string());
        }
        if !p.eat_punct('(') {
            return Err("CREATE TABLE without a column list (CREATE ... SELECT?)".into());
        }
        let mut defs = Vec::new();
        let mut key = Vec::new();
        loop {
            if p.eat_words(&["primary", "key"]) {
                key = p.column_list();
                p.skip_item();
            } else if p.eat_word("constraint") {
                // `CONSTRAINT [name] PRIMARY KEY (...)` or another constraint.
                if !p.is_word("primary") {
                    p.next();
                }
                if p.eat_words(&["primary", "key"]) {
                    key = p.column_list();
                }
                p.skip_item();
            } else if [
                "key", "index", "unique", "fulltext", "spatial", "foreign", "check", "period",
                "system",
            ]
            .iter()
            .any(|w| p.is_word(w))
            {
                p.skip_item();
            } else {
                let name = p.ident().ok_or("expected a column name")?;
                let has_inline_key = {
                    let save = p.at;
                    let def = p.column_def(name.clone())?;
                    let inline = p.toks[save..p.at].windows(2).any(|w| {
                        matches!((&w[0], &w[1]), (Tok::Word(a), Tok::Word(b))
                            if a.eq_ignore_ascii_case("primary") && b.eq_ignore_ascii_case("key"))
                    });
                    defs.push(def);
                    inline
                };
                if has_inline_key {
                    key = vec![name];
                }
                p.skip_item();
            }
            if p.eat_punct(',') {
                continue;
            }
            if p.eat_punct(')') {
                break;
            }
            return Err("unterminated column list".into());
        }
        return fx
            .set(&id, &defs, &key, SchemaChange::CreateTable)
            .map_err(|e| e.to_string());
    }
    if p.eat_word("alter") {
        p.eat_word("online");
        p.eat_word("ignore");
        if !p.eat_word("table") {
            return Ok(());
        }
        p.eat_words(&["if", "exists"]);
        let id = p.table_name(db).ok_or("missing table name")?;
        if !fx.cache.tables.contains_key(&id) {
            return Ok(());
        }
        return alter(p, fx, db, id);
    }
    Ok(())
}

fn rename_table(fx: &mut Effects<'_>, from: &TableId, to: &TableId) -> Result<(), String> {
    let moved = fx
        .cache
        .tables
        .get(from)
        .map(|i| (i.column_defs(), i.key_names()));
    fx.drop_table(from);
    if let Some((defs, key)) = moved {
        if fx.filter.matches_id(to) {
            fx.set(to, &defs, &key, SchemaChange::CreateTable)
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn insert_at(
    defs: &mut Vec<ColumnDef>,
    def: ColumnDef,
    position: &ColumnPosition,
) -> Result<(), String> {
    match position {
        ColumnPosition::Last => defs.push(def),
        ColumnPosition::First => defs.insert(0, def),
        ColumnPosition::After(name) => {
            let at = defs
                .iter()
                .position(|d| d.name == **name)
                .ok_or_else(|| format!("AFTER names unknown column {name}"))?;
            defs.insert(at + 1, def);
        }
    }
    Ok(())
}

fn alter(p: &mut Parser, fx: &mut Effects<'_>, db: &str, id: TableId) -> Result<(), String> {
    let mut id = id;
    loop {
        let info = fx.cache.tables.get(&id).ok_or("table vanished")?;
        let mut defs = info.column_defs();
        let mut key = info.key_names();
        let index_of = |defs: &[ColumnDef], name: &str| {
            defs.iter().position(|d| d.name.eq_ignore_ascii_case(name))
        };
        if p.eat_word("add") {
            let explicit = p.eat_word("column");
            let is_index = !explicit
                && ["primary", "key", "index", "unique", "constraint", "fulltext", "spatial", "foreign", "check", "partition"]
                    .iter()
                    .any(|w| p.is_word(w));
            if is_index {
                // Index and key changes leave the columns as they are. (A new
                // primary key is not followed: rows still decode correctly.)
                p.skip_item();
            } else {
                p.eat_words(&["if", "not", "exists"]);
                let group = p.eat_punct('(');
                loop {
                    let name = p.ident().ok_or("expected a column name")?;
                    let def = p.column_def(name)?;
                    let position = p.position().unwrap_or(ColumnPosition::Last);
                    let column = {
                        let probe = TableInfo::build(id.clone(), 0, std::slice::from_ref(&def), &[])
                            .map_err(|e| e.to_string())?;
                        probe.schema.columns()[0].clone()
                    };
                    insert_at(&mut defs, def, &position)?;
                    fx.set(&id, &defs, &key, SchemaChange::AddColumn { column, position })
                        .map_err(|e| e.to_string())?;
                    if group && p.eat_punct(',') {
                        continue;
                    }
                    break;
                }
                if group {
                    p.eat_punct(')');
                }
                p.skip_item();
            }
        } else if p.eat_word("drop") {
            let explicit = p.eat_word("column");
            if !explicit
                && ["primary", "key", "index", "foreign", "constraint", "check", "partition"]
                    .iter()
                    .any(|w| p.is_word(w))
            {
                p.skip_item();
            } else {
                let if_exists = p.eat_words(&["if", "exists"]);
                let name = p.ident().ok_or("expected a column name")?;
                match index_of(&defs, &name) {
                    Some(i) => {
                        let removed = defs.remove(i);
                        key.retain(|k| !k.eq_ignore_ascii_case(&removed.name));
                        fx.set(&id, &defs, &key, SchemaChange::DropColumn {
                            name: Arc::from(removed.name.as_str()),
                        })
                        .map_err(|e| e.to_string())?;
                    }
                    None if if_exists => {}
                    None => return Err(format!("DROP COLUMN names unknown column {name}")),
                }
                p.skip_item();
            }
        } else if p.eat_word("change") {
            p.eat_word("column");
            p.eat_words(&["if", "exists"]);
            let old = p.ident().ok_or("expected a column name")?;
            let new = p.ident().ok_or("expected a column name")?;
            let def = p.column_def(new.clone())?;
            let position = p.position();
            change_column(fx, &id, &mut defs, &mut key, &old, def, position)?;
            p.skip_item();
        } else if p.eat_word("modify") {
            p.eat_word("column");
            p.eat_words(&["if", "exists"]);
            let name = p.ident().ok_or("expected a column name")?;
            let def = p.column_def(name.clone())?;
            let position = p.position();
            change_column(fx, &id, &mut defs, &mut key, &name, def, position)?;
            p.skip_item();
        } else if p.eat_words(&["rename", "column"]) {
            let old = p.ident().ok_or("expected a column name")?;
            if !p.eat_word("to") {
                return Err("expected TO".into());
            }
            let new = p.ident().ok_or("expected a column name")?;
            let i = index_of(&defs, &old).ok_or_else(|| format!("unknown column {old}"))?;
            for k in key.iter_mut().filter(|k| k.eq_ignore_ascii_case(&old)) {
                *k = new.clone();
            }
            let from = Arc::from(defs[i].name.as_str());
            defs[i].name = new.clone();
            fx.set(&id, &defs, &key, SchemaChange::RenameColumn {
                from,
                to: Arc::from(new.as_str()),
            })
            .map_err(|e| e.to_string())?;
            p.skip_item();
        } else if p.is_word("rename") && !p.toks.get(p.at + 1).is_some_and(|t| matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case("index") || w.eq_ignore_ascii_case("key"))) {
            p.eat_word("rename");
            if !p.eat_word("to") {
                p.eat_word("as");
            }
            let to = p.table_name(db).ok_or("missing table name")?;
            rename_table(fx, &id, &to)?;
            if !fx.cache.tables.contains_key(&to) {
                // Renamed out of the captured set: later clauses are irrelevant.
                return Ok(());
            }
            id = to;
            p.skip_item();
        } else {
            // Options, ALTER COLUMN defaults, index renames, engine, ...
            p.skip_item();
        }
        if !p.eat_punct(',') {
            return Ok(());
        }
    }
}

fn change_column(
    fx: &mut Effects<'_>,
    id: &TableId,
    defs: &mut Vec<ColumnDef>,
    key: &mut [String],
    old: &str,
    def: ColumnDef,
    position: Option<ColumnPosition>,
) -> Result<(), String> {
    let i = defs
        .iter()
        .position(|d| d.name.eq_ignore_ascii_case(old))
        .ok_or_else(|| format!("unknown column {old}"))?;
    let old_def = defs[i].clone();
    let renamed = old_def.name != def.name;
    let new_type = def.ty.data_type().map_err(|e| e.0)?;
    let type_changed = old_def.ty != def.ty || old_def.nullable != def.nullable;
    let new_name = def.name.clone();
    for k in key.iter_mut().filter(|k| k.eq_ignore_ascii_case(old)) {
        *k = new_name.clone();
    }
    if renamed {
        // First the rename alone, so its event carries the intermediate schema.
        defs[i].name = new_name.clone();
        fx.set(
            id,
            defs,
            key,
            SchemaChange::RenameColumn {
                from: Arc::from(old_def.name.as_str()),
                to: Arc::from(new_name.as_str()),
            },
        )
        .map_err(|e| e.to_string())?;
    }
    defs.remove(i);
    match &position {
        None => defs.insert(i, def),
        Some(position) => insert_at(defs, def, position)?,
    }
    if type_changed || position.is_some() {
        fx.set(
            id,
            defs,
            key,
            SchemaChange::AlterColumnType {
                name: Arc::from(new_name.as_str()),
                data_type: new_type,
            },
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DataType;

    fn cache_with(sql: &str) -> SchemaCache {
        let mut cache = SchemaCache::default();
        apply(&mut cache, &TableFilter::all(), "db", sql).unwrap();
        cache
    }

    fn columns(cache: &SchemaCache, table: &str) -> Vec<(String, DataType)> {
        cache.tables[&TableId::new("db", table)]
            .schema
            .columns()
            .iter()
            .map(|c| (c.name.to_string(), c.data_type))
            .collect()
    }

    #[test]
    fn create_table_reads_columns_types_and_key() {
        let cache = cache_with(
            "CREATE TABLE IF NOT EXISTS `t` (\n id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,\n \
             name varchar(20) CHARACTER SET utf8mb4 DEFAULT 'a,b' COMMENT 'x(y', \n \
             e enum('p','q') , amount DECIMAL(10,2), KEY k (name(3)), PRIMARY KEY (`id`)\n) \
             ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        );
        assert_eq!(
            columns(&cache, "t"),
            vec![
                (
                    "id".into(),
                    DataType::Decimal {
                        precision: 20,
                        scale: 0
                    }
                ),
                ("name".into(), DataType::Varchar { length: 20 }),
                ("e".into(), DataType::String),
                (
                    "amount".into(),
                    DataType::Decimal {
                        precision: 10,
                        scale: 2
                    }
                ),
            ]
        );
        let schema = &cache.tables[&TableId::new("db", "t")].schema;
        assert_eq!(schema.primary_key(), &[0]);
        assert!(!schema.columns()[0].nullable);
    }

    #[test]
    fn alter_table_changes_follow_in_order() {
        let mut cache = cache_with("CREATE TABLE t (id INT PRIMARY KEY, a INT, b TEXT)");
        let events = apply(
            &mut cache,
            &TableFilter::all(),
            "db",
            "ALTER TABLE db.t ADD COLUMN c DATETIME(3) AFTER id, DROP COLUMN a, \
             CHANGE b bb VARCHAR(5), MODIFY c DATETIME(6), RENAME COLUMN bb TO b2, ADD INDEX i (c)",
        )
        .unwrap();
        let kinds: Vec<&str> = events.iter().map(|e| e.change.kind_str()).collect();
        assert_eq!(
            kinds,
            [
                "add_column",
                "drop_column",
                "rename_column",
                "alter_column_type",
                "alter_column_type",
                "rename_column"
            ]
        );
        assert_eq!(
            columns(&cache, "t"),
            vec![
                ("id".into(), DataType::Int),
                ("c".into(), DataType::Timestamp { precision: 6 }),
                ("b2".into(), DataType::Varchar { length: 5 }),
            ]
        );
        assert_eq!(events.last().unwrap().schema.as_ref().unwrap().version(), 7);
    }

    #[test]
    fn truncate_drop_and_rename_tables() {
        let mut cache = cache_with("CREATE TABLE t (id INT)");
        let filter = TableFilter::all();
        let e = apply(&mut cache, &filter, "db", "TRUNCATE TABLE t").unwrap();
        assert_eq!(e[0].change, SchemaChange::TruncateTable);
        let e = apply(&mut cache, &filter, "db", "RENAME TABLE t TO u").unwrap();
        assert_eq!(e.len(), 2);
        assert!(cache.tables.contains_key(&TableId::new("db", "u")));
        let e = apply(
            &mut cache,
            &filter,
            "db",
            "DROP TABLE IF EXISTS `u` /* generated by server */",
        )
        .unwrap();
        assert_eq!(e[0].change, SchemaChange::DropTable);
        assert!(cache.tables.is_empty());
    }

    #[test]
    fn unrelated_statements_change_nothing() {
        let mut cache = cache_with("CREATE TABLE t (id INT)");
        for sql in [
            "BEGIN",
            "COMMIT",
            "CREATE DATABASE x",
            "ALTER TABLE other ADD c INT",
            "GRANT ALL ON *.* TO x",
            "ALTER TABLE t ENGINE=InnoDB",
        ] {
            assert!(
                apply(&mut cache, &TableFilter::all(), "db", sql)
                    .unwrap()
                    .is_empty(),
                "{sql}"
            );
        }
    }

    #[test]
    fn ddl_that_cannot_be_followed_is_an_error() {
        let mut cache = cache_with("CREATE TABLE t (id INT)");
        assert!(apply(
            &mut cache,
            &TableFilter::all(),
            "db",
            "ALTER TABLE t DROP COLUMN nope"
        )
        .is_err());
        assert!(apply(
            &mut cache,
            &TableFilter::all(),
            "db",
            "CREATE TABLE s AS SELECT * FROM t"
        )
        .is_err());
    }
}

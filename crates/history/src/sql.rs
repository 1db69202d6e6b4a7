//! The few operations the store needs from a database, over both
//! backends: statements in one common SQL (`$1`, `$2` ... placeholders,
//! `BIGINT` and `TEXT` columns), values as [`Value`], and [`Tx`], one
//! transaction whose driver messages name the store and are scrubbed of a
//! password. Everything above this module (the schema, the writes, the
//! reads) is written once.

use crate::error::{Error, Result};
use crate::location::Location;

/// Which SQL a backend speaks, where the common SQL is not enough (the
/// auto-incremented key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite through rusqlite.
    Sqlite,
    /// PostgreSQL through the `postgres` client.
    Postgres,
}

/// A value bound to or read from a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A `BIGINT`.
    Int(i64),
    /// A `TEXT`.
    Text(String),
}

impl Value {
    /// The integer, when it is one.
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The text, when it is some.
    pub fn text(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }

    /// An optional integer.
    pub fn opt_int(v: Option<i64>) -> Value {
        v.map_or(Value::Null, Value::Int)
    }

    /// An optional text.
    pub fn opt_text(v: Option<&str>) -> Value {
        v.map_or(Value::Null, |t| Value::Text(t.to_owned()))
    }
}

/// A driver's message, before the store names itself and scrubs it.
pub type DriverResult<T> = std::result::Result<T, String>;

/// One open transaction of either backend.
pub trait Sql {
    /// Its dialect.
    fn dialect(&self) -> Dialect;
    /// Runs statements separated by `;`, with no parameters.
    fn batch(&mut self, sql: &str) -> DriverResult<()>;
    /// Runs one statement; the rows it changed.
    fn execute(&mut self, sql: &str, params: &[Value]) -> DriverResult<u64>;
    /// Runs one query; its rows.
    fn query(&mut self, sql: &str, params: &[Value]) -> DriverResult<Vec<Vec<Value>>>;
}

/// The common SQL's `$N` placeholders as SQLite's numbered `?N`.
fn sqlite_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
        })
    }
}

impl Sql for rusqlite::Transaction<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn batch(&mut self, sql: &str) -> DriverResult<()> {
        self.execute_batch(sql).map_err(|e| e.to_string())
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> DriverResult<u64> {
        let sql = sqlite_placeholders(sql);
        rusqlite::Connection::execute(self, &sql, rusqlite::params_from_iter(params))
            .map(|n| n as u64)
            .map_err(|e| e.to_string())
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> DriverResult<Vec<Vec<Value>>> {
        use rusqlite::types::ValueRef;
        let sql = sqlite_placeholders(sql);
        let mut stmt = self.prepare(&sql).map_err(|e| e.to_string())?;
        let n = stmt.column_count();
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params))
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| e.to_string())? {
            let mut values = Vec::with_capacity(n);
            for i in 0..n {
                values.push(match row.get_ref(i).map_err(|e| e.to_string())? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(i) => Value::Int(i),
                    ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                    other => return Err(format!("unexpected column type {:?}", other.data_type())),
                });
            }
            out.push(values);
        }
        Ok(out)
    }
}

/// The parameters as the `postgres` client takes them, a NULL typed as
/// the statement's parameter is (the server infers each from its column).
fn pg_params(
    params: &[Value],
    types: &[postgres::types::Type],
) -> Vec<Box<dyn postgres::types::ToSql + Sync>> {
    params
        .iter()
        .zip(types)
        .map(|(v, t)| -> Box<dyn postgres::types::ToSql + Sync> {
            match v {
                Value::Null if *t == postgres::types::Type::TEXT => Box::new(None::<String>),
                Value::Null => Box::new(None::<i64>),
                Value::Int(i) => Box::new(*i),
                Value::Text(t) => Box::new(t.clone()),
            }
        })
        .collect()
}

/// A client error with its causes, or the server's own message.
fn pg_error(e: postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// Runs `f` with `sql` prepared and its parameters bound.
fn pg_bound<T>(
    tx: &mut postgres::Transaction<'_>,
    sql: &str,
    params: &[Value],
    f: impl FnOnce(
        &mut postgres::Transaction<'_>,
        &postgres::Statement,
        &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<T, postgres::Error>,
) -> DriverResult<T> {
    let stmt = tx.prepare(sql).map_err(pg_error)?;
    let boxed = pg_params(params, stmt.params());
    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
        boxed.iter().map(|b| b.as_ref()).collect();
    f(tx, &stmt, &refs).map_err(pg_error)
}

impl Sql for postgres::Transaction<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn batch(&mut self, sql: &str) -> DriverResult<()> {
        self.batch_execute(sql).map_err(pg_error)
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> DriverResult<u64> {
        pg_bound(self, sql, params, |tx, stmt, p| tx.execute(stmt, p))
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> DriverResult<Vec<Vec<Value>>> {
        use postgres::types::Type;
        let rows = pg_bound(self, sql, params, |tx, stmt, p| tx.query(stmt, p))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let mut values = Vec::with_capacity(row.len());
            for (i, col) in row.columns().iter().enumerate() {
                let v = match *col.type_() {
                    Type::INT8 => Value::opt_int(row.try_get(i).map_err(pg_error)?),
                    Type::INT4 => Value::opt_int(
                        row.try_get::<_, Option<i32>>(i)
                            .map_err(pg_error)?
                            .map(i64::from),
                    ),
                    Type::TEXT | Type::VARCHAR => {
                        Value::opt_text(row.try_get::<_, Option<&str>>(i).map_err(pg_error)?)
                    }
                    ref t => return Err(format!("unexpected column type {t}")),
                };
                values.push(v);
            }
            out.push(values);
        }
        Ok(out)
    }
}

/// One transaction of the store, its driver's messages named and
/// scrubbed of any password.
pub(crate) struct Tx<'a> {
    pub(crate) sql: &'a mut dyn Sql,
    pub(crate) location: &'a Location,
    pub(crate) action: &'static str,
}

impl Tx<'_> {
    fn fail(&self, message: String) -> Error {
        fail(self.location, self.action, message)
    }

    /// The store's place.
    pub(crate) fn location(&self) -> &Location {
        self.location
    }

    /// The backend's dialect.
    pub(crate) fn dialect(&self) -> Dialect {
        self.sql.dialect()
    }

    /// Statements without parameters.
    pub(crate) fn batch(&mut self, sql: &str) -> Result<()> {
        self.sql.batch(sql).map_err(|m| self.fail(m))
    }

    /// One statement; the rows it changed.
    pub(crate) fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        self.sql.execute(sql, params).map_err(|m| self.fail(m))
    }

    /// One query; its rows.
    pub(crate) fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        self.sql.query(sql, params).map_err(|m| self.fail(m))
    }
}

/// A database error at `location`, its message scrubbed of the password.
pub(crate) fn fail(location: &Location, action: &'static str, message: String) -> Error {
    let message = match location {
        Location::Postgres(url) => url.scrub(&message),
        Location::Sqlite(_) => message,
    };
    Error::Database {
        location: location.to_string(),
        action,
        message,
    }
}

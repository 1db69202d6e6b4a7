//! Where a history lives: a SQLite file, or a PostgreSQL server named by
//! a `postgres://` URL whose password never leaves this module in clear
//! (every `Display`, `Debug` and error shows `postgres://user:***@...`).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The history's place, from the config's `history = "..."` or the
/// `--history` flag.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file (made, with its folder, on first use).
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(PgUrl),
}

impl Location {
    /// Reads a setting: a `postgres://` or `postgresql://` URL, else a
    /// file path, relative to `base` when not absolute.
    pub fn parse(text: &str, base: &Path) -> Location {
        match PgUrl::parse(text) {
            Some(url) => Location::Postgres(url),
            None => Location::Sqlite(base.join(text)),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(p) => write!(f, "{}", p.display()),
            Location::Postgres(u) => write!(f, "{u}"),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            Location::Postgres(u) => f.debug_tuple("Postgres").field(u).finish(),
        }
    }
}

/// A `postgres://` URL. Its password (when it has one) is shown as `***`
/// by `Display` and `Debug`; only the store reads it, to connect.
#[derive(Clone, PartialEq, Eq)]
pub struct PgUrl {
    url: String,
}

impl PgUrl {
    /// `text` when it is a `postgres://` or `postgresql://` URL.
    pub fn parse(text: &str) -> Option<PgUrl> {
        let t = text.trim();
        (t.starts_with("postgres://") || t.starts_with("postgresql://"))
            .then(|| PgUrl { url: t.to_owned() })
    }

    /// The password written in the URL, as written (percent-encoded).
    fn password(&self) -> Option<&str> {
        let (start, end) = self.password_span()?;
        Some(&self.url[start..end])
    }

    /// The byte range of the password in the URL: after the first `:` of
    /// the user info, which ends at the authority's last `@`.
    fn password_span(&self) -> Option<(usize, usize)> {
        let after_scheme = self.url.find("://")? + 3;
        let rest = &self.url[after_scheme..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let at = rest[..authority_end].rfind('@')?;
        let colon = rest[..at].find(':')?;
        Some((after_scheme + colon + 1, after_scheme + at))
    }

    /// The URL with its password shown as `***`.
    pub fn redacted(&self) -> String {
        match self.password_span() {
            Some((s, e)) => format!("{}***{}", &self.url[..s], &self.url[e..]),
            None => self.url.clone(),
        }
    }

    /// `text` with every occurrence of the password (as written and
    /// percent-decoded) replaced by `***`: for a driver's message, which
    /// may quote what it was given.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.replace(&self.url, &self.redacted());
        if let Some(p) = self.password().filter(|p| !p.is_empty()) {
            out = out.replace(p, "***");
            let decoded = percent_decode(p);
            if !decoded.is_empty() {
                out = out.replace(&decoded, "***");
            }
        }
        out
    }

    /// The driver's configuration: the URL, and when it names no password
    /// the one libpq would use ([`PasswordSources`]).
    pub(crate) fn config(&self, sources: &PasswordSources) -> Result<postgres::Config> {
        let mut config: postgres::Config =
            self.url
                .parse()
                .map_err(|e: postgres::Error| Error::BadUrl {
                    url: self.redacted(),
                    message: self.scrub(&e.to_string()),
                })?;
        if config.get_password().is_none()
            && let Some(p) = sources.password_for(&config)
        {
            config.password(p);
        }
        Ok(config)
    }
}

/// Where a password that the URL does not hold comes from, as libpq
/// looks: `PGPASSWORD`, else the password file (`PGPASSFILE`, else
/// `~/.pgpass`).
#[derive(Clone, Default)]
pub(crate) struct PasswordSources {
    /// `PGPASSWORD`.
    pub pgpassword: Option<String>,
    /// The password file.
    pub passfile: Option<PathBuf>,
}

impl PasswordSources {
    /// The sources of this process's environment.
    pub(crate) fn from_env() -> PasswordSources {
        PasswordSources {
            pgpassword: std::env::var_os("PGPASSWORD").map(|p| p.to_string_lossy().into_owned()),
            passfile: std::env::var_os("PGPASSFILE")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pgpass"))),
        }
    }

    /// `PGPASSWORD`, else the first line of the password file that
    /// matches the configuration's host, port, database and user.
    fn password_for(&self, config: &postgres::Config) -> Option<String> {
        if let Some(p) = &self.pgpassword {
            return Some(p.clone());
        }
        let text = std::fs::read_to_string(self.passfile.as_ref()?).ok()?;
        let host = match config.get_hosts().first() {
            Some(postgres::config::Host::Tcp(h)) => h.clone(),
            _ => "localhost".to_owned(),
        };
        let port = config
            .get_ports()
            .first()
            .copied()
            .unwrap_or(5432)
            .to_string();
        let user = config.get_user().unwrap_or_default().to_owned();
        let db = config.get_dbname().unwrap_or(&user).to_owned();
        pgpass_lookup(&text, [&host, &port, &db, &user])
    }
}

impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgUrl({:?})", self.redacted())
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The password of the first line of a `.pgpass` text whose four fields
/// match `wanted` (host, port, database, user); `\:` and `\\` escaped.
fn pgpass_lookup(text: &str, wanted: [&str; 4]) -> Option<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .find_map(|line| {
            let fields = split_pgpass(line);
            if fields.len() != 5 {
                return None;
            }
            let hit = fields[..4]
                .iter()
                .zip(wanted)
                .all(|(f, w)| f == "*" || f == w);
            hit.then(|| fields[4].clone())
        })
}

fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    fields.last_mut().expect("one field").push(n);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("one field").push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_redacted_everywhere_it_is_shown() {
        let u =
            PgUrl::parse("postgres://ci:s3cr%40t@db.internal:5433/hist?sslmode=disable").unwrap();
        assert_eq!(
            u.redacted(),
            "postgres://ci:***@db.internal:5433/hist?sslmode=disable"
        );
        assert_eq!(u.to_string(), u.redacted());
        let loc = Location::Postgres(u.clone());
        for shown in [format!("{loc}"), format!("{loc:?}"), format!("{u:?}")] {
            assert!(!shown.contains("s3cr"), "{shown}");
        }
        assert_eq!(
            u.scrub("bad password s3cr@t for s3cr%40t"),
            "bad password *** for ***"
        );
        // No password, nothing to hide; a path is a SQLite file.
        let plain = PgUrl::parse("postgresql://ci@localhost/hist").unwrap();
        assert_eq!(plain.redacted(), "postgresql://ci@localhost/hist");
        assert_eq!(
            Location::parse("h.db", Path::new("/p")),
            Location::Sqlite(PathBuf::from("/p/h.db"))
        );
    }

    #[test]
    fn the_password_file_is_read_as_libpq_reads_it() {
        let text = "# comment\nother:5432:*:ci:nope\nlocalhost:*:hist:ci:pa\\:ss\n*:*:*:*:any\n";
        assert_eq!(
            pgpass_lookup(text, ["localhost", "5433", "hist", "ci"]).as_deref(),
            Some("pa:ss")
        );
        assert_eq!(
            pgpass_lookup(text, ["elsewhere", "1", "x", "y"]).as_deref(),
            Some("any")
        );
        assert_eq!(pgpass_lookup("a:b:c\n", ["a", "b", "c", "d"]), None);
    }
}

//! The history's one error type. Every message names the store by its
//! redacted location and says what to do; no message carries a password.

use std::path::PathBuf;

/// What went wrong with a history store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store was written by a newer coldstart, whose schema this one
    /// does not know: it is left as it is.
    #[error(
        "the history at {location} has schema version {found}, newer than this coldstart's \
         {known}: it was written by a newer coldstart, and is left untouched; run that \
         version (or newer), or point `history` (or --history) at another store"
    )]
    NewerSchema {
        /// The store, redacted.
        location: String,
        /// Its schema version.
        found: i64,
        /// The newest this build knows.
        known: i64,
    },
    /// The history file's folder could not be made.
    #[error("could not create {}: {source}; make the folder writable or set `history` to another path", path.display())]
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A `postgres://` URL the driver cannot read.
    #[error("the history URL {url} is not a valid PostgreSQL URL: {message}")]
    BadUrl {
        /// The URL, redacted.
        url: String,
        /// The driver's reason, with the password scrubbed.
        message: String,
    },
    /// The database refused or failed an operation.
    #[error(
        "the history at {location} could not {action}: {message}\n\
         check that the store is reachable and writable (for PostgreSQL: the server, the \
         user's password in the URL, PGPASSWORD or ~/.pgpass, and its rights on the database)"
    )]
    Database {
        /// The store, redacted.
        location: String,
        /// What was being done (`open`, `store a run`, ...).
        action: &'static str,
        /// The driver's message, with the password scrubbed.
        message: String,
    },
    /// A stored row does not read back as what it should be.
    #[error("the history at {location} holds a row coldstart cannot read ({what}): {message}")]
    Corrupt {
        /// The store, redacted.
        location: String,
        /// Which row.
        what: String,
        /// Why.
        message: String,
    },
}

/// The history's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

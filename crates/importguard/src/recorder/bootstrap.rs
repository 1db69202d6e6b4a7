//! The prelude every coldstart bootstrap shares, and the private folder a
//! bootstrap is written to.
//!
//! A bootstrap is a `sitecustomize.py` put first on a worker's
//! `PYTHONPATH`: [`PRELUDE`] followed by a body. The prelude gives the body
//! a JSON-lines writer that survives fork and never writes into a
//! descriptor that is no longer its own (`_CsRecords`), JSON without the
//! `json` module (`_cs_dumps`), the chain to the `sitecustomize` the
//! environment already had (`_cs_chain`), and the record format version
//! (`_CS_FORMAT`, [`FORMAT_VERSION`]) that every start record carries and
//! every reader checks with [`check_format`]. The import recorder's body is
//! [`super::BODY`]; the memory view's lives with the harness and uses
//! [`Bootstrap::prepare`] the same way.
//!
//! This module starts no process and reads no records.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::RecorderError;

/// The shared Python prelude (its own file: `prelude.py`).
pub const PRELUDE: &str = include_str!("prelude.py");

/// The record format version the prelude writes (`_CS_FORMAT`) in every
/// start record: 2 adds process lineage, spawns, channels and lazy loading
/// to version 1.
pub const FORMAT_VERSION: u32 = 2;

/// The oldest format version the readers still understand.
pub const OLDEST_FORMAT_VERSION: u32 = 1;

/// Whether a start record's format `version` can be read by this build.
pub fn check_format(version: u32) -> Result<(), FormatMismatch> {
    if (OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        Ok(())
    } else {
        Err(FormatMismatch { found: version })
    }
}

/// A record file written by a bootstrap of another format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the records are in format version {found}, this build reads versions {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}; \
     the bootstrap that wrote them comes from another coldstart build: rerun with one build"
)]
pub struct FormatMismatch {
    /// The version in the start record (0: none).
    pub found: u32,
}

/// A bootstrap written to a private (0700) temporary folder as
/// `site/sitecustomize.py`; the folder goes away when this value drops.
#[derive(Debug)]
pub struct Bootstrap {
    dir: tempfile::TempDir,
    site: PathBuf,
}

impl Bootstrap {
    /// Writes [`PRELUDE`] then `body` as `sitecustomize.py` in a fresh
    /// private folder whose name starts with `prefix`.
    pub fn prepare(prefix: &str, body: &str) -> Result<Bootstrap, RecorderError> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(|source| RecorderError::Write {
                path: std::env::temp_dir(),
                source,
            })?;
        set_private(dir.path())?;
        let site = dir.path().join("site");
        std::fs::create_dir(&site).map_err(|source| RecorderError::Write {
            path: site.clone(),
            source,
        })?;
        set_private(&site)?;
        let file = site.join("sitecustomize.py");
        let mut text = String::with_capacity(PRELUDE.len() + body.len() + 1);
        text.push_str(PRELUDE);
        if !PRELUDE.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(body);
        std::fs::write(&file, text).map_err(|source| RecorderError::Write {
            path: file.clone(),
            source,
        })?;
        Ok(Bootstrap { dir, site })
    }

    /// The private folder (the bootstrap's `site/` and whatever the caller
    /// puts beside it, such as record files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The folder that holds `sitecustomize.py`, to put first on
    /// `PYTHONPATH`.
    pub fn site(&self) -> &Path {
        &self.site
    }

    /// `PYTHONPATH` for the worker: [`Bootstrap::site`] first, then
    /// `inherited` (the target's, else the caller's) when it is not empty.
    pub fn pythonpath(&self, inherited: Option<&OsStr>) -> OsString {
        let mut path = OsString::from(self.site.as_os_str());
        if let Some(rest) = inherited.filter(|p| !p.is_empty()) {
            path.push(":");
            path.push(rest);
        }
        path
    }
}

fn set_private(path: &Path) -> Result<(), RecorderError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(|source| {
        RecorderError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prelude_writes_the_version_the_readers_check() {
        assert!(
            PRELUDE.contains(&format!("\n_CS_FORMAT = {FORMAT_VERSION}\n")),
            "prelude.py and FORMAT_VERSION disagree"
        );
        assert!(check_format(FORMAT_VERSION).is_ok());
        assert!(check_format(1).is_ok());
        let err = check_format(FORMAT_VERSION + 1).unwrap_err();
        assert_eq!(err.found, FORMAT_VERSION + 1);
        assert!(err.to_string().contains("another coldstart build"), "{err}");
        assert!(check_format(0).is_err(), "a start record without a version");
    }

    #[test]
    fn a_bootstrap_is_the_prelude_then_the_body_in_a_private_folder() {
        use std::os::unix::fs::PermissionsExt;
        let b = Bootstrap::prepare("coldstart-test-", "BODY = 1\n").unwrap();
        let text = std::fs::read_to_string(b.site().join("sitecustomize.py")).unwrap();
        assert!(text.starts_with(PRELUDE) && text.ends_with("BODY = 1\n"));
        for p in [b.dir(), b.site()] {
            let mode = std::fs::metadata(p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", p.display());
        }
        let pp = b.pythonpath(Some(OsStr::new("/x")));
        assert_eq!(pp, OsString::from(format!("{}:/x", b.site().display())));
        assert_eq!(b.pythonpath(Some(OsStr::new(""))), b.site().as_os_str());
        let dir = b.dir().to_path_buf();
        drop(b);
        assert!(!dir.exists());
    }
}

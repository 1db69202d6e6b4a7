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

/// The `sitecustomize.py` every bootstrap is run through: it runs
/// `../bootstrap.py` (the prelude and a body), compiled once per Python
/// version and cached beside it as `bootstrap.py.TAG.bin`.
pub const STUB: &str = include_str!("stub.py");

/// The record format version the prelude writes (`_CS_FORMAT`) in every
/// start record: 2 adds process lineage, spawns, channels and lazy loading
/// to version 1; 3 lets an image write a short start record at once and
/// the whole one later (the same pid, generation and time: the reader
/// keeps the whole one, see [`super::Start::completes`]).
pub const FORMAT_VERSION: u32 = 3;

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

/// A fresh temporary folder named `prefix`... in the system's temporary
/// folder.
pub(crate) fn temp_dir(prefix: &str) -> Result<tempfile::TempDir, RecorderError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|source| RecorderError::Write {
            path: std::env::temp_dir(),
            source,
        })
}

/// A bootstrap put first on a worker's `PYTHONPATH`: a folder holding
/// `bootstrap.py` (the prelude and a body) and `site/sitecustomize.py`
/// ([`STUB`]), and a private (0700) temporary folder for the worker's
/// records that goes away when this value drops.
///
/// The bootstrap's folder is shared by every worker that runs the same
/// bootstrap: `$TMPDIR/coldstart-bootstrap-UID/HASH/`, private to the user
/// (0700, checked: a folder someone else owns or others can write is never
/// used), written once and never rewritten, so the compiled code the stub
/// caches there stays valid and a worker does not compile the bootstrap at
/// every start (about 6 ms, most of the recorder's cost). Where that folder
/// cannot be used, the bootstrap goes into the private folder.
#[derive(Debug)]
pub struct Bootstrap {
    dir: tempfile::TempDir,
    site: PathBuf,
}

impl Bootstrap {
    /// Writes [`PRELUDE`] then `body` as the bootstrap, with the stub as
    /// `sitecustomize.py` (shared, see above), and makes a fresh private
    /// folder whose name starts with `prefix`.
    pub fn prepare(prefix: &str, body: &str) -> Result<Bootstrap, RecorderError> {
        Bootstrap::prepare_in(temp_dir(prefix)?, body)
    }

    /// As [`Bootstrap::prepare`], with `dir` (made private here) as the
    /// private folder: a caller that marks its folders as its own, so that
    /// a run killed outright leaves none the next one does not sweep, makes
    /// it.
    pub fn prepare_in(dir: tempfile::TempDir, body: &str) -> Result<Bootstrap, RecorderError> {
        set_private(dir.path())?;
        let text = source(body);
        let site = match shared_site(dir.path(), &text) {
            Some(site) => site,
            None => {
                let write = |path: PathBuf, text: &str| {
                    std::fs::write(&path, text)
                        .map_err(|source| RecorderError::Write { path, source })
                };
                write(dir.path().join("bootstrap.py"), &text)?;
                let site = dir.path().join("site");
                std::fs::create_dir(&site).map_err(|source| RecorderError::Write {
                    path: site.clone(),
                    source,
                })?;
                set_private(&site)?;
                write(site.join("sitecustomize.py"), STUB)?;
                site
            }
        };
        Ok(Bootstrap { dir, site })
    }

    /// The private folder (for record files and whatever else the caller
    /// keeps per worker).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The folder that holds `sitecustomize.py`, to put first on
    /// `PYTHONPATH`; `bootstrap.py` is in its parent.
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

/// The bootstrap's text: [`PRELUDE`], then `body`.
pub fn source(body: &str) -> String {
    let mut text = String::with_capacity(PRELUDE.len() + body.len() + 1);
    text.push_str(PRELUDE);
    if !PRELUDE.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(body);
    text
}

/// The shared `site/` folder of the bootstrap `text`, or `None` when it
/// cannot be used safely. `private` is a folder this process just made: the
/// owner every shared folder must have.
fn shared_site(private: &Path, text: &str) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata(private).ok()?.uid();
    let root = std::env::temp_dir().join(format!("coldstart-bootstrap-{uid}"));
    let hash = fnv1a(STUB.as_bytes()) ^ fnv1a(text.as_bytes()).rotate_left(1);
    let folder = root.join(format!("{hash:016x}"));
    let site = folder.join("site");
    for d in [&root, &folder, &site] {
        match std::fs::create_dir(d) {
            Ok(()) => set_private(d).ok()?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        // Never a symlink, never someone else's, never writable by others.
        let meta = std::fs::symlink_metadata(d).ok()?;
        if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
            return None;
        }
    }
    for (file, text) in [
        (folder.join("bootstrap.py"), text),
        (site.join("sitecustomize.py"), STUB),
    ] {
        match std::fs::read(&file) {
            // Written before: leave it (the cached code is checked by
            // nothing else than the folder's name).
            Ok(bytes) if bytes == text.as_bytes() => {}
            _ => {
                let tmp = tempfile::NamedTempFile::new_in(&folder).ok()?;
                std::fs::write(tmp.path(), text).ok()?;
                tmp.persist(&file).ok()?;
            }
        }
        let meta = std::fs::symlink_metadata(&file).ok()?;
        if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
            return None;
        }
    }
    Some(site)
}

/// FNV-1a, 64 bits: names a bootstrap's shared folder by its text.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
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
        let stub = std::fs::read_to_string(b.site().join("sitecustomize.py")).unwrap();
        assert_eq!(stub, STUB);
        let file = b.site().parent().unwrap().join("bootstrap.py");
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text, source("BODY = 1\n"));
        assert!(text.starts_with(PRELUDE) && text.ends_with("BODY = 1\n"));
        for p in [b.dir(), b.site()] {
            let mode = std::fs::metadata(p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", p.display());
        }
        // A second worker shares the written bootstrap, untouched (so the
        // .pyc Python keeps beside it stays valid), with its own records.
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        let c = Bootstrap::prepare("coldstart-test-", "BODY = 1\n").unwrap();
        assert_eq!(c.site(), b.site());
        assert_ne!(c.dir(), b.dir());
        assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), mtime);
        let d = Bootstrap::prepare("coldstart-test-", "BODY = 2\n").unwrap();
        assert_ne!(d.site(), b.site(), "another text, another folder");
        let pp = b.pythonpath(Some(OsStr::new("/x")));
        assert_eq!(pp, OsString::from(format!("{}:/x", b.site().display())));
        assert_eq!(b.pythonpath(Some(OsStr::new(""))), b.site().as_os_str());
        let dir = b.dir().to_path_buf();
        drop(b);
        assert!(!dir.exists());
    }
}

//! The Debian packages the suite needs beyond the toolchain and the venv:
//! the shells whose completions are run for real (zsh, fish), the
//! system's libunwind that `pystacks`'s `native` feature links (its tests
//! run with the feature after the suite), and PostgreSQL's server, which
//! the history store's tests start for themselves (`initdb` in a
//! temporary folder, a loopback port), and Chromium, which opens `history
//! show`'s page headless for its screenshot. `cargo xtask
//! test` installs the missing ones with `apt-get` (this project's machines
//! and CI run as root on Debian) and tells the tests, through
//! [`PROVISIONED`], that they are there: a test that needs one then fails
//! when it is missing instead of saying NOT RUN, which is left to a plain
//! `cargo test` on a machine without them.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Result;

use super::steps::{run_step, step};

/// Set to `1` for the test run: the name the tests' rule reads
/// ([`test_interpreters::PROVISIONED`]).
pub const PROVISIONED: &str = test_interpreters::PROVISIONED;

/// A Debian package and the file that shows it is installed.
#[derive(Debug, Clone, Copy)]
pub struct Package {
    /// The package's name.
    pub name: &'static str,
    /// A file it installs.
    pub marker: &'static str,
}

/// What the suite needs.
pub const PACKAGES: &[Package] = &[
    Package {
        name: "zsh",
        marker: "/usr/bin/zsh",
    },
    Package {
        name: "fish",
        marker: "/usr/bin/fish",
    },
    Package {
        name: "libunwind-dev",
        marker: "/usr/lib/x86_64-linux-gnu/libunwind-ptrace.so",
    },
    // The metapackage of Debian's supported server version; its one file
    // of its own marks it, whichever version it brought.
    Package {
        name: "postgresql",
        marker: "/usr/share/doc/postgresql/copyright",
    },
    // `history show`'s page is opened headless and its screenshot read.
    Package {
        name: "chromium",
        marker: "/usr/bin/chromium",
    },
];

/// Installs the missing packages; `true` when every one is there after.
/// A machine without apt-get, or a user who is not root, gets a warning:
/// the tests that need a missing package then fail under `cargo xtask test`.
pub fn provision() -> Result<bool> {
    let missing: Vec<&str> = PACKAGES
        .iter()
        .filter(|p| !Path::new(p.marker).exists())
        .map(|p| p.name)
        .collect();
    if missing.is_empty() {
        let names: Vec<&str> = PACKAGES.iter().map(|p| p.name).collect();
        step(&format!(
            "provision: Debian packages present ({})",
            names.join(", ")
        ));
        return Ok(true);
    }
    let root = rustix::process::geteuid().is_root();
    if !root || !Path::new("/usr/bin/apt-get").exists() {
        eprintln!(
            "==> provision: warning: {} missing and cannot be installed here ({}): \
             install them with your package manager; the tests that need them will fail",
            missing.join(", "),
            if root { "no apt-get" } else { "not root" }
        );
        return Ok(false);
    }
    let mut update = Command::new("apt-get");
    update.args(["update", "-qq"]).stdout(Stdio::null());
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null());
    let ok = run_step("provision: apt-get update", update)?
        && run_step(
            &format!("provision: apt-get install {}", missing.join(" ")),
            install,
        )?;
    Ok(ok && PACKAGES.iter().all(|p| Path::new(p.marker).exists()))
}

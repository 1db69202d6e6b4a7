//! The trace viewers the suite opens coldstart's traces in: speedscope's
//! release build, pinned in `tests/viewers/package-lock.json` and
//! installed from the npm registry with `npm ci` (no install scripts)
//! into `tests/viewers/node_modules`. Nothing runs when the installed
//! lock (npm's own copy, `node_modules/.package-lock.json`) is there and
//! the viewer's page is in place.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use super::steps::{run_step, step};

/// The folder of the viewers' `package.json`, under the workspace root.
pub const DIR: &str = "tests/viewers";

/// speedscope's page, under [`DIR`].
pub const SPEEDSCOPE_PAGE: &str = "node_modules/speedscope/dist/release/index.html";

/// Installs the viewers when they are missing; `false` (with a warning)
/// when npm is missing or fails: the tests that open a viewer then fail
/// under `cargo xtask test`.
pub fn provision(root: &Path) -> Result<bool> {
    let dir = root.join(DIR);
    let installed = dir.join("node_modules/.package-lock.json");
    let current = |p: &Path| std::fs::read(p).ok();
    if dir.join(SPEEDSCOPE_PAGE).exists()
        && current(&installed).is_some()
        && same_pins(
            &current(&installed),
            &current(&dir.join("package-lock.json")),
        )
    {
        step("provision: trace viewers present (tests/viewers: speedscope)");
        return Ok(true);
    }
    if harness::env::which("npm", None, &dir).is_none() {
        eprintln!(
            "==> provision: warning: npm is missing, so speedscope cannot be installed \
             for the trace tests: install Node.js and npm (Debian: `apt-get install npm`)"
        );
        return Ok(false);
    }
    let mut ci = Command::new("npm");
    ci.current_dir(&dir)
        .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"]);
    let ok = run_step("provision: npm ci in tests/viewers (speedscope)", ci)?;
    Ok(ok && dir.join(SPEEDSCOPE_PAGE).exists())
}

/// Whether npm's record of what it installed names the same packages at
/// the same versions as the lock file.
fn same_pins(installed: &Option<Vec<u8>>, lock: &Option<Vec<u8>>) -> bool {
    let pins = |bytes: &Option<Vec<u8>>| -> Option<Vec<(String, String)>> {
        let v: serde_json::Value = serde_json::from_slice(bytes.as_ref()?).ok()?;
        let mut out: Vec<(String, String)> = v["packages"]
            .as_object()?
            .iter()
            .filter(|(k, _)| !k.is_empty())
            .map(|(k, p)| (k.clone(), p["version"].as_str().unwrap_or("").to_owned()))
            .collect();
        out.sort();
        Some(out)
    };
    pins(installed).is_some_and(|i| Some(i) == pins(lock))
}

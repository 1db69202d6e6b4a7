//! `--output FORMAT=PATH`: more renderings of the one measurement a
//! command made, each written to its file, beside the `--format` printed
//! on stdout (as nextest writes JUnit beside its terminal output). A CI
//! job measures once and gets its annotations, its pull-request comment
//! and its JUnit file from the same run, so they cannot disagree.

use std::path::PathBuf;

use anyhow::{Context, Result};

/// One `--output FORMAT=PATH`.
#[derive(Debug, Clone)]
pub struct Output<F> {
    /// The rendering.
    pub format: F,
    /// Where it goes (created or truncated).
    pub path: PathBuf,
}

/// Parses `FORMAT=PATH` for a command whose formats are `F`.
pub fn parse<F: clap::ValueEnum>(s: &str) -> Result<Output<F>, String> {
    let names = || {
        F::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value().map(|p| p.get_name().to_owned()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some((name, path)) = s.split_once('=') else {
        return Err(format!(
            "`{s}` is not FORMAT=PATH; write e.g. markdown=summary.md (formats: {})",
            names()
        ));
    };
    let format = F::from_str(name.trim(), true)
        .map_err(|_| format!("`{name}` is not a format; use one of {}", names()))?;
    if path.is_empty() {
        return Err(format!("`{s}` names no file after the `=`"));
    }
    Ok(Output {
        format,
        path: PathBuf::from(path),
    })
}

/// The folder a comparing command's runs go into, created: `out` when
/// given, else a new `coldstart-<what>-<stamp>` under the system's
/// temporary folder.
pub fn run_folder(out: Option<&std::path::Path>, what: &str) -> Result<PathBuf> {
    let dir = match out {
        Some(d) => d.to_path_buf(),
        None => std::env::temp_dir().join(format!(
            "coldstart-{what}-{}",
            harness::env::folder_stamp(harness::env::unix_ms())
        )),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    Ok(dir)
}

/// Writes each output, rendered by `render` (text, or the bytes of a
/// binary format); a rendering that fails stops before its file is made.
pub fn write_all<F: Copy, R: AsRef<[u8]>>(
    outputs: &[Output<F>],
    render: impl Fn(F) -> Result<R>,
) -> Result<()> {
    for o in outputs {
        let bytes = render(o.format)?;
        if let Some(parent) = o.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("could not create {}", parent.display()))?;
        }
        std::fs::write(&o.path, bytes)
            .with_context(|| format!("could not write {}", o.path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
    enum F {
        Text,
        Junit,
    }

    #[test]
    fn format_and_path_are_parsed_and_bad_ones_say_what_to_write() {
        let o: Output<F> = parse("junit=out/report.xml").unwrap();
        assert_eq!(
            (o.format, o.path),
            (F::Junit, PathBuf::from("out/report.xml"))
        );
        let e = parse::<F>("report.xml").unwrap_err();
        assert!(
            e.contains("FORMAT=PATH") && e.contains("text, junit"),
            "{e}"
        );
        let e = parse::<F>("svg=x").unwrap_err();
        assert!(e.contains("`svg` is not a format"), "{e}");
        assert!(parse::<F>("text=").is_err());
    }
}

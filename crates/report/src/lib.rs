//! report: renderers that turn coldstart's results into text for people
//! (terminal trees and tables, Markdown) and files for tools (JSON,
//! collapsed stacks, flame graph SVG, speedscope).
//!
//! Owns formatting only: it reads the models of `importguard` and `phases`
//! and never parses logs, runs processes or computes statistics itself.

#![warn(missing_docs)]

pub mod bench;
pub mod bisect;
pub mod check;
pub mod diff;
pub mod history;
pub mod importtime;
pub mod lazy;
pub mod profile;

/// `suffix` when `n` is not one: `process` and `processes`, `module` and
/// `modules`.
pub fn plural(n: usize, suffix: &'static str) -> &'static str {
    if n == 1 { "" } else { suffix }
}

/// `s` with every control character (a NUL a profiler read from a target, an
/// escape sequence in a module name) replaced by U+FFFD, so that no SVG, text
/// report or annotation carries one. Line breaks are kept only where the
/// renderer escapes them itself, so they are replaced here too.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(char::is_control) {
        std::borrow::Cow::Owned(
            s.chars()
                .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
                .collect(),
        )
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// Panics unless `svg` is well-formed XML with an `<svg>` root: every SVG
/// the renderers' tests and the workspace's integration tests write goes
/// through it, so a browser opens each (feature `test-support`).
#[cfg(any(test, feature = "test-support"))]
pub fn assert_well_formed_svg(svg: &str) {
    let xml = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    match roxmltree::Document::parse_with_options(svg, xml) {
        Ok(doc) => assert_eq!(doc.root_element().tag_name().name(), "svg", "the root"),
        Err(e) => panic!("not well-formed XML: {e}"),
    }
}

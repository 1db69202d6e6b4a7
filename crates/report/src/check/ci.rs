//! The check's report for CI systems: GitHub Actions workflow commands
//! (an `::error` at the first-party line that started each violation's
//! chain, or at the line a verified cut changes, and a `::notice` at each
//! other first-party link of its chain) and JUnit XML (one
//! test case per target and forbidden pattern). Paths are relative to the
//! project root given; a line is first-party by the project's one rule,
//! [`importguard::firstparty`].

use std::fmt::Write as _;
use std::path::Path;

use importguard::recorder::CallSite;
use importguard::verdict::MergedViolation;

use super::{Status, TargetReport};

use importguard::firstparty::is_first_party as first_party;

/// `file` relative to `root` when it lies below it.
pub fn relative(file: &str, root: &Path) -> String {
    Path::new(file)
        .strip_prefix(root)
        .map_or_else(|_| file.to_owned(), |p| p.display().to_string())
}

/// Escapes a workflow command's message; a control character other than a
/// line break never reaches it (see [`crate::printable`]).
pub(crate) fn esc_data(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| match c {
            '\n' | '\r' => c,
            c if c.is_control() => '\u{FFFD}',
            c => c,
        })
        .collect();
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command's property value.
pub(crate) fn esc_prop(s: &str) -> String {
    esc_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Where an annotation goes: a file relative to the project root, a line.
pub(crate) type Place = (String, u32);

/// Writes one workflow command line, `::KIND file=F,line=L,title=T::MESSAGE`,
/// or `::KIND title=T::MESSAGE` when it has no place: the only way the
/// reports write one, so every annotation keeps GitHub's syntax (a
/// property list opens with a space, its items are split by commas).
pub(crate) fn command(
    out: &mut String,
    kind: &str,
    place: Option<&Place>,
    title: &str,
    message: &str,
) {
    let mut props: Vec<String> = Vec::with_capacity(3);
    if let Some((file, line)) = place {
        props.push(format!("file={}", esc_prop(file)));
        props.push(format!("line={line}"));
    }
    props.push(format!("title={}", esc_prop(title)));
    let _ = writeln!(out, "::{kind} {}::{}", props.join(","), esc_data(message));
}

/// Where an annotation on `frame` goes: its file relative to `root` and
/// its line, when the line is first-party.
pub(crate) fn place_of(frame: &CallSite, root: &Path) -> Option<Place> {
    first_party(&frame.file, root).then(|| (relative(&frame.file, root), frame.line))
}

/// The line a violation's error annotation goes on: the line a verified
/// cut changes, else the first first-party line of its chain (where the
/// import that ended in the module began), else its first-party origin.
fn error_place(
    r: &TargetReport,
    x: &importguard::verdict::Violation,
    root: &Path,
) -> Option<Place> {
    let verified = r
        .suggestions
        .iter()
        .find(|s| s["module"] == x.module.as_str() && s["verification"] == "verified")
        .and_then(|s| s.get("cut"))
        .and_then(|c| {
            Some((
                c["file"].as_str()?.to_owned(),
                u32::try_from(c["line"].as_u64()?).ok()?,
            ))
        });
    verified
        .or_else(|| {
            x.chain_lines
                .iter()
                .flatten()
                .find_map(|f| place_of(f, root))
        })
        .or_else(|| x.origin.as_ref().and_then(|f| place_of(f, root)))
}

/// The one-paragraph story of a violation: what, where, how.
fn story(v: &MergedViolation, root: &Path) -> String {
    let x = &v.first;
    let mut s = format!(
        "{} {}, in {}/{} processes; chain: {}",
        x.module,
        x.status,
        v.processes,
        v.of,
        x.chain.join(" -> ")
    );
    for (i, (m, f)) in x.chain.iter().zip(&x.chain_lines).enumerate() {
        if let Some(f) = f.as_ref().filter(|f| !f.file.starts_with('<')) {
            let _ = write!(
                s,
                "\n  {m} imported at {}:{}{}",
                relative(&f.file, root),
                f.line,
                super::as_parent(x, i)
            );
        }
    }
    if let Some(p) = &x.stage {
        let _ = write!(s, "\nphase: {p}");
    }
    if let Some(c) = v.median_cumulative_us.or(x.cumulative_us) {
        let _ = write!(s, "\ncost: {:.1} ms cumulative", c as f64 / 1000.0);
    }
    s
}

/// The verified cut suggested for `module`, as text for an annotation.
fn suggested(r: &TargetReport, module: &str) -> String {
    r.suggestions
        .iter()
        .find(|s| s["module"] == module)
        .and_then(|s| s.get("cut").filter(|c| !c.is_null()))
        .map(|cut| {
            format!(
                "\nsuggested fix: {}\n{}",
                cut["summary"].as_str().unwrap_or(""),
                cut["diff"].as_str().unwrap_or("")
            )
        })
        .unwrap_or_default()
}

/// GitHub Actions workflow commands for one target's report.
pub fn github(r: &TargetReport, root: &Path, out: &mut String) {
    for p in &r.processes {
        if let Some(err) = &p.error {
            command(
                out,
                "error",
                None,
                &format!(
                    "coldstart: {} process {} could not be checked",
                    r.name, p.index
                ),
                err,
            );
        }
    }
    for v in &r.violations {
        let x = &v.first;
        let error_at = error_place(r, x, root);
        command(
            out,
            "error",
            error_at.as_ref(),
            &format!(
                "coldstart: {} {} at start-up of {}",
                x.module, x.status, r.name
            ),
            &(story(v, root) + &suggested(r, &x.module)),
        );
        let mut noted = vec![error_at];
        for (m, f) in x.chain.iter().zip(&x.chain_lines) {
            if let Some(place) = f.as_ref().and_then(|f| place_of(f, root))
                && !noted.contains(&Some(place.clone()))
            {
                noted.push(Some(place.clone()));
                command(
                    out,
                    "notice",
                    Some(&place),
                    &format!("coldstart: link of the chain to {}", x.module),
                    &format!("imports {m} here, on the chain {}", x.chain.join(" -> ")),
                );
            }
        }
    }
}

/// Escapes text for XML.
pub(crate) fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' && c != '\r' => {}
            c => o.push(c),
        }
    }
    o
}

/// JUnit XML for every target: a test suite per target, a test case per
/// forbidden pattern (failed by its violations), and an errored test case
/// when a worker could not be checked.
pub fn junit(reports: &[TargetReport], root: &Path) -> String {
    let mut suites = String::new();
    let (mut tests, mut failures, mut errors) = (0, 0, 0);
    for r in reports {
        let mut cases = String::new();
        let (mut t, mut f, mut e) = (0, 0, 0);
        let class = format!("coldstart.{}", r.name);
        for pattern in &r.forbidden {
            t += 1;
            let hits: Vec<&MergedViolation> = r
                .violations
                .iter()
                .filter(|v| &v.first.pattern == pattern)
                .collect();
            let _ = write!(
                cases,
                "    <testcase classname=\"{}\" name=\"{} not imported at start-up\"",
                xml(&class),
                xml(pattern)
            );
            if hits.is_empty() {
                cases.push_str("/>\n");
                continue;
            }
            f += 1;
            let first = &hits[0].first;
            // The same line as the GitHub error: the one a verified cut
            // changes, else the line the chain started from.
            let where_ = error_place(r, first, root)
                .map(|(file, line)| format!(" at {file}:{line}"))
                .unwrap_or_default();
            let body: Vec<String> = hits.iter().map(|v| story(v, root)).collect();
            let _ = write!(
                cases,
                ">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                xml(&first.status.to_string()),
                xml(&format!("{} {}{where_}", first.module, first.status)),
                xml(&body.join("\n\n"))
            );
        }
        let failed: Vec<_> = r.processes.iter().filter(|p| p.error.is_some()).collect();
        if r.status == Status::Error || !failed.is_empty() {
            t += 1;
            e += 1;
            let text: Vec<String> = failed
                .iter()
                .map(|p| format!("process {}: {}", p.index, p.error.as_deref().unwrap_or("")))
                .collect();
            let _ = write!(
                cases,
                "    <testcase classname=\"{}\" name=\"every worker checked\">\n      <error message=\"{}\">{}</error>\n    </testcase>\n",
                xml(&class),
                xml("a worker could not be checked"),
                xml(&text.join("\n"))
            );
        }
        let _ = write!(
            suites,
            "  <testsuite name=\"{}\" tests=\"{t}\" failures=\"{f}\" errors=\"{e}\">\n{cases}  </testsuite>\n",
            xml(&r.name)
        );
        tests += t;
        failures += f;
        errors += e;
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"coldstart check\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n{suites}</testsuites>\n"
    )
}

//! The check's report for CI systems: GitHub Actions workflow commands
//! (an `::error` at the first-party line that started each violation, a
//! `::notice` at each first-party link of its chain) and JUnit XML (one
//! test case per target and forbidden pattern). Paths are relative to the
//! project root given; a line is first-party by the project's one rule,
//! [`importguard::firstparty`].

use std::fmt::Write as _;
use std::path::Path;

use importguard::recorder::Frame;
use importguard::verdict::MergedViolation;

use super::{Status, TargetReport};

use importguard::firstparty::is_first_party as first_party;

/// `file` relative to `root` when it lies below it.
pub fn relative(file: &str, root: &Path) -> String {
    Path::new(file)
        .strip_prefix(root)
        .map_or_else(|_| file.to_owned(), |p| p.display().to_string())
}

/// Escapes a workflow command's message.
fn esc_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command's property value.
fn esc_prop(s: &str) -> String {
    esc_data(s).replace(':', "%3A").replace(',', "%2C")
}

fn at(frame: Option<&Frame>, root: &Path) -> String {
    match frame.filter(|f| first_party(&f.file, root)) {
        Some(f) => format!(
            " file={},line={}",
            esc_prop(&relative(&f.file, root)),
            f.line
        ),
        None => String::new(),
    }
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
    for (m, f) in x.chain.iter().zip(&x.chain_lines) {
        if let Some(f) = f.as_ref().filter(|f| !f.file.starts_with('<')) {
            let _ = write!(
                s,
                "\n  {m} imported at {}:{}",
                relative(&f.file, root),
                f.line
            );
        }
    }
    if let Some(p) = &x.phase {
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
            let _ = writeln!(
                out,
                "::error title={}::{}",
                esc_prop(&format!(
                    "coldstart: {} process {} could not be checked",
                    r.name, p.index
                )),
                esc_data(err)
            );
        }
    }
    for v in &r.violations {
        let x = &v.first;
        let _ = writeln!(
            out,
            "::error{}{}title={}::{}",
            at(x.origin.as_ref(), root),
            if at(x.origin.as_ref(), root).is_empty() {
                " "
            } else {
                ","
            },
            esc_prop(&format!(
                "coldstart: {} {} at start-up of {}",
                x.module, x.status, r.name
            )),
            esc_data(&(story(v, root) + &suggested(r, &x.module)))
        );
        for (m, f) in x.chain.iter().zip(&x.chain_lines) {
            if let Some(f) = f.as_ref().filter(|f| first_party(&f.file, root))
                && Some(f) != x.origin.as_ref()
            {
                let _ = writeln!(
                    out,
                    "::notice file={},line={},title={}::{}",
                    esc_prop(&relative(&f.file, root)),
                    f.line,
                    esc_prop(&format!("coldstart: link of the chain to {}", x.module)),
                    esc_data(&format!(
                        "imports {m} here, on the chain {}",
                        x.chain.join(" -> ")
                    ))
                );
            }
        }
    }
}

fn xml(s: &str) -> String {
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
            let where_ = first
                .origin
                .as_ref()
                .map(|o| format!(" at {}:{}", relative(&o.file, root), o.line))
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

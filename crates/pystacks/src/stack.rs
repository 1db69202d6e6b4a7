//! The typed stacks: a frame, a thread's stack, and how each is written
//! as text (the shapes of `py-spy dump` and of a collapsed-stack frame).

use std::fmt;

/// One Python frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function (`<module>` for a module's body).
    pub name: String,
    /// The file as the interpreter knows it (absolute for most code,
    /// `<frozen importlib._bootstrap>` for frozen modules).
    pub filename: String,
    /// The file shortened as py-spy does: the path from the outermost
    /// package (a folder with `__init__.py`), else the file's name.
    pub short_filename: String,
    /// The line (the current one, or the function's first with
    /// [`Lines::Function`](crate::Lines::Function)); 0 when unknown.
    pub line: u32,
}

/// The name a frame gets when the one read from the target is no name: empty
/// or holding control characters (bytes read from memory that was changing,
/// during an import for example). Its file and line are kept.
pub const UNREADABLE_NAME: &str = "<unreadable name>";

impl Frame {
    /// A frame from what was read from the target: a name that is empty or
    /// holds a control character becomes [`UNREADABLE_NAME`]; control
    /// characters in the file names become U+FFFD. No frame carries one.
    pub fn from_read(name: String, filename: String, short_filename: String, line: u32) -> Frame {
        let name = if name.is_empty() || name.chars().any(char::is_control) {
            UNREADABLE_NAME.to_owned()
        } else {
            name
        };
        Frame {
            name,
            filename: printable(filename),
            short_filename: printable(short_filename),
            line,
        }
    }

    /// The frame as `py-spy record --format raw` writes it:
    /// `name (file:line)`, `name (file)` without a line, `name` without a
    /// file. `;` (the collapsed format's separator) becomes `:`.
    pub fn label(&self) -> String {
        let label = match (self.short_filename.is_empty(), self.line) {
            (true, _) => self.name.clone(),
            (false, 0) => format!("{} ({})", self.name, self.short_filename),
            (false, line) => format!("{} ({}:{line})", self.name, self.short_filename),
        };
        sanitize(&label)
    }
}

/// A collapsed-stack frame may not hold `;` nor a line break (nor any other
/// control character: those become U+FFFD).
pub(crate) fn sanitize(label: &str) -> String {
    printable(label.replace(';', ":").replace(['\n', '\r'], " "))
}

/// `s` with every control character replaced by U+FFFD.
pub(crate) fn printable(s: String) -> String {
    if s.chars().any(char::is_control) {
        s.chars()
            .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
            .collect()
    } else {
        s
    }
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "{} ({})", self.name, self.short_filename),
            line => write!(f, "{} ({}:{line})", self.name, self.short_filename),
        }
    }
}

/// One thread's Python stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStack {
    /// The interpreter's thread id (`threading.get_ident()`).
    pub thread_id: u64,
    /// The kernel's thread id, where known.
    pub os_thread_id: Option<u64>,
    /// The thread's name (`threading.current_thread().name`), where known.
    pub name: Option<String>,
    /// On CPU (or not in a known waiting call) when read.
    pub active: bool,
    /// Held the GIL when read.
    pub owns_gil: bool,
    /// Innermost frame first, as a traceback read upwards.
    pub frames: Vec<Frame>,
}

impl ThreadStack {
    /// `idle`, `active` or `active+gil`, as py-spy says.
    pub fn status(&self) -> &'static str {
        match (self.active, self.owns_gil) {
            (false, _) => "idle",
            (true, true) => "active+gil",
            (true, false) => "active",
        }
    }

    /// The kernel's thread id, else the interpreter's in hex (py-spy's
    /// choice).
    pub fn id_text(&self) -> String {
        match self.os_thread_id {
            Some(tid) => tid.to_string(),
            None => format!("{:#X}", self.thread_id),
        }
    }
}

impl fmt::Display for ThreadStack {
    /// `Thread 123 (active+gil): "MainThread"` then one indented line per
    /// frame, innermost first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Thread {} ({})", self.id_text(), self.status())?;
        if let Some(name) = &self.name {
            write!(f, ": \"{name}\"")?;
        }
        writeln!(f)?;
        for frame in &self.frames {
            writeln!(f, "    {frame}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_could_not_be_read_becomes_a_marked_placeholder_with_its_place_kept() {
        let f = Frame::from_read(
            "\0\0\0\0\0\0\0\0".into(),
            "/site/torch/_ops\u{1b}.py".into(),
            "torch/_ops\u{1b}.py".into(),
            491,
        );
        assert_eq!(f.name, UNREADABLE_NAME);
        assert_eq!(f.line, 491);
        assert_eq!(f.short_filename, "torch/_ops\u{FFFD}.py");
        assert_eq!(f.label(), "<unreadable name> (torch/_ops\u{FFFD}.py:491)");
        assert!(!f.to_string().chars().any(char::is_control));
        let empty = Frame::from_read(String::new(), "a.py".into(), "a.py".into(), 1);
        assert_eq!(empty.name, UNREADABLE_NAME);
        let fine = Frame::from_read("load".into(), "/x/a.py".into(), "a.py".into(), 3);
        assert_eq!(fine.label(), "load (a.py:3)");
    }

    #[test]
    fn a_collapsed_label_holds_no_control_character() {
        let f = Frame {
            name: "f\u{7}g;h\ni".into(),
            filename: "a.py".into(),
            short_filename: "a.py".into(),
            line: 2,
        };
        assert_eq!(f.label(), "f\u{FFFD}g:h i (a.py:2)");
    }

    use crate::testing::frame;

    #[test]
    fn labels_follow_py_spy_raw() {
        let cases = [
            (frame("work", "app.py", 12), "work (app.py:12)"),
            (frame("work", "app.py", 0), "work (app.py)"),
            (
                Frame {
                    name: "native".into(),
                    filename: String::new(),
                    short_filename: String::new(),
                    line: 0,
                },
                "native",
            ),
            (frame("a;b", "x;y.py", 3), "a:b (x:y.py:3)"),
            (
                frame("_find_and_load", "<frozen importlib._bootstrap>", 1165),
                "_find_and_load (<frozen importlib._bootstrap>:1165)",
            ),
        ];
        for (f, want) in cases {
            assert_eq!(f.label(), want);
        }
    }

    #[test]
    fn a_thread_reads_like_py_spy_dump() {
        let t = ThreadStack {
            thread_id: 0x7f00,
            os_thread_id: Some(4242),
            name: Some("MainThread".into()),
            active: true,
            owns_gil: true,
            frames: vec![
                frame("hang_here", "hang.py", 9),
                frame("<module>", "hang.py", 20),
            ],
        };
        assert_eq!(
            t.to_string(),
            "Thread 4242 (active+gil): \"MainThread\"\n    hang_here (hang.py:9)\n    <module> (hang.py:20)\n"
        );
        let idle = ThreadStack {
            os_thread_id: None,
            name: None,
            active: false,
            frames: vec![],
            ..t
        };
        assert_eq!(idle.to_string(), "Thread 0x7F00 (idle)\n");
    }
}

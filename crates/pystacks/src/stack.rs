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

impl Frame {
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

/// A collapsed-stack frame may not hold `;` nor a line break.
pub(crate) fn sanitize(label: &str) -> String {
    label.replace(';', ":").replace(['\n', '\r'], " ")
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

    fn frame(name: &str, file: &str, line: u32) -> Frame {
        Frame {
            name: name.into(),
            filename: format!("/abs/{file}"),
            short_filename: file.into(),
            line,
        }
    }

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

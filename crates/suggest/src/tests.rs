//! The classifier's shapes, one small project each: a file, the line the
//! chain stands on, and the cut or the reason expected. Run by the suite's
//! `python3` (or `$COLDSTART_PYTHON`).

use std::path::Path;
use std::process::Command;

use importguard::recorder::CallSite;
use importguard::verdict::Violation;

use super::*;

use test_interpreters::default_python as python;

/// A violation whose chain is `module` (imported at `file:line`), then torch.
fn violation(root: &Path, file: &str, line: u32, module: &str) -> Violation {
    let at = CallSite {
        file: root.join(file).display().to_string(),
        line,
        func: "<module>".into(),
    };
    Violation {
        recorded: true,
        ..Violation::loaded(
            "torch",
            "torch",
            vec![module.to_owned(), "torch".to_owned()],
            vec![Some(at), None],
        )
    }
}

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

enum Want {
    /// The offered cut's kind, and text its diff must contain.
    Cut(CutKind, &'static str),
    /// The link is not cuttable, for this reason.
    Reason(&'static str),
}

struct Case {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    file: &'static str,
    line: u32,
    module: &'static str,
    want: Want,
}

const CASES: &[Case] = &[
    Case {
        name: "two statements on the import's line",
        files: &[(
            "m.py",
            "import os; import torch\n\ndef f():\n    return torch.x\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Reason("shares line 1 with another statement"),
    },
    Case {
        name: "an ImportError fallback binds the name again",
        files: &[(
            "m.py",
            "try:\n    import torch\nexcept ImportError:\n    torch = None\n\ndef f():\n    return torch\n",
        )],
        file: "m.py",
        line: 2,
        module: "torch",
        want: Want::Reason("`torch` is bound again at module level (line 4)"),
    },
    Case {
        name: "a module-level lambda cannot hold an import",
        files: &[("m.py", "import torch\n\nmake = lambda: torch.x\n")],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Reason("read inside a lambda at module level (line 3)"),
    },
    Case {
        name: "a body on the def line",
        files: &[("m.py", "import torch\n\ndef f(): return torch.x\n")],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Reason("`f` (line 3) has its body on the `def` line"),
    },
    Case {
        name: "a star import",
        files: &[("m.py", "from torch import *\n")],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Reason("`import *` binds names"),
    },
    Case {
        name: "an import inside a function that start-up calls",
        files: &[("m.py", "def setup():\n    import torch\n\nsetup()\n")],
        file: "m.py",
        line: 2,
        module: "torch",
        want: Want::Reason("the import is inside `setup` (line 1)"),
    },
    Case {
        name: "a function that declares the name global",
        files: &[(
            "m.py",
            "import torch\n\ndef reset():\n    global torch\n    torch = None\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Reason("`reset` declares `global torch` (line 3)"),
    },
    Case {
        name: "a decorator whose body reads the name",
        files: &[(
            "m.py",
            "import torch\n\ndef register(f):\n    torch.registry.append(f)\n    return f\n\n@register\ndef g():\n    pass\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Reason("`register` reads it and is a decorator of function `g` (line 7)"),
    },
    Case {
        name: "a class built at module level whose __init__ reads the name",
        files: &[(
            "m.py",
            "import torch\n\nclass Model:\n    def __init__(self):\n        self.t = torch.x\n\nMODEL = Model()\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Reason("`Model` reads it and is called at module level (line 7)"),
    },
    Case {
        name: "a helper that calls a function that reads the name",
        files: &[(
            "m.py",
            "import torch\n\ndef inner():\n    return torch.x\n\ndef outer():\n    return inner()\n\nVALUE = outer()\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Reason("`outer` reads it and is called at module level (line 9)"),
    },
    Case {
        name: "a module-level comprehension",
        files: &[("m.py", "import torch\n\nXS = [torch.x for _ in range(2)]\n")],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Reason("`torch` is read at module level (line 3)"),
    },
    Case {
        name: "a package that already has a module __getattr__",
        files: &[
            (
                "pkg/__init__.py",
                "from pkg.heavy import Net\n\ndef __getattr__(name):\n    raise AttributeError(name)\n",
            ),
            (
                "pkg/heavy.py",
                "import torch\n\nclass Net(torch.nn.Module):\n    pass\n",
            ),
        ],
        file: "pkg/__init__.py",
        line: 1,
        module: "pkg.heavy",
        want: Want::Reason("already defines `__getattr__` (line 3)"),
    },
    Case {
        name: "a latin-1 file",
        files: &[("m.py", "# -*- coding: latin-1 -*-\nimport torch\n")],
        file: "m.py",
        line: 2,
        module: "torch",
        want: Want::Reason("declares the encoding iso-8859-1"),
    },
    Case {
        name: "a file this interpreter cannot parse",
        files: &[("m.py", "import torch\ndef (:\n")],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Reason("this interpreter cannot parse it"),
    },
    Case {
        name: "a line that is not an import",
        files: &[(
            "m.py",
            "import importlib\nT = importlib.import_module('torch')\n",
        )],
        file: "m.py",
        line: 2,
        module: "torch",
        want: Want::Reason("line 2 of m.py holds no import statement"),
    },
    Case {
        name: "a name only a parameter shadows is unused: the import goes",
        files: &[("m.py", "import torch\n\ndef f(torch):\n    return torch\n")],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Cut(CutKind::DropImport, "-import torch\n"),
    },
    Case {
        name: "a script's main guard is its run, not its import: the handler's read moves",
        files: &[(
            "worker.py",
            "import torch\n\ndef handle():\n    return torch.x\n\ndef main():\n    return handle()\n\nif __name__ == \"__main__\":\n    main()\n",
        )],
        file: "worker.py",
        line: 1,
        module: "torch",
        want: Want::Cut(
            CutKind::MoveIntoFunctions,
            "def handle():\n+    import torch\n",
        ),
    },
    Case {
        name: "a read in the main guard itself is still a read at module level",
        files: &[(
            "worker.py",
            "import torch\n\nif __name__ == \"__main__\":\n    torch.x\n",
        )],
        file: "worker.py",
        line: 1,
        module: "torch",
        want: Want::Reason("`torch` is read at module level (line 4)"),
    },
    Case {
        name: "a nested function's read moves into the outer function",
        files: &[(
            "m.py",
            "import torch\n\ndef outer():\n    def inner():\n        return torch.x\n    return inner\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Cut(
            CutKind::MoveIntoFunctions,
            "def outer():\n+    import torch\n",
        ),
    },
    Case {
        name: "a multi-line import moves as one line, with only the names read",
        files: &[(
            "m.py",
            "from torch import (\n    Tensor,\n    nn,\n)\n\n\ndef f():\n    return nn.Module\n\n\ndef g():\n    return Tensor()\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Cut(
            CutKind::MoveIntoFunctions,
            "def f():\n+    from torch import nn\n     return nn.Module\n",
        ),
    },
    Case {
        name: "names read under TYPE_CHECKING stay importable for type checkers",
        files: &[(
            "m.py",
            "from typing import TYPE_CHECKING\n\nimport torch\n\nif TYPE_CHECKING:\n    Alias = torch.Tensor\n",
        )],
        file: "m.py",
        line: 3,
        module: "torch",
        want: Want::Cut(
            CutKind::TypeChecking,
            "-import torch\n+if TYPE_CHECKING:\n+    import torch\n",
        ),
    },
    Case {
        name: "an existing `import typing` gives the guard",
        files: &[(
            "m.py",
            "from __future__ import annotations\n\nimport typing\n\nfrom torch import Tensor\n\n\ndef f(x: Tensor) -> None:\n    pass\n",
        )],
        file: "m.py",
        line: 5,
        module: "torch",
        want: Want::Cut(
            CutKind::TypeChecking,
            "-from torch import Tensor\n+if typing.TYPE_CHECKING:\n+    from torch import Tensor\n",
        ),
    },
    Case {
        name: "a method's read moves into the method",
        files: &[(
            "m.py",
            "import torch\n\n\nclass A:\n    \"\"\"Doc.\"\"\"\n\n    def run(self):\n        \"\"\"Runs.\"\"\"\n        return torch.x\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Cut(
            CutKind::MoveIntoFunctions,
            "         \"\"\"Runs.\"\"\"\n+        import torch\n",
        ),
    },
    Case {
        name: "a dispatch function every request runs: the import goes into the branch that reads it",
        files: &[(
            "app/worker.py",
            "from app import reports\n\n\ndef handle(req):\n    \"\"\"Every request.\"\"\"\n    op = req[\"op\"]\n    if op == \"health\":\n        return \"ok\"\n    if op == \"report\":\n        data = req[\"data\"]\n        return reports.build(data)\n    return None\n",
        )],
        file: "app/worker.py",
        line: 1,
        module: "app.reports",
        want: Want::Cut(
            CutKind::MoveIntoBlocks,
            "         data = req[\"data\"]\n+        from app import reports\n         return reports.build(data)\n",
        ),
    },
    Case {
        name: "an `elif` branch takes the import; the `elif` line itself is not a block",
        files: &[(
            "m.py",
            "import torch\n\n\ndef handle(op):\n    if op == \"health\":\n        return 1\n    elif op == \"run\":\n        return torch.x\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Cut(
            CutKind::MoveIntoBlocks,
            "     elif op == \"run\":\n+        import torch\n         return torch.x\n",
        ),
    },
    Case {
        name: "after an early return: right before the first statement that reads it",
        files: &[(
            "m.py",
            "import torch\n\n\ndef handle(op):\n    if op == \"health\":\n        return 1\n    return torch.x\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Cut(
            CutKind::MoveIntoBlocks,
            "         return 1\n+    import torch\n     return torch.x\n",
        ),
    },
    Case {
        name: "a serving loop: the import goes into the loop's branch, not before the loop",
        files: &[(
            "m.py",
            "import sys\n\nimport torch\n\n\ndef main():\n    for line in sys.stdin:\n        if line == \"health\":\n            print(\"ok\")\n        elif line == \"run\":\n            print(torch.x)\n",
        )],
        file: "m.py",
        line: 3,
        module: "torch",
        want: Want::Cut(
            CutKind::MoveIntoBlocks,
            "         elif line == \"run\":\n+            import torch\n             print(torch.x)\n",
        ),
    },
    Case {
        name: "a read in a nested function counts where that function is defined",
        files: &[(
            "m.py",
            "import torch\n\n\ndef handle(op):\n    if op == \"run\":\n        def later():\n            return torch.x\n        return later\n    return None\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Cut(
            CutKind::MoveIntoBlocks,
            "     if op == \"run\":\n+        import torch\n         def later():\n",
        ),
    },
    Case {
        name: "two branches read it: one import in each",
        files: &[(
            "m.py",
            "import torch\n\n\ndef handle(op):\n    if op == \"a\":\n        return torch.a\n    else:\n        return torch.b\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Cut(
            CutKind::MoveIntoBlocks,
            "     if op == \"a\":\n+        import torch\n         return torch.a\n     else:\n+        import torch\n",
        ),
    },
    Case {
        name: "a one-line branch cannot take a line: the function's top does",
        files: &[(
            "m.py",
            "import torch\n\n\ndef handle(op):\n    if op == \"run\": return torch.x\n    return 1\n",
        )],
        file: "m.py",
        line: 1,
        module: "torch",
        want: Want::Cut(
            CutKind::MoveIntoFunctions,
            "def handle(op):\n+    import torch\n",
        ),
    },
    Case {
        name: "the only statement of an if block leaves `pass`",
        files: &[(
            "m.py",
            "import sys\n\nif sys.platform:\n    import torch\n\ndef f():\n    return torch.x\n",
        )],
        file: "m.py",
        line: 4,
        module: "torch",
        want: Want::Cut(CutKind::MoveIntoFunctions, "-    import torch\n+    pass\n"),
    },
];

#[test]
fn each_shape_gets_its_cut_or_its_reason() {
    let mut failures = Vec::new();
    for case in CASES {
        let dir = project(case.files);
        let v = violation(dir.path(), case.file, case.line, case.module);
        let s = Suggester::new(dir.path(), python()).unwrap();
        let sug = match s.suggest(&v) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{}: error {e}", case.name));
                continue;
            }
        };
        match (&case.want, &sug.cut) {
            (Want::Cut(kind, text), Some(cut)) => {
                if cut.kind != *kind || !cut.diff.contains(text) {
                    failures.push(format!(
                        "{}: wanted {kind:?} with {text:?}, got {:?}:\n{}",
                        case.name, cut.kind, cut.diff
                    ));
                }
                // Every cut compiles: the classifier compiled it, and so
                // does this interpreter reading the patched file.
                let out = Command::new(python())
                    .args([
                        "-B",
                        "-c",
                        "import sys; compile(sys.stdin.read(), 'm', 'exec')",
                    ])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .and_then(|mut c| {
                        use std::io::Write as _;
                        c.stdin.take().unwrap().write_all(cut.patched())?;
                        c.wait_with_output()
                    })
                    .unwrap();
                if !out.status.success() {
                    failures.push(format!("{}: the patched file does not compile", case.name));
                }
            }
            (Want::Reason(reason), None) => {
                let got = sug
                    .not_cuttable
                    .first()
                    .map(|u| u.reason.as_str())
                    .unwrap_or("");
                if !got.contains(reason) {
                    failures.push(format!(
                        "{}: wanted reason {reason:?}, got {got:?}",
                        case.name
                    ));
                }
            }
            (_, got) => failures.push(format!(
                "{}: got {:?}\n{sug}",
                case.name,
                got.as_ref().map(|c| c.kind)
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `from . import heavy` in a package `__init__`: the `__getattr__` must not
/// ask itself for the submodule (it would recurse); it imports it by name.
#[test]
fn a_submodule_reexport_of_the_package_itself_imports_by_name() {
    let dir = project(&[
        ("pkg/__init__.py", "from . import heavy\n\nLIGHT = 1\n"),
        ("pkg/heavy.py", "import torch\n"),
        ("torch/__init__.py", "# a stand-in torch for this test\n"),
    ]);
    let v = violation(dir.path(), "pkg/__init__.py", 1, "pkg.heavy");
    let s = Suggester::new(dir.path(), python()).unwrap();
    let sug = s.suggest(&v).unwrap();
    // (The torch link, found by reading pkg/heavy.py, is cut by dropping
    // its unused import; this test is about the re-export's link.)
    let cut = sug.cuts().find(|c| c.link == 0).unwrap();
    assert_eq!(cut.kind, CutKind::ModuleGetattr);
    assert!(
        cut.diff
            .contains("importlib.import_module(__name__ + \".heavy\")"),
        "{}",
        cut.diff
    );
    s.apply(cut).unwrap();
    let out = Command::new(python())
        .args([
            "-B",
            "-c",
            "import sys, pkg\nprint('pkg.heavy' in sys.modules, 'heavy' in dir(pkg))\n\
             print(pkg.heavy.__name__, 'torch' in sys.modules)\nfrom pkg import heavy\nprint(heavy is pkg.heavy)",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "False True\npkg.heavy True\nTrue\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CRLF file stays CRLF, also in the lines the cut adds (and the blank
/// line after a first-line import goes with it).
#[test]
fn crlf_files_keep_their_line_ends() {
    let dir = project(&[(
        "m.py",
        "import torch\r\n\r\n\r\ndef f():\r\n    return torch.x\r\n",
    )]);
    let v = violation(dir.path(), "m.py", 1, "torch");
    let sug = Suggester::new(dir.path(), python())
        .unwrap()
        .suggest(&v)
        .unwrap();
    let cut = sug.cut.as_ref().unwrap();
    assert_eq!(
        String::from_utf8_lossy(cut.patched()),
        "\r\ndef f():\r\n    import torch\r\n    return torch.x\r\n"
    );
}

/// Python 3.15 (assumed): inside `try`, `lazy` is a syntax error, and the
/// cut says why it is not the lazy one.
#[test]
fn lazy_is_not_offered_inside_try() {
    let dir = project(&[(
        "m.py",
        "try:\n    import torch\nexcept KeyError:\n    pass\n\n\ndef f():\n    return torch.x\n",
    )]);
    let v = violation(dir.path(), "m.py", 2, "torch");
    let sug = Suggester::new(dir.path(), python())
        .unwrap()
        .assume_version([3, 15, 0])
        .suggest(&v)
        .unwrap();
    let cut = sug.cut.as_ref().unwrap();
    assert_eq!(cut.kind, CutKind::MoveIntoFunctions);
    assert!(
        cut.notes
            .iter()
            .any(|n| n.contains("`lazy` is not allowed inside `try`")),
        "{:?}",
        cut.notes
    );
    assert!(sug.candidates.iter().all(|c| c.kind != CutKind::LazyImport));
}

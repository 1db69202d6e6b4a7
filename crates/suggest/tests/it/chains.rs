//! Generated chains: a worker package `gen` whose modules import each other
//! in a line, `gen.m0 -> gen.m1 -> ... -> torch`, each reading the name it
//! imports at random places (inside functions, methods, annotations, or at
//! module level in one of five ways), some modules being packages. The
//! property: a link is cuttable exactly when its module reads the name
//! nowhere at module level; when one is, the suggested patch, applied to a
//! copy, removes the violation, keeps the worker's handshake, leaves every
//! generated function working, and the cut code path still imports torch.

use std::path::Path;

use proptest::prelude::*;
use suggest::{CutKind, Suggester};

use crate::support::{check, python, python_code};

/// Where a module reads the name it imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    Function,
    Method,
    Annotation,
    BaseClass,
    Call,
    Default,
    Decorator,
    CalledHelper,
}

impl Use {
    fn at_module_level(self) -> bool {
        matches!(
            self,
            Use::BaseClass | Use::Call | Use::Default | Use::Decorator | Use::CalledHelper
        )
    }

    fn code(self, i: usize, n: &str) -> String {
        match self {
            Use::Function => format!("def use_{i}():\n    return {n}()\n"),
            Use::Method => format!("class Holder{i}:\n    def get(self):\n        return {n}()\n"),
            Use::Annotation => format!("def ann_{i}(x: {n}) -> {n}:\n    return x\n"),
            Use::BaseClass => format!("class Sub{i}({n}):\n    pass\n"),
            Use::Call => format!("INSTANCE_{i} = {n}()\n"),
            Use::Default => format!("def dflt_{i}(x={n}):\n    return x\n"),
            Use::Decorator => format!("@{n}\ndef deco_{i}():\n    pass\n"),
            Use::CalledHelper => {
                format!("def helper_{i}():\n    return {n}()\n\n\nHELPED_{i} = helper_{i}()\n")
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Module {
    package: bool,
    uses: Vec<Use>,
}

fn use_strategy() -> impl Strategy<Value = Use> {
    prop_oneof![
        3 => Just(Use::Function),
        2 => Just(Use::Method),
        2 => Just(Use::Annotation),
        1 => Just(Use::BaseClass),
        1 => Just(Use::Call),
        1 => Just(Use::Default),
        1 => Just(Use::Decorator),
        1 => Just(Use::CalledHelper),
    ]
}

fn chain_strategy() -> impl Strategy<Value = Vec<Module>> {
    prop::collection::vec(
        (any::<bool>(), prop::collection::vec(use_strategy(), 0..3)).prop_map(|(package, uses)| {
            let mut u = uses;
            u.dedup();
            Module { package, uses: u }
        }),
        1..5,
    )
}

/// Writes the package `gen` under `root`: `gen/__main__.py` serves the
/// protocol after reading `gen.m0` at module level.
fn write(root: &Path, chain: &[Module]) {
    let pkg = root.join("gen");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("__init__.py"), "").unwrap();
    std::fs::write(
        pkg.join("__main__.py"),
        "import sys\n\nimport protokit\n\nimport gen.m0\n\nNAME = gen.m0.__name__\n\n\
         sys.exit(protokit.serve(on_load=lambda name: None))\n",
    )
    .unwrap();
    let k = chain.len();
    for (i, m) in chain.iter().enumerate() {
        let (import, name) = if i + 1 < k {
            (
                format!("from gen.m{} import Thing{}", i + 1, i + 1),
                format!("Thing{}", i + 1),
            )
        } else {
            (
                "from torch.nn import Module".to_owned(),
                "Module".to_owned(),
            )
        };
        let mut src = format!(
            "\"\"\"Generated link {i}.\"\"\"\n\n{import}\n\n\nclass Thing{i}:\n    def __init__(self, *args):\n        self.args = args\n"
        );
        for u in &m.uses {
            src.push_str("\n\n");
            src.push_str(&u.code(i, &name));
        }
        let file = if m.package {
            std::fs::create_dir_all(pkg.join(format!("m{i}"))).unwrap();
            pkg.join(format!("m{i}")).join("__init__.py")
        } else {
            pkg.join(format!("m{i}.py"))
        };
        std::fs::write(file, src).unwrap();
    }
}

/// Calls every generated function of every loaded `gen` module, then the
/// code path the cut deferred; prints whether torch was loaded before and
/// after.
fn exercise(module: &str, kind: CutKind, names: &[String], functions: &[String]) -> String {
    let calls: Vec<String> = match kind {
        CutKind::MoveIntoFunctions => functions
            .iter()
            .map(|f| match f.split_once('.') {
                Some((cls, meth)) => format!("getattr(m, {cls:?})().{meth}()"),
                None => format!("getattr(m, {f:?})()"),
            })
            .collect(),
        CutKind::ModuleGetattr | CutKind::LazyImport => {
            names.iter().map(|n| format!("getattr(m, {n:?})")).collect()
        }
        _ => vec![],
    };
    format!(
        "import importlib, sys\n\
         import gen.m0\n\
         before = 'torch' in sys.modules\n\
         for name in sorted(k for k in sys.modules if k.startswith('gen.m')):\n\
         \x20   mod = sys.modules[name]\n\
         \x20   for attr in dir(mod):\n\
         \x20       if attr.startswith('ann_'):\n\
         \x20           getattr(mod, attr)(1)\n\
         \x20   assert 'torch' not in sys.modules, 'annotations imported torch'\n\
         m = importlib.import_module({module:?})\n\
         {}\n\
         print(before, 'torch' in sys.modules)\n",
        if calls.is_empty() {
            "pass".to_owned()
        } else {
            calls.join("\n")
        }
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_suggested_patch_always_removes_the_violation(chain in chain_strategy()) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proj");
        write(&root, &chain);
        let py = python();
        let run = check(py, &root, "gen");
        prop_assert_eq!(run.handshake_error, None);
        prop_assert_eq!(run.violations.len(), 1, "{:#?}", run.violations);
        let v = &run.violations[0];
        let s = Suggester::new(&root, py).unwrap();
        let mut sug = s.suggest(v).unwrap();

        let cuttable = chain.iter().any(|m| !m.uses.iter().any(|u| u.at_module_level()));
        prop_assert_eq!(sug.cut.is_some(), cuttable, "{:?}\n{}", chain, sug);
        // The entry reads gen.m0 at module level: never a cut.
        prop_assert!(sug.cuts().all(|c| c.file != "gen/__main__.py"), "{}", sug);
        let index_of = |file: &str| -> usize {
            let stem = file.trim_start_matches("gen/m").trim_end_matches(".py").trim_end_matches("/__init__");
            stem.parse().unwrap()
        };
        for c in sug.cuts() {
            let m = &chain[index_of(&c.file)];
            prop_assert!(!m.uses.iter().any(|u| u.at_module_level()), "{:?}\n{}", m, sug);
        }
        for u in &sug.not_cuttable {
            // First-party links fail on a module-level read; the others
            // (torch.nn, imported first by torch itself) are not ours.
            match &u.file {
                Some(_) => prop_assert!(u.reason.starts_with("not cuttable here: "), "{}", u.reason),
                None => prop_assert!(u.reason.contains("is outside the project"), "{}", u.reason),
            }
        }
        if !cuttable {
            return Ok(());
        }

        s.verify(&mut sug, 1, |copy| Ok(check(py, copy, "gen").outcome())).unwrap();
        prop_assert_eq!(sug.verification, suggest::Verification::Verified, "{:?}\n{}", chain, sug);
        let cut = sug.cut.as_ref().unwrap();
        let copy = s.patched_copy(cut).unwrap();
        let module = format!("gen.m{}", index_of(&cut.file));
        let functions: Vec<String> = cut.functions.iter().map(|f| f.name.clone()).collect();
        let out = python_code(py, copy.root(), &exercise(&module, cut.kind, &cut.names, &functions));
        let reaches_torch = matches!(cut.kind, CutKind::MoveIntoFunctions | CutKind::ModuleGetattr);
        prop_assert_eq!(out.trim(), format!("False {}", if reaches_torch { "True" } else { "False" }),
            "{:?}\n{}", chain, sug);
    }
}

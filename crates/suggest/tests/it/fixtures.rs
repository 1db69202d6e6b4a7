//! One test per fixture project of `tests/fixtures/suggest`: the check's
//! real violation, the suggestion (snapshot: the offered cut, its diff, the
//! other candidates, the links that cannot be cut), `git apply` and
//! `patch -p1` on the diff, verification on a patched copy, and the worker
//! on that copy: start-up without torch, a `load` request still with it.

use std::path::Path;

use suggest::{CutKind, Suggester, Suggestion, Verification};

use crate::support::{check, project, python, python_code, run_worker, tools_accept, violation};

const LOAD: &str = r#"{"op": "load", "model": "m"}"#;

fn snapshot(name: &str, s: &Suggestion) {
    insta::with_settings!({
        filters => vec![(r"Python \d+\.\d+\.\d+\w*", "Python [version]")],
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_snapshot!(name, s.to_string());
    });
}

/// Suggests, checks the diff with the tools, verifies on a copy, and
/// returns the verified suggestion.
fn suggest_and_verify(root: &Path, worker: &str) -> (Suggester, Suggestion) {
    let py = python();
    let v = violation(py, root, worker);
    let s = Suggester::new(root, py).unwrap();
    let mut sug = s.suggest(&v).unwrap();
    for cut in sug.cuts() {
        tools_accept(root, &cut.diff);
    }
    s.verify(&mut sug, 3, |copy| Ok(check(py, copy, worker).outcome()))
        .unwrap();
    assert_eq!(sug.verification, Verification::Verified, "{sug}");
    assert!(sug.rejections.is_empty(), "{sug}");
    (s, sug)
}

/// On the patched copy: ready without torch, and a load request imports it.
fn still_loads(s: &Suggester, sug: &Suggestion, worker: &str, model: &str) {
    let copy = s.patched_copy(sug.cut.as_ref().unwrap()).unwrap();
    let run = run_worker(python(), copy.root(), worker, &[LOAD]);
    assert_eq!(run.handshake_error, None);
    let reply = &run.replies[1]["response"];
    assert_eq!(reply["model"], model, "{:?}", run.replies);
    assert_eq!(reply["torch_loaded"], true, "{:?}", run.replies);
}

#[test]
fn seed_worker_the_loader_import_moves_into_load() {
    let root = project("seed");
    let v = violation(python(), &root, "seedworker");
    assert_eq!(
        v.chain,
        [
            "seedworker.loader",
            "seedworker.models",
            "seedworker.models.ner",
            "torch"
        ]
    );
    let (s, sug) = suggest_and_verify(&root, "seedworker");
    let cut = sug.cut.as_ref().unwrap();
    assert_eq!(
        (cut.file.as_str(), cut.line, cut.kind),
        ("seedworker/loader.py", 3, CutKind::MoveIntoBlocks)
    );
    assert_eq!(cut.functions.len(), 1);
    assert_eq!(
        (cut.functions[0].name.as_str(), cut.functions[0].line),
        ("load", 8)
    );
    // Only a model not loaded yet reads it: the import goes into that
    // branch, before the line that reads it.
    let block = &cut.functions[0].blocks[0];
    assert_eq!(block.line, 11, "{sug}");
    assert_eq!(
        block.block.as_deref(),
        Some("the `if name not in _loaded:` block (line 10)")
    );
    snapshot("seed", &sug);
    // The JSON the check's `--format json` carries.
    insta::with_settings!({prepend_module_to_snapshot => false}, {
        insta::assert_json_snapshot!("seed_json", sug, {".python" => "[version]"});
    });
    still_loads(&s, &sug, "seedworker", "NerModel");
    let copy = s.patched_copy(cut).unwrap();
    let out = python_code(
        python(),
        copy.root(),
        "import sys\nimport seedworker.loader as l\nprint('torch' in sys.modules)\n\
         l.load('x')\nprint('torch' in sys.modules)",
    );
    assert_eq!(out, "False\nTrue\n");
}

#[test]
fn base_class_link_is_not_cuttable_so_the_service_import_moves() {
    let root = project("basemodel");
    let (s, sug) = suggest_and_verify(&root, "bmworker");
    let cut = sug.cut.as_ref().unwrap();
    assert_eq!(
        (cut.file.as_str(), cut.kind),
        ("bmworker/service.py", CutKind::MoveIntoBlocks)
    );
    // `load` reads it only when the model is not loaded yet: the import
    // goes into that branch, `describe`'s read stays at its top.
    assert_eq!(cut.functions[0].blocks[0].line, 12, "{sug}");
    assert!(cut.functions[1].blocks.is_empty(), "{sug}");
    let names: Vec<&str> = cut.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["Service.load", "Service.describe"]);
    let model = sug
        .not_cuttable
        .iter()
        .find(|u| u.file.as_deref() == Some("bmworker/model.py"))
        .expect("the model's torch import is listed as not cuttable");
    assert!(
        model
            .reason
            .contains("`torch` is a base class of `Classifier`"),
        "{}",
        model.reason
    );
    snapshot("basemodel", &sug);
    still_loads(&s, &sug, "bmworker", "Classifier");
}

#[test]
fn annotation_only_use_goes_under_type_checking() {
    let root = project("annotations");
    let (s, sug) = suggest_and_verify(&root, "annworker");
    let cut = sug.cut.as_ref().unwrap();
    assert_eq!(
        (cut.file.as_str(), cut.line, cut.kind),
        ("annworker/pipeline.py", 3, CutKind::TypeChecking)
    );
    // 3.14 and newer defer annotations: no __future__ import there.
    let deferred = python_code(
        python(),
        &root,
        "import sys; print(sys.version_info >= (3, 14))",
    );
    assert_eq!(cut.future_annotations, deferred.trim() == "False");
    snapshot("annotations", &sug);
    still_loads(&s, &sug, "annworker", "Batch");
    let copy = s.patched_copy(cut).unwrap();
    let out = python_code(
        python(),
        copy.root(),
        "import sys\nimport annworker.pipeline as p\nprint('torch' in sys.modules)\n\
         print(p.scores(p.to_tensor([1, 2])))",
    );
    assert_eq!(out, "False\n[1.0, 2.0]\n");
    assert!(
        cut.notes
            .iter()
            .any(|n| n.contains("typing.get_type_hints")),
        "the cut warns about run-time annotation readers: {:?}",
        cut.notes
    );
}

#[test]
fn reexport_used_through_the_package_gets_a_module_getattr() {
    let root = project("reexport");
    let (s, sug) = suggest_and_verify(&root, "rxworker");
    let cut = sug.cut.as_ref().unwrap();
    assert_eq!(
        (cut.file.as_str(), cut.line, cut.kind),
        ("rxworker/models/__init__.py", 4, CutKind::ModuleGetattr)
    );
    assert_eq!(cut.users.len(), 1);
    assert_eq!(
        (cut.users[0].file.as_str(), cut.users[0].line),
        ("rxworker/pipeline.py", 3)
    );
    snapshot("reexport", &sug);
    still_loads(&s, &sug, "rxworker", "Tagger");
    let copy = s.patched_copy(cut).unwrap();
    let out = python_code(
        python(),
        copy.root(),
        "import sys\nimport rxworker.models as m\nprint('torch' in sys.modules)\n\
         print('Tagger' in dir(m), m.__all__)\nprint('torch' in sys.modules)\n\
         from rxworker.models import *\nprint(Tagger.__name__, 'torch' in sys.modules)\n\
         from rxworker.models import Tagger as T\nprint(T is m.Tagger)\n\
         try:\n    m.Nope\nexcept AttributeError as e:\n    print(e)",
    );
    assert_eq!(
        out,
        "False\nTrue ['DEFAULT_MODEL', 'Tagger']\nFalse\nTagger True\nTrue\n\
         module 'rxworker.models' has no attribute 'Nope'\n"
    );
}

/// The `lazy` rewrite, as a Python 3.15 target gets it. Classified here by
/// this suite's interpreter told to assume 3.15 (the rewrite itself does not
/// depend on the grammar that reads the rest of the file); the real 3.15 run
/// is the next test.
#[test]
fn python_3_15_target_gets_a_lazy_from_import() {
    let root = project("lazy315");
    let v = violation(python(), &root, "lzworker");
    let s = Suggester::new(&root, python())
        .unwrap()
        .assume_version([3, 15, 0]);
    let sug = s.suggest(&v).unwrap();
    let cut = sug.cut.as_ref().unwrap();
    assert_eq!(
        (cut.file.as_str(), cut.line, cut.kind),
        ("lzworker/models/__init__.py", 3, CutKind::LazyImport)
    );
    tools_accept(&root, &cut.diff);
    insta::with_settings!({prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("lazy315_diff", cut.diff);
    });
    // Without 3.15 the same link gets the module __getattr__ instead.
    let plain = Suggester::new(&root, python())
        .unwrap()
        .suggest(&v)
        .unwrap();
    assert_eq!(plain.cut.as_ref().unwrap().kind, CutKind::ModuleGetattr);
}

#[test]
fn python_3_15_lazy_import_end_to_end() {
    let Some(py315) = crate::support::required(
        15,
        "the lazy rewrite end to end (only checked by assuming 3.15 in \
         python_3_15_target_gets_a_lazy_from_import)",
    ) else {
        return;
    };
    let root = project("lazy315");
    let v = violation(&py315, &root, "lzworker");
    let s = Suggester::new(&root, &py315).unwrap();
    let mut sug = s.suggest(&v).unwrap();
    let cut = sug.cut.as_ref().unwrap();
    assert_eq!(cut.kind, CutKind::LazyImport, "{sug}");
    tools_accept(&root, &cut.diff);
    s.verify(&mut sug, 3, |copy| {
        Ok(check(&py315, copy, "lzworker").outcome())
    })
    .unwrap();
    assert_eq!(sug.verification, Verification::Verified, "{sug}");
    let copy = s.patched_copy(sug.cut.as_ref().unwrap()).unwrap();
    let run = run_worker(&py315, copy.root(), "lzworker", &[LOAD]);
    assert_eq!(run.handshake_error, None);
    assert_eq!(run.replies[1]["response"]["torch_loaded"], true);
}

#[test]
fn fix_writes_the_cut_and_the_check_then_passes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("seed");
    crate::support::copy_tree(&project("seed"), &root);
    let v = violation(python(), &root, "seedworker");
    let s = Suggester::new(&root, python()).unwrap();
    let sug = s.suggest(&v).unwrap();
    let cut = sug.cut.as_ref().unwrap();
    let written = s.apply(cut).unwrap();
    assert_eq!(written, [s.root().join("seedworker/loader.py")]);
    let run = check(python(), &root, "seedworker");
    assert_eq!(run.handshake_error, None);
    assert!(run.violations.is_empty(), "{:#?}", run.violations);
    // A second apply finds the file changed and refuses.
    let err = s.apply(cut).unwrap_err();
    assert!(
        err.to_string().contains("changed since the suggestion"),
        "{err}"
    );
}

//! Replays the committed fuzz corpus and every regression input through
//! the fuzz targets' entry points (`runtrace_fuzz::run`), on stable Rust,
//! in whatever profile the tests run in (debug in CI: overflow checks on).
//! `fuzz/corpus/TARGET/*` go to that target; `fuzz/regressions/TARGET/*`
//! too, and `fuzz/regressions/all/*` to every target.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.retain(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'));
    v.sort();
    v
}

fn replay(target: &str, files: &[PathBuf]) {
    for f in files {
        let data = std::fs::read(f).unwrap();
        eprintln!("{target}: {}", f.display());
        runtrace_fuzz::run(target, &data);
    }
}

#[test]
fn corpus_and_regressions_replay_without_panics() {
    let root = fuzz_dir();
    let all = files_in(&root.join("regressions/all"));
    let mut total = 0;
    for t in runtrace_fuzz::TARGETS {
        let corpus = files_in(&root.join("corpus").join(t));
        assert!(!corpus.is_empty(), "fuzz/corpus/{t} is empty: seed it");
        let regressions = files_in(&root.join("regressions").join(t));
        replay(t, &corpus);
        replay(t, &regressions);
        replay(t, &all);
        total += corpus.len() + regressions.len() + all.len();
    }
    eprintln!("replayed {total} inputs");
}

//! docs/architecture.md names every part of the workspace as it is.
//!
//! The page drifted twice (crates and modules missing, benches unnamed),
//! so this test reads the layout from the code and fails on anything the
//! page does not mention: every workspace member, every module its
//! `lib.rs`/`main.rs` declares (inside that crate's own paragraph), every
//! bench and every example. It checks mentions, not prose: whether the
//! sentence about a module is still right stays a reviewer's job.

use std::fs;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace members under `crates/` (from the root Cargo.toml's
/// `members` list, the one place they are listed).
fn members() -> Vec<String> {
    let toml = fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let start = toml
        .find("members = [")
        .expect("Cargo.toml has a members list");
    let end = start + toml[start..].find(']').unwrap();
    toml[start..end]
        .lines()
        .filter_map(|l| l.trim().trim_end_matches(',').strip_prefix("\"crates/"))
        .map(|l| l.trim_end_matches('"').to_string())
        .collect()
}

/// The modules a crate root declares (`mod x;`, `pub mod x;`,
/// `pub(crate) mod x;`), not inline test modules.
fn modules(crate_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for f in ["src/lib.rs", "src/main.rs"] {
        let Ok(text) = fs::read_to_string(crate_dir.join(f)) else {
            continue;
        };
        for line in text.lines() {
            let l = line.trim_start();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            if let Some(name) = l.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                out.push(name.trim().to_string());
            }
        }
    }
    out
}

/// The paragraph of the page about `crates/<name>`: from its bold heading
/// to the next bold heading.
fn section<'a>(doc: &'a str, name: &str) -> Option<&'a str> {
    let head = format!("**`crates/{name}`**");
    let start = doc.find(&head)?;
    let rest = &doc[start + head.len()..];
    let end = rest.find("\n**`").unwrap_or(rest.len());
    Some(&rest[..end])
}

fn files_in(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root().join(dir))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "rs").then(|| p.file_stem()?.to_str().map(str::to_string))?
        })
        .collect();
    v.sort();
    v
}

/// The CLI is argument definitions and calls into the libraries (issue 33:
/// at most 1,200 lines); logic that grows there belongs in a library.
#[test]
fn the_cli_stays_thin() {
    let dir = root().join("crates/runtrace-cli/src");
    let lines: usize = files_in("crates/runtrace-cli/src")
        .iter()
        .map(|f| {
            fs::read_to_string(dir.join(format!("{f}.rs")))
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    assert!(
        lines <= 1_200,
        "crates/runtrace-cli/src holds {lines} lines (at most 1,200): move logic into a library crate"
    );
}

#[test]
fn architecture_page_names_every_crate_module_bench_and_example() {
    let doc = fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let mut missing = Vec::new();
    let crates = members();
    assert!(crates.len() >= 15, "members parsed: {crates:?}");
    for c in &crates {
        let Some(sec) = section(&doc, c) else {
            missing.push(format!(
                "crate crates/{c} (a paragraph opening **`crates/{c}`**)"
            ));
            continue;
        };
        for m in modules(&root().join("crates").join(c)) {
            if !sec.contains(&format!("`{m}`")) && !sec.contains(&format!("`{m}/`")) {
                missing.push(format!("module `{m}` in the paragraph of crates/{c}"));
            }
        }
    }
    for b in files_in("benches") {
        if !doc.contains(&format!("`{b}`")) {
            missing.push(format!("bench `{b}` (benches/{b}.rs)"));
        }
    }
    for e in files_in("examples") {
        if !doc.contains(&format!("`{e}.rs`")) {
            missing.push(format!("example `{e}.rs`"));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not mention:\n  {}",
        missing.join("\n  ")
    );
}

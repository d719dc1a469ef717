//! No two modules of a crate import each other, directly or around a
//! circle (docs/architecture.md, "Rules"). Circles crept back in twice
//! after the re-layering removed them (the model's pass, lifecycle and
//! spans; the analysis registry, its views and the summary; the runtime
//! engine, its context and the waiting analyses), so this test reads
//! every crate's sources and fails naming each circle and the imports that
//! close it.
//!
//! What counts as an import, read from the text: every `crate::`,
//! `super::` and `self::` path (in `use` lines, braces expanded, and in
//! code), and paths through a child module the file declares (`mod x;`
//! then `x::f()`), each resolved to the deepest module file it names. A
//! module using its own descendants does not count: a parent declares,
//! re-exports and drives its children, while a child may use what its
//! parent defines. Comments and string literals are skipped, and so is a
//! file's `#[cfg(test)] mod tests` (it is the file's own).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every `src/` directory of the workspace: each crate's, and the facade's.
fn source_dirs() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs: Vec<(String, PathBuf)> = fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into(),
                p.join("src"),
            )
        })
        .collect();
    dirs.push(("runtrace".into(), root.join("src")));
    dirs.sort();
    dirs
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module a file is: `a/b.rs` and `a/b/mod.rs` are `a::b`, `lib.rs` and
/// `main.rs` the crate's root.
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut m: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(m.last().map(String::as_str), Some("lib" | "main" | "mod")) {
        m.pop();
    }
    m
}

/// `text` without comments, string and char literals' contents, and the
/// file's own test module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The paths a `use` tree names, braces expanded: `a::{b, c::{d, e}}` is
/// `a::b`, `a::c::d`, `a::c::e`.
fn expand_use(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let prefix = [prefix, head]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("::");
        let (mut depth, mut start) = (0, 0);
        for (i, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&prefix, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand_use(&prefix, &inner[start..], out);
    } else if !tree.is_empty() {
        let path = tree.split(" as ").next().unwrap().trim();
        out.push(if prefix.is_empty() {
            path.to_string()
        } else {
            format!("{prefix}::{path}")
        });
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path of `code` that may name a module of the crate.
fn paths_in(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        rest = &rest[i + 4..];
        if before.is_some_and(is_ident) {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        expand_use("", &rest[..end], &mut paths);
    }
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if is_ident(chars[i]) && (i == 0 || !is_ident(chars[i - 1])) {
            let start = i;
            while i < chars.len()
                && (is_ident(chars[i]) || (chars[i] == ':' && chars.get(i + 1) == Some(&':')))
            {
                i += if chars[i] == ':' { 2 } else { 1 };
            }
            let p: String = chars[start..i].iter().collect();
            // `a::{...}` ends in `::`: a `use` group, read above.
            if p.contains("::") && !p.ends_with("::") {
                paths.push(p);
            }
        } else {
            i += 1;
        }
    }
    paths
}

/// The modules `file` (module `m`) imports, other than itself and its
/// descendants.
fn imports(m: &Module, code: &str, modules: &BTreeSet<Module>) -> BTreeSet<Module> {
    let children: BTreeSet<String> = code
        .split("mod ")
        .skip(1)
        .filter_map(|s| {
            let name: String = s.chars().take_while(|&c| is_ident(c)).collect();
            s[name.len()..]
                .trim_start()
                .starts_with(';')
                .then_some(name)
        })
        .collect();
    let mut out = BTreeSet::new();
    for p in paths_in(code) {
        let segs: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
        let Some(&first) = segs.first() else { continue };
        let (mut base, rest): (Module, &[&str]) = match first {
            "crate" => (Vec::new(), &segs[1..]),
            "super" | "self" => (m.clone(), &segs[..]),
            c if children.contains(c) => (m.clone(), &segs[..]),
            _ => continue,
        };
        let mut rest = rest;
        while let Some(&s) = rest.first() {
            match s {
                "super" => {
                    base.pop();
                }
                "self" => {}
                _ => break,
            }
            rest = &rest[1..];
        }
        let mut best = modules.contains(&base).then(|| base.clone());
        for s in rest {
            base.push(s.to_string());
            if !modules.contains(&base) {
                break;
            }
            best = Some(base.clone());
        }
        if let Some(b) = best {
            if !b.starts_with(m) {
                out.insert(b);
            }
        }
    }
    out
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct S<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, (usize, usize)>,
        stack: Vec<&'a Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut S<'a>, v: &'a Module) {
        s.index.insert(v, (s.next, s.next));
        s.next += 1;
        s.stack.push(v);
        for w in &s.edges[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.index[v].1.min(s.index[w].1);
                s.index.get_mut(v).unwrap().1 = low;
            } else if s.stack.contains(&w) {
                let low = s.index[v].1.min(s.index[w].0);
                s.index.get_mut(v).unwrap().1 = low;
            }
        }
        if s.index[v].0 == s.index[v].1 {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = S {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "(crate root)".into()
    } else {
        m.join("::")
    }
}

#[test]
fn no_two_modules_import_each_other() {
    let mut found = Vec::new();
    for (krate, src) in source_dirs() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let code: BTreeMap<Module, String> = files
            .iter()
            .map(|f| (module_of(&src, f), code_of(&fs::read_to_string(f).unwrap())))
            .collect();
        let modules: BTreeSet<Module> = code.keys().cloned().collect();
        let edges: BTreeMap<Module, BTreeSet<Module>> = code
            .iter()
            .map(|(m, c)| (m.clone(), imports(m, c, &modules)))
            .collect();
        for comp in circles(&edges) {
            let ties: Vec<String> = comp
                .iter()
                .flat_map(|a| {
                    edges[a]
                        .iter()
                        .filter(|b| comp.contains(b))
                        .map(move |b| format!("{} -> {}", name(a), name(b)))
                })
                .collect();
            found.push(format!("{krate}: {}", ties.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules importing each other (move what both need below both):\n{}",
        found.join("\n")
    );
}

/// The reader above is what the test stands on: it must see a circle that
/// is there, through `use` braces, `super::` and a child's path.
#[test]
fn the_reader_sees_a_planted_circle() {
    let modules: BTreeSet<Module> = [
        vec![],
        vec!["a".into()],
        vec!["b".into()],
        vec!["b".into(), "c".into()],
    ]
    .into_iter()
    .collect();
    let a = code_of("use crate::{b::{c::X, Y}};\n// use crate::nothing;\n");
    let c = code_of("use super::super::a::Z; fn f() { let s = \"crate::b\"; }\n");
    let b = code_of("mod c;\npub fn g() { c::h() }\n");
    let mut edges = BTreeMap::new();
    edges.insert(vec![], BTreeSet::new());
    edges.insert(
        vec!["a".to_string()],
        imports(&vec!["a".into()], &a, &modules),
    );
    edges.insert(
        vec!["b".to_string()],
        imports(&vec!["b".into()], &b, &modules),
    );
    edges.insert(
        vec!["b".to_string(), "c".to_string()],
        imports(&vec!["b".into(), "c".into()], &c, &modules),
    );
    assert_eq!(
        edges[&vec!["a".to_string()]],
        [
            vec!["b".to_string()],
            vec!["b".to_string(), "c".to_string()]
        ]
        .into_iter()
        .collect()
    );
    // b -> b::c is a parent using its child: not counted.
    assert!(edges[&vec!["b".to_string()]].is_empty());
    let found = circles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 2);
}

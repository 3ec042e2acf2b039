//! The internal imports of `redlock-core` run one way (the engine's state
//! machines at the bottom, the blocking shell on top) and the simulator's
//! files import each other without a circle, as docs/design.md says. A
//! directory module (`engine/`, `sim/client/`, ...) counts as one file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module name -> the modules it imports, for the files under `dir`.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is in the workspace")
        .to_path_buf()
}

/// The source without comments and without `#[cfg(test)]` modules at the
/// end (tests may import anything).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("readable source");
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every identifier that follows `prefix` in `src`, also inside braces:
/// `crate::a`, `crate::{a, b::c}` give `a`, `b`.
fn names_after(src: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(at) = rest.find(prefix) {
        rest = &rest[at + prefix.len()..];
        if let Some(inner) = rest.strip_prefix('{') {
            let end = inner.find('}').unwrap_or(inner.len());
            // Nested braces are rare in our imports; their first names are
            // enough to see the module.
            for item in inner[..end].split(',') {
                let first = item.trim().split("::").next().unwrap_or("").trim();
                let first = first.trim_start_matches('{').trim();
                if !first.is_empty() {
                    out.push(first.to_owned());
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// The crate root's re-exports: `pub use module::{A, B};` maps `A` and `B`
/// to `module`.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(body) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = body.split_once("::") else {
            continue;
        };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.trim().rsplit("::").next().unwrap_or("").trim();
            if !name.is_empty() {
                map.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    map
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("readable dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The module (top-level file or directory) a file under `root` belongs to.
fn module_of(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).expect("under root");
    let first = rel.components().next().expect("a component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_owned()
}

/// While the core's files move into folders by layer, each file of a layer
/// folder keeps the module name the crate root still gives it.
fn core_module_of(root: &Path, file: &Path) -> String {
    let folder = module_of(root, file);
    if matches!(folder.as_str(), "engine" | "model")
        || !file.ends_with("mod.rs") && file.parent() == Some(root)
    {
        return folder;
    }
    let stem = file
        .file_stem()
        .expect("a file")
        .to_string_lossy()
        .into_owned();
    match stem.as_str() {
        "mod" => folder,
        "context" => "shared".into(),
        "lines" => "line".into(),
        "redlock" => "driver".into(),
        "verdict" => "round".into(),
        _ => stem,
    }
}

/// The strongly connected components with more than one module (Tarjan).
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

fn core_graph() -> Graph {
    let root = workspace().join("redlock-core/src");
    let names = reexports(&code(&root.join("lib.rs")));
    let mut graph = Graph::new();
    for file in rust_files(&root) {
        if file.ends_with("lib.rs") {
            continue;
        }
        let module = core_module_of(&root, &file);
        let src = code(&file);
        let edges = graph.entry(module.clone()).or_default();
        for name in names_after(&src, "crate::") {
            let target = names.get(&name).cloned().unwrap_or(name);
            if target != module {
                edges.insert(target);
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for edges in graph.values_mut() {
        edges.retain(|m| modules.contains(m));
    }
    graph
}

fn sim_graph() -> Graph {
    let root = workspace().join("redlock-mock/src/sim");
    let mut graph = Graph::new();
    for file in rust_files(&root) {
        let module = module_of(&root, &file);
        if module == "mod" {
            continue; // sim/mod.rs only declares and re-exports
        }
        let nested = file.parent() != Some(root.as_path());
        let src = code(&file);
        let mut targets = names_after(&src, "crate::sim::");
        // In sim/x.rs `super::` is sim; in sim/dir/y.rs it is dir itself
        // and `super::super::` is sim.
        if nested {
            targets.extend(names_after(&src, "super::super::"));
        } else {
            targets.extend(names_after(&src, "super::"));
        }
        let edges = graph.entry(module.clone()).or_default();
        edges.extend(targets.into_iter().filter(|t| *t != module));
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for edges in graph.values_mut() {
        edges.retain(|m| modules.contains(m));
    }
    graph
}

#[test]
fn core_imports_run_one_way() {
    let graph = core_graph();
    // The checker itself sees the known layering: the shell imports the
    // engine, never the other way round.
    assert!(graph["shared"].contains("engine"), "{graph:#?}");
    assert!(!graph["engine"].contains("shared"), "{graph:#?}");
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "circles of files in redlock-core: {found:?}"
    );
}

#[test]
fn simulator_files_import_without_circles() {
    let graph = sim_graph();
    assert!(graph.contains_key("client") && graph.contains_key("world"));
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "circles of files in the simulator: {found:?}"
    );
}

#[test]
fn the_checker_finds_a_circle() {
    let mut graph = Graph::new();
    graph.insert("a".into(), ["b".into()].into());
    graph.insert("b".into(), ["c".into()].into());
    graph.insert("c".into(), ["a".into()].into());
    graph.insert("d".into(), ["a".into()].into());
    assert_eq!(circles(&graph).len(), 1);
    assert_eq!(
        names_after("use crate::{engine::Acquire, Claim};", "crate::"),
        ["engine", "Claim"]
    );
}

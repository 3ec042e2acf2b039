//! The folders of `redlock-core` are its layers and import only the layers
//! below them (the pure decisions at the bottom, the public API on top);
//! its files, and the simulator's, import each other without a circle, as
//! docs/design.md says.

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

/// The layer folders of `redlock-core/src`, lowest first: a folder imports
/// only folders listed before it (docs/design.md draws the same order).
const LAYERS: [&str; 8] = [
    "decide", "types", "events", "backend", "model", "engine", "runtime", "api",
];

/// The crate root's or a folder's re-exports: `pub use a::b::{C, D};` and
/// `pub(crate) use a::C;` map `C` (and `D`) to the path they come from,
/// relative to that module (`["a", "b"]`).
fn reexports(module: &str) -> BTreeMap<String, Vec<String>> {
    let mut map = BTreeMap::new();
    for statement in module.split(';') {
        let statement = statement.trim();
        let Some(body) = statement
            .strip_prefix("pub use ")
            .or_else(|| statement.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let (path, items) = match body.split_once('{') {
            Some((path, items)) => (path.trim_end_matches("::"), items.trim_end_matches('}')),
            None => match body.rsplit_once("::") {
                Some((path, item)) => (path, item),
                None => continue,
            },
        };
        let path: Vec<String> = path.split("::").map(|p| p.trim().to_owned()).collect();
        for item in items.split(',') {
            let name = item.trim().rsplit("::").next().unwrap_or("").trim();
            if !name.is_empty() {
                map.insert(name.to_owned(), path.clone());
            }
        }
    }
    map
}

/// A file of the core as `folder/file` (`folder/mod` for a folder's
/// `mod.rs`; `folder` alone for a file directly under `src`).
fn file_id(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).expect("under root");
    rel.with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Which file of the core a path from the crate root (`["runtime",
/// "context", "Shared"]`, `["Claim"]`) names: the crate root's and the
/// folders' re-exports followed to the file that defines the item.
fn resolve(root: &Path, path: &[String]) -> Option<String> {
    let first = path.first()?;
    if !root.join(first).is_dir() {
        let lib = reexports(&code(&root.join("lib.rs")));
        let target = lib.get(first)?;
        let mut full = target.clone();
        full.push(first.clone());
        return (full.len() > 1 && full[0] != *first)
            .then(|| resolve(root, &full))
            .flatten();
    }
    let folder = root.join(first);
    let Some(second) = path.get(1) else {
        return Some(format!("{first}/mod"));
    };
    if folder.join(format!("{second}.rs")).is_file() || folder.join(second).is_dir() {
        return Some(format!("{first}/{second}"));
    }
    let inner = reexports(&code(&folder.join("mod.rs")));
    match inner.get(second) {
        Some(from) if folder.join(format!("{}.rs", from[0])).is_file() => {
            Some(format!("{first}/{}", from[0]))
        }
        Some(from) if from[0] == "crate" => {
            let mut full = from[1..].to_vec();
            full.push(second.clone());
            resolve(root, &full)
        }
        _ => Some(format!("{first}/mod")),
    }
}

/// File -> the files of the core it imports (through `crate::` paths;
/// `super::` stays inside a folder).
fn core_files() -> Graph {
    let root = workspace().join("redlock-core/src");
    let mut graph = Graph::new();
    for file in rust_files(&root) {
        let id = file_id(&root, &file);
        if id == "lib" {
            continue;
        }
        let src = code(&file);
        let mut targets = BTreeSet::new();
        for path in paths_after(&src, "crate::") {
            if let Some(target) = resolve(&root, &path) {
                if target != id {
                    targets.insert(target);
                }
            }
        }
        graph.insert(id, targets);
    }
    graph
}

/// Every path that follows `prefix` in `src`, braces expanded one level:
/// `crate::{a::B, c}` gives `["a", "B"]` and `["c"]`.
fn paths_after(src: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = src;
    let word = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|p| {
                p.trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|p| !p.is_empty())
            .collect()
    };
    while let Some(at) = rest.find(prefix) {
        rest = &rest[at + prefix.len()..];
        if let Some(inner) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = inner
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(inner.len(), |(i, _)| i);
            let mut depth = 0;
            let mut item = String::new();
            for c in inner[..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let path = word(&item);
                        if !path.is_empty() {
                            out.push(path);
                        }
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let path = word(&rest[..end]);
            if !path.is_empty() {
                out.push(path);
            }
        }
    }
    out
}

/// Folder -> the folders its files import.
fn core_folders(files: &Graph) -> Graph {
    let folder = |id: &str| id.split('/').next().unwrap_or(id).to_owned();
    let mut graph = Graph::new();
    for (file, targets) in files {
        let from = folder(file);
        let edges = graph.entry(from.clone()).or_default();
        edges.extend(targets.iter().map(|t| folder(t)).filter(|t| *t != from));
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
fn core_folders_import_only_lower_layers() {
    let files = core_files();
    let folders = core_folders(&files);
    let rank = |f: &str| LAYERS.iter().position(|l| *l == f);
    // Every folder is a layer, and the checker sees the known imports: the
    // runtime carries the engine, the engine decides with `decide`.
    for folder in folders.keys() {
        assert!(
            rank(folder).is_some(),
            "{folder} is not a layer of {LAYERS:?}"
        );
    }
    assert!(folders["runtime"].contains("engine"), "{folders:#?}");
    assert!(folders["engine"].contains("decide"), "{folders:#?}");
    assert!(
        files["runtime/context"].contains("engine/mod"),
        "{files:#?}"
    );
    let wrong: Vec<String> = folders
        .iter()
        .flat_map(|(from, to)| {
            to.iter()
                .filter(|t| rank(t) >= rank(from))
                .map(move |t| format!("{from} imports {t}"))
        })
        .collect();
    assert!(wrong.is_empty(), "imports against the layers: {wrong:?}");
}

#[test]
fn core_files_import_without_circles() {
    // A folder's `mod.rs` and its children may import each other (a
    // directory module keeps its parent/child ties inside); between any
    // other files, no circle.
    let mut files = core_files();
    for (file, targets) in files.iter_mut() {
        let folder = file.split('/').next().unwrap_or_default().to_owned();
        targets.retain(|t| {
            !(t == &format!("{folder}/mod")
                || file.ends_with("/mod") && t.starts_with(&format!("{folder}/")))
        });
    }
    let found = circles(&files);
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
        paths_after("use crate::{engine::{Acquire, Lines}, Claim};", "crate::"),
        [vec!["engine".to_owned()], vec!["Claim".to_owned()]]
    );
    let layered: Graph = [("engine".into(), ["runtime".into()].into())].into();
    let rank = |f: &str| LAYERS.iter().position(|l| *l == f);
    assert!(layered["engine"].iter().any(|t| rank(t) >= rank("engine")));
}

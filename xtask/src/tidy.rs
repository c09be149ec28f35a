//! Repository rules, enforced by plain `#[test]`s (rust-analyzer's tidy): every `.rs` file opens
//! with a `//!` line, non-test code has no
//! stub macros (`todo`, `unimplemented`), no trailing whitespace.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn rust_files() -> Vec<PathBuf> {
        let root = crate::project_root();
        let mut out = Vec::new();
        for top in ["crates", "xtask"] {
            walk(&root.join(top), &mut out);
        }
        out
    }

    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if name == "target" || name.starts_with('.') || name == "bench-go" {
                    continue;
                }
                walk(&path, out);
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }

    /// Is this file test-only code (integration tests, benches, examples, fuzz targets)?
    fn is_test_code(path: &Path) -> bool {
        path.components().any(|c| {
            matches!(c.as_os_str().to_str(), Some("tests" | "benches" | "examples" | "fuzz_targets"))
        })
    }

    #[test]
    fn every_rust_file_starts_with_a_module_doc() {
        let bad: Vec<_> = rust_files()
            .into_iter()
            .filter(|p| {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                !text.starts_with("//!")
            })
            .collect();
        assert!(bad.is_empty(), "files without a leading `//!` line: {bad:#?}");
    }

    #[test]
    fn no_stubs_in_non_test_code() {
        // Built from pieces so this file does not trip its own rule.
        let needles = [concat!("todo", "!("), concat!("unimplemented", "!(")];
        let mut bad = Vec::new();
        for path in rust_files().into_iter().filter(|p| !is_test_code(p)) {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            // Code after a `#[cfg(test)]` module marker is unit-test code.
            let body = text.split("#[cfg(test)]").next().unwrap_or_default();
            for n in needles {
                if body.contains(n) {
                    bad.push(format!("{}: {n}", path.display()));
                }
            }
        }
        assert!(bad.is_empty(), "stubs in non-test code: {bad:#?}");
    }

    #[test]
    fn no_trailing_whitespace() {
        let root = crate::project_root();
        let mut files = rust_files();
        for extra in ["README.md", "Cargo.toml", "deny.toml", "docs", ".github", ".ci"] {
            let p = root.join(extra);
            if p.is_dir() {
                for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                    files.push(e.path());
                }
            } else {
                files.push(p);
            }
        }
        let mut bad = Vec::new();
        for path in files.into_iter().filter(|p| p.is_file()) {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for (i, line) in text.lines().enumerate() {
                if line.ends_with(' ') || line.ends_with('\t') {
                    bad.push(format!("{}:{}", path.display(), i + 1));
                }
            }
        }
        assert!(bad.is_empty(), "trailing whitespace: {bad:#?}");
    }

    #[test]
    fn every_crate_uses_workspace_lints_and_has_a_readme() {
        let root = crate::project_root();
        for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
            let manifest = entry.path().join("Cargo.toml");
            let text = std::fs::read_to_string(&manifest).unwrap();
            assert!(
                text.contains("[lints]\nworkspace = true"),
                "{} lacks `[lints] workspace = true`",
                manifest.display()
            );
            assert!(entry.path().join("README.md").is_file(), "{} has no README.md", entry.path().display());
        }
    }
}

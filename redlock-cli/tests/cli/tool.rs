//! `redlock` as a well-behaved tool: `--version`, shell completions and
//! manual pages, all from the clap definitions the parser uses.

use crate::{finish, redlock, Finished};

/// The subcommands a user may type; `guard` is internal.
const SUBCOMMANDS: [&str; 6] = ["run", "elect", "check", "status", "completions", "man"];

fn redlock_with(args: &[&str]) -> Finished {
    let mut command = redlock();
    command.args(args);
    finish(command)
}

#[test]
fn version_prints_the_cargo_version() {
    for flag in ["--version", "-V"] {
        let out = redlock_with(&[flag]);
        assert_eq!(out.code(), Some(0), "{flag}: {out:?}");
        assert_eq!(
            out.stdout.trim_end(),
            format!("redlock {}", env!("CARGO_PKG_VERSION")),
            "{flag}"
        );
    }
}

#[test]
fn completions_offer_every_subcommand_and_never_the_internal_guard() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = redlock_with(&["completions", shell]);
        assert_eq!(out.code(), Some(0), "{shell}: {out:?}");
        for sub in SUBCOMMANDS {
            assert!(out.stdout.contains(sub), "{shell}: no {sub}");
        }
        // Options of a subcommand, from the same definitions.
        assert!(out.stdout.contains("no-quorum-timeout"), "{shell}");
        assert!(!out.stdout.contains("guard"), "{shell} offers guard");
    }
}

/// What bash completes after `redlock WORDS` (the last word being
/// completed), with the script `redlock completions bash` printed loaded.
fn bash_completes(words: &str) -> Vec<String> {
    let script = redlock_with(&["completions", "bash"]).stdout;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redlock.bash");
    std::fs::write(&path, script).unwrap();
    let line = format!(
        "source {path}; COMP_WORDS=(redlock {words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
         _redlock redlock \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path = path.display()
    );
    let mut bash = std::process::Command::new("bash");
    bash.args(["--norc", "--noprofile", "-c", &line]);
    let out = finish(bash);
    assert_eq!(out.code(), Some(0), "{out:?}");
    let mut words: Vec<String> = out.stdout.lines().map(str::to_owned).collect();
    words.sort();
    words
}

#[test]
fn the_bash_script_completes_subcommands_options_and_shells() {
    assert_eq!(bash_completes("c"), ["check", "completions"]);
    assert_eq!(bash_completes("run --no-q"), ["--no-quorum-timeout"]);
    assert_eq!(
        bash_completes("completions ''"),
        [
            "--help",
            "-h",
            "bash",
            "elvish",
            "fish",
            "powershell",
            "zsh"
        ]
    );
}

/// The checks every page passes: roff from its first line, a `.TH` title
/// of `title` in section 1 before the NAME section.
fn assert_roff_page(page: &str, title: &str) {
    assert!(
        page.starts_with('.'),
        "not roff: {:?}",
        &page[..page.len().min(80)]
    );
    let th = page
        .lines()
        .position(|l| l.starts_with(&format!(".TH {title} 1 ")))
        .unwrap_or_else(|| panic!("no .TH {title} 1: {page}"));
    let name = page.lines().position(|l| l == ".SH NAME").unwrap();
    assert!(th < name, "{page}");
}

#[test]
fn the_man_page_is_roff_and_names_every_subcommand_and_exit_code() {
    let out = redlock_with(&["man"]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    let page = out.stdout;
    assert_roff_page(&page, "REDLOCK");
    for sub in SUBCOMMANDS {
        assert!(page.contains(&format!("redlock\\-{sub}(1)")), "no {sub}");
    }
    assert!(!page.contains("guard"), "{page}");
    // The exit codes of --help, under their own heading.
    let exit = page.find(".SH \"EXIT STATUS\"").expect("EXIT STATUS");
    for code in ["64", "69", "70", "74", "75", "79"] {
        assert!(page[exit..].contains(&format!("\n  {code} ")), "{code}");
    }
    assert!(page.contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn man_dir_writes_one_page_per_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("share/man/man1");
    let out = redlock_with(&["man", "--dir", man1.to_str().unwrap()]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    let mut pages = vec![("redlock.1".to_owned(), "REDLOCK".to_owned())];
    pages.extend(SUBCOMMANDS.map(|sub| {
        (
            format!("redlock-{sub}.1"),
            format!("REDLOCK-{}", sub.to_uppercase()),
        )
    }));
    let mut written: Vec<String> = std::fs::read_dir(&man1)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    written.sort();
    let mut expected: Vec<String> = pages.iter().map(|(file, _)| file.clone()).collect();
    expected.sort();
    assert_eq!(written, expected);
    for (file, title) in &pages {
        let path = man1.join(file);
        assert!(out.stdout.contains(&path.display().to_string()), "{out:?}");
        assert_roff_page(&std::fs::read_to_string(&path).unwrap(), title);
    }
    let run = std::fs::read_to_string(man1.join("redlock-run.1")).unwrap();
    assert!(run.contains("no\\-quorum\\-timeout"), "{run}");
    assert!(run.contains(".SH \"EXIT STATUS\""), "{run}");

    // A directory that cannot be made: EX_IOERR, naming it.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = redlock_with(&["man", "--dir", file.join("man1").to_str().unwrap()]);
    assert_eq!(out.code(), Some(74), "{out:?}");
    assert!(out.stderr.contains("a-file"), "{out:?}");
}

#[test]
fn an_unknown_or_missing_shell_is_a_usage_error_naming_the_shells() {
    let out = redlock_with(&["completions", "tcsh"]);
    assert_eq!(out.code(), Some(64), "{out:?}");
    assert!(out.stderr.contains("invalid value 'tcsh'"), "{out:?}");
    assert!(
        out.stderr
            .contains("[possible values: bash, elvish, fish, powershell, zsh]"),
        "{out:?}"
    );
    assert!(out.stdout.is_empty(), "{out:?}");
    let out = redlock_with(&["completions"]);
    assert_eq!(out.code(), Some(64), "{out:?}");
    assert!(out.stderr.contains("<SHELL>"), "{out:?}");
}

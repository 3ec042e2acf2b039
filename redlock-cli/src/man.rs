//! `redlock man`: the manual pages, from the same clap definitions as the
//! parser. redlock(1) lists the subcommands; each visible one has its own
//! page (redlock-run(1) ...), as git's and cargo's do.

use std::io;

use clap::CommandFactory as _;
use clap_mangen::roff::{roman, Roff};
use clap_mangen::Man;

use crate::cli::{Cli, ManArgs};
use crate::exit::{Exit, IO_ERROR};

pub(crate) fn man(args: &ManArgs) -> Result<u8, Exit> {
    let mut cli = Cli::command().disable_help_subcommand(true);
    // Gives each subcommand its display name (`redlock-run`).
    cli.build();
    let Some(dir) = &args.dir else {
        return crate::output::to_stdout(&page(&cli));
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| Exit::new(IO_ERROR, format!("creating {}: {e}", dir.display())))?;
    let pages = std::iter::once(&cli).chain(cli.get_subcommands().filter(|s| !s.is_hide_set()));
    for command in pages {
        let path = dir.join(format!("{}.1", name(command)));
        crate::output::to_file(&path, &page(command))?;
        crate::tell!("{}", path.display());
    }
    Ok(0)
}

/// `redlock`, `redlock-run` ...
fn name(command: &clap::Command) -> &str {
    command
        .get_display_name()
        .unwrap_or_else(|| command.get_name())
}

/// The roff page of `command`: clap_mangen's sections, with the text after
/// `--help` (the exit codes) as EXIT STATUS instead of EXTRA.
fn page(command: &clap::Command) -> Vec<u8> {
    let man = Man::new(command.clone())
        .title(name(command).to_uppercase())
        .source(format!("redlock {}", env!("CARGO_PKG_VERSION")));
    let mut out = Vec::new();
    // Writing into a Vec<u8> cannot fail.
    let _ = render(command, &man, &mut out);
    out
}

fn render(command: &clap::Command, man: &Man, out: &mut Vec<u8>) -> io::Result<()> {
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    if command.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(out)?;
    }
    if command.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(out)?;
    }
    if let Some(after) = command.get_after_help() {
        let text = after.to_string();
        let text = text.strip_prefix("Exit codes:\n").unwrap_or(&text);
        let mut roff = Roff::new();
        roff.control("SH", ["EXIT STATUS"]).control("nf", []);
        for line in text.lines() {
            roff.text([roman(line)]);
        }
        roff.control("fi", []);
        roff.to_writer(out)?;
    }
    let mut see_also = Roff::new();
    see_also.control("SH", ["SEE ALSO"]);
    if command.get_name() == "redlock" {
        see_also.text([roman(
            "docs/cli.md and docs/operations.md in the redlock sources.",
        )]);
    } else {
        see_also.text([roman("redlock(1)")]);
    }
    see_also.to_writer(out)?;
    if command.get_version().is_some() {
        man.render_version_section(out)?;
    }
    Ok(())
}

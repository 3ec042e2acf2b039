//! `redlock`: run a command under a distributed lock (flock for a fleet),
//! check a Redlock deployment, show who holds a lock. See docs/cli.md.

// A command-line tool talks to its user on stdout and stderr.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool reports on stdout and stderr"
)]

mod check;
mod cli;
mod completions;
mod exit;
mod group;
mod guard;
mod man;
mod output;
mod run;
mod servers;
mod signals;
mod status;
mod waiting;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, GuardCli};
use crate::exit::{Exit, USAGE};

fn main() -> ExitCode {
    // `run` starts `redlock guard ...`: the guard parses its own arguments
    // (with "guard" as its program name).
    let result = if std::env::args_os().nth(1).is_some_and(|arg| arg == "guard") {
        match parse::<GuardCli>(std::env::args_os().skip(1)) {
            Ok(guard) => Ok(guard::guard(guard.args.grace)),
            Err(code) => return code,
        }
    } else {
        let cli = match parse::<Cli>(std::env::args_os()) {
            Ok(cli) => cli,
            Err(code) => return code,
        };
        match cli.command {
            Command::Run(args) => run::run(args),
            Command::Elect(args) => run::elect(&args),
            Command::Check(args) => check::check(&args),
            Command::Status(args) => status::status(&args),
            Command::Completions(args) => completions::completions(&args),
            Command::Man(args) => man::man(&args),
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Exit { code, message }) => {
            crate::say!("redlock: {message}");
            ExitCode::from(code)
        }
    }
}

/// The parsed arguments, or the exit code after clap printed its message:
/// 0 for `--help` and `--version`, [`USAGE`] for an error. An error quotes
/// the argument it rejects: it is printed with the control characters of
/// what it quotes escaped, then plain, with no control character but its
/// own line breaks.
fn parse<P: Parser>(args: impl IntoIterator<Item = OsString>) -> Result<P, ExitCode> {
    P::try_parse_from(args).map_err(|mut err| {
        if err.use_stderr() {
            output::escape_quoted(&mut err);
            let text = err.render().to_string();
            eprint!("{}", output::printable_but(&text, |c| c == '\n'));
            ExitCode::from(USAGE)
        } else {
            let _ = err.print();
            ExitCode::SUCCESS
        }
    })
}

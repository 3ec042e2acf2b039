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
mod exit;
mod group;
mod guard;
mod run;
mod servers;
mod signals;
mod status;
mod waiting;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::exit::{Exit, USAGE};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() {
                ExitCode::from(USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Check(args) => check::check(&args),
        Command::Status(args) => status::status(&args),
        Command::Guard(args) => Ok(guard::guard(args.grace)),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Exit { code, message }) => {
            eprintln!("redlock: {message}");
            ExitCode::from(code)
        }
    }
}

//! `redlock completions SHELL`: the completion script, from the same clap
//! definitions as the parser.

use clap::CommandFactory as _;

use crate::cli::{Cli, CompletionsArgs};
use crate::exit::Exit;

pub(crate) fn completions(args: &CompletionsArgs) -> Result<u8, Exit> {
    // Into a buffer first: clap_complete panics when its writer fails.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "redlock", &mut script);
    crate::output::to_stdout(&script)
}

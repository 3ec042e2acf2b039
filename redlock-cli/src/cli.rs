//! The command line: subcommands, options, and the parsing of durations.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::exit;

/// The text after `--help`: the exit codes (docs/cli.md says the same).
const EXIT_CODES: &str = "\
Exit codes:
  0-255     run, elect: the command's own exit code (128+N when signal N
            ended it)
  0         check: fit for Redlock; status: a quorum of servers answered
  1         check: not fit for Redlock (see the errors)
  64        bad usage: arguments, no servers, a malformed URL or duration,
            an empty key, one server listed twice, --limit not in 1..=64
  69        unavailable: no quorum, servers unreachable (run: for
            --no-quorum-timeout while waiting, default 1m)
  70        an unexpected error (EX_SOFTWARE)
  74        completions, man: the output could not be written (EX_IOERR)
  75        run: the lock is held by another holder, or with --limit all
            permits are (--no-wait, or --wait ran out); change it with
            --conflict-exit-code; elect: another led until --wait ran out
  79        run, elect: the lock (leadership) was lost while the command
            ran; it was stopped
  126, 127  run, elect: the command could not be started, was not found
  129, 130, 131, 143
            run, elect: SIGHUP, SIGINT, SIGQUIT, SIGTERM while waiting for
            the lock (128+N)

Servers come from --server URL (repeated) or REDLOCK_SERVERS
(comma-separated): redis://[user:password@]host[:port][/db], rediss://
for TLS. Passwords are never printed.";

/// Run a command under a distributed lock (Redlock over independent Redis
/// masters), check a deployment, or show who holds a lock.
#[derive(Debug, Parser)]
#[command(name = "redlock", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Acquire KEY (or, with --limit K, one of K permits named KEY), run
    /// COMMAND while keeping it alive, release it when COMMAND exits, and
    /// exit with its code.
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Wait to become the leader of the election NAME, run COMMAND while
    /// leader (its term in REDLOCK_TERM), stop its process group when the
    /// leadership is lost; with --again, campaign again after.
    #[command(after_help = EXIT_CODES)]
    Elect(ElectArgs),
    /// Check that the servers are fit for Redlock (docs/operations.md).
    Check(ServerArgs),
    /// Show, per server, whether KEY is held, for how long, and the first
    /// bytes of its token; with --limit K, who holds each of the K permits.
    Status(StatusArgs),
    /// Print the completion script for SHELL to stdout (docs/cli.md says
    /// where to put it).
    Completions(CompletionsArgs),
    /// Print the manual page redlock(1) (roff) to stdout, or with --dir
    /// write it and one page per subcommand into a directory.
    Man(ManArgs),
}

/// `redlock guard`: the guardian `run` starts, which stops the process
/// group it is told to watch if `run` dies. Internal: parsed apart from
/// [`Cli`] (clap_complete would offer even a hidden subcommand), so no
/// help, completion script or manual page shows it.
#[derive(Debug, Parser)]
#[command(
    name = "redlock guard",
    about = "Internal, started by `redlock run`: stops the process group it watches if `run` dies."
)]
pub(crate) struct GuardCli {
    #[command(flatten)]
    pub(crate) args: GuardArgs,
}

/// `redlock completions SHELL`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

/// `redlock man [--dir DIR]`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write redlock.1 and a page per subcommand (redlock-run.1 ...) into
    /// DIR (e.g. /usr/local/share/man/man1) instead of redlock(1) to
    /// stdout.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

/// `redlock guard`: internal, started by `redlock run`.
#[derive(Debug, Args)]
pub(crate) struct GuardArgs {
    /// The time between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", value_parser = any_duration)]
    pub(crate) grace: Duration,
}

/// Where the servers are.
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// A Redis master's URL; repeat for each (3 or 5 independent masters).
    /// Defaults to the comma-separated REDLOCK_SERVERS.
    #[arg(long = "server", value_name = "URL")]
    pub(crate) servers: Vec<String>,
    /// How long each server may take to answer.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "1s", value_parser = positive_duration)]
    pub(crate) timeout: Duration,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) servers: ServerArgs,
    /// KEY is a semaphore of K permits (as `run --limit K`): show each
    /// permit's holder.
    #[arg(long, value_name = "K", allow_hyphen_values = true, value_parser = permits)]
    pub(crate) limit: Option<u32>,
    /// The lock's key.
    pub(crate) key: String,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct RunArgs {
    /// A Redis master's URL; repeat for each (3 or 5 independent masters).
    /// Defaults to the comma-separated REDLOCK_SERVERS.
    #[arg(long = "server", value_name = "URL")]
    pub(crate) servers: Vec<String>,
    /// The lock's time to live; the lock is extended while COMMAND runs.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "30s", value_parser = positive_duration)]
    pub(crate) ttl: Duration,
    /// How long to wait for the lock (default: as long as it takes).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = any_duration, conflicts_with = "no_wait")]
    pub(crate) wait: Option<Duration>,
    /// While waiting, give up (exit 69) once no quorum of servers has
    /// answered for this long; said on stderr meanwhile.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "1m", value_parser = any_duration)]
    pub(crate) no_quorum_timeout: Duration,
    /// Try once (one round) and give up at once if the lock is held.
    #[arg(long)]
    pub(crate) no_wait: bool,
    /// The exit code when the lock is held by someone else.
    #[arg(long, value_name = "N", default_value_t = exit::CONFLICT)]
    pub(crate) conflict_exit_code: u8,
    /// The longest the lock is kept alive; then it is lost and COMMAND is
    /// stopped.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "1h", value_parser = positive_duration)]
    pub(crate) max_hold: Duration,
    /// After SIGTERM on a lost lock, how long COMMAND has before SIGKILL
    /// (cut short so that SIGKILL comes before the lock's validity ends).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "10s", value_parser = any_duration)]
    pub(crate) kill_grace: Duration,
    /// Give COMMAND a fencing token in REDLOCK_FENCING_TOKEN (rises with
    /// each holder).
    #[arg(long)]
    pub(crate) fencing: bool,
    /// Store NAME (say, host and pid) with the lock, for `redlock status`
    /// to show who holds it: 1 to 128 bytes, no control characters, never
    /// secret.
    #[arg(long, value_name = "NAME")]
    pub(crate) identity: Option<String>,
    /// Take one of K permits of the semaphore KEY instead of the lock KEY:
    /// at most K commands run at once (1 to 64; every run on KEY must give
    /// the same K).
    #[arg(long, value_name = "K", allow_hyphen_values = true, value_parser = permits)]
    pub(crate) limit: Option<u32>,
    /// Progress on stderr: waiting, attempts, acquired, extended, released.
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// How long each server may take to answer a round.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "50ms", value_parser = positive_duration)]
    pub(crate) node_timeout: Duration,
    /// The lock's key.
    pub(crate) key: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<OsString>,
    /// Set by `elect`: the command gets REDLOCK_TERM.
    #[arg(skip)]
    pub(crate) term: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ElectArgs {
    /// A Redis master's URL; repeat for each (3 or 5 independent masters).
    /// Defaults to the comma-separated REDLOCK_SERVERS.
    #[arg(long = "server", value_name = "URL")]
    pub(crate) servers: Vec<String>,
    /// The leadership's time to live; it is extended while COMMAND runs,
    /// and a crashed leader is replaced about this long after.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "30s", value_parser = positive_duration)]
    pub(crate) ttl: Duration,
    /// How long to campaign before giving up (exit 75; default: as long as
    /// it takes).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = any_duration)]
    pub(crate) wait: Option<Duration>,
    /// While campaigning, give up (exit 69) once no quorum of servers has
    /// answered for this long.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "1m", value_parser = any_duration)]
    pub(crate) no_quorum_timeout: Duration,
    /// After SIGTERM on a lost leadership, how long COMMAND has before
    /// SIGKILL (cut short so that SIGKILL comes before its validity ends).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "10s", value_parser = any_duration)]
    pub(crate) kill_grace: Duration,
    /// Store NAME (say, host and pid) with the leadership, for `redlock
    /// status` to show who leads: 1 to 128 bytes, no control characters.
    #[arg(long, value_name = "NAME")]
    pub(crate) identity: Option<String>,
    /// After COMMAND ends or the leadership is lost, campaign again (until
    /// a signal stops redlock).
    #[arg(long)]
    pub(crate) again: bool,
    /// Progress on stderr: campaigning, attempts, elected, extended,
    /// resigned.
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// How long each server may take to answer a round.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "50ms", value_parser = positive_duration)]
    pub(crate) node_timeout: Duration,
    /// The election's name.
    pub(crate) name: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<OsString>,
}

/// A number of permits, from 1 to [`redlock_redis::MAX_PERMITS`].
fn permits(text: &str) -> Result<u32, String> {
    let max = redlock_redis::MAX_PERMITS;
    let text = text.trim();
    match text.parse::<u32>() {
        Ok(k) if (1..=max).contains(&k) => Ok(k),
        Ok(0) => Err(format!(
            "0 permits would admit nobody (expected a number of permits from 1 to {max})"
        )),
        _ if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => Err(format!(
            "at most {max} permits (a call that finds all taken tries each one)"
        )),
        _ => Err(format!(
            "not a number (expected a number of permits from 1 to {max})"
        )),
    }
}

/// A duration such as `30s`, `1m 30s`, `500ms`; `0` allowed.
fn any_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err("a duration cannot be negative".to_owned());
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{e} (expected a duration such as 30s, 1m 30s or 500ms)"))
}

/// A duration of at least one millisecond.
fn positive_duration(text: &str) -> Result<Duration, String> {
    let duration = any_duration(text)?;
    if duration < Duration::from_millis(1) {
        return Err("must be at least 1ms".to_owned());
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(any_duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(any_duration("0"), Ok(Duration::ZERO));
        assert!(positive_duration("0").is_err());
        assert!(positive_duration("0s").is_err());
        assert!(any_duration("abc").is_err());
        assert!(any_duration("-5s").is_err());
        assert!(any_duration("99999999999999999999999s").is_err());
        assert!(any_duration("").is_err());
    }

    #[test]
    fn permit_counts() {
        let says = |text: &str, what: &str| permits(text).is_err_and(|e| e.contains(what));
        assert_eq!(permits("1"), Ok(1));
        assert_eq!(permits(" 64 "), Ok(redlock_redis::MAX_PERMITS));
        assert!(says("0", "from 1 to 64"));
        assert!(says("65", "at most 64"));
        assert!(says("99999999999999999999", "at most 64"));
        for bad in ["", "two", "-1", "2.5", "+"] {
            assert!(says(bad, "not a number"), "{bad:?}");
        }
    }
}

//! Command-line options.

use std::time::Duration;

use anyhow::{bail, Context as _};

use crate::cell::{Impl, Mode};
use crate::measure::Plan;

pub(crate) const USAGE: &str = "\
usage: redlock-bench [--quick] [--rounds R] [--secs S] [--warmup S] [--modes LIST] [--impls LIST]
                     [--hot-retry MIN-MAX] [--own-sessions]

Starts real redis-server masters on free loopback ports (5; 3, 7, 9 for the
N modes), measures acquire+release cycles of our manager, the peers and the
raw references, stops the servers, and prints a table and one summary line.
The fair mode runs ours only: two managers, 4 threads each, on one key; so
does the procs mode: 8 processes, each with a manager of default settings
and one thread, on one key; and the semaphore mode: 4 managers × 4 threads
on a semaphore of 4 permits, next to mutex4x4, the same layout on one key.

  --quick        1 round, each cell 1 s after 0.3 s of warm-up
                 (default: 3 rounds, each cell 2 s after 0.5 s of warm-up)
  --rounds R     rounds; each round runs every cell once, in the same order,
                 so all implementations share the machine's noise
  --secs S       measured seconds per cell and round
  --warmup S     warm-up seconds per cell (not measured)
  --modes LIST   comma-separated subset of: 1x1,8x,32x,hot,frozen,n3,n7,n9,fair,procs,
                 semaphore,mutex4x4
  --impls LIST   comma-separated subset of: ours,ours-default-jitter,ours-stats,
                 ours-metrics,rslock,redlock,raw-seq,raw-floor,raw-ceiling,
                 raw-parked,raw-parked-nodes,raw-parked-pipelined,
                 raw-ceiling-ours,raw-parked-ours
  --hot-retry MIN-MAX
                 our retry pauses in the hot-key, fair, semaphore and mutex4x4
                 modes, in ms
                 (default 1-5)
  --own-sessions each server in a session of its own (through setsid), as
                 daemons or servers of a service manager run: with autogroup
                 scheduling they no longer share the client's CPU share
                 (default: the servers are the benchmark's children)

Ratios whose inputs were not run (or failed) print as nan.";

/// What to run.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) quick: bool,
    pub(crate) plan: Plan,
    pub(crate) rounds: usize,
    pub(crate) modes: Vec<Mode>,
    pub(crate) impls: Vec<Impl>,
    /// Our retry pauses (min, max) in the hot-key, fair, semaphore and mutex4x4 modes.
    pub(crate) hot_retry: (Duration, Duration),
    /// Servers in sessions of their own instead of the benchmark's.
    pub(crate) own_sessions: bool,
    pub(crate) help: bool,
}

/// Parses the arguments after the program name.
pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> anyhow::Result<Options> {
    let mut quick = false;
    let mut secs = None;
    let mut rounds = None;
    let mut warmup = None;
    let mut modes: Vec<Mode> = Mode::ALL.iter().map(|(m, _)| *m).collect();
    let mut impls: Vec<Impl> = Impl::ALL.iter().map(|(i, _)| *i).collect();
    let mut hot_retry = crate::ours::HOT_RETRY;
    let mut help = false;
    let mut own_sessions = false;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--quick" => quick = true,
            "--rounds" => rounds = Some(count("--rounds", &value("--rounds")?)?),
            "--secs" => secs = Some(seconds("--secs", &value("--secs")?)?),
            "--warmup" => warmup = Some(seconds("--warmup", &value("--warmup")?)?),
            "--modes" => modes = names("--modes", &value("--modes")?, &Mode::ALL)?,
            "--impls" => impls = names("--impls", &value("--impls")?, &Impl::ALL)?,
            "--hot-retry" => hot_retry = millis_range("--hot-retry", &value("--hot-retry")?)?,
            "--own-sessions" => own_sessions = true,
            "-h" | "--help" => help = true,
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    let (default_rounds, default_window, default_warmup, grace) = if quick {
        (
            1,
            Duration::from_secs(1),
            Duration::from_millis(300),
            Duration::from_secs(2),
        )
    } else {
        (
            3,
            Duration::from_secs(2),
            Duration::from_millis(500),
            Duration::from_secs(5),
        )
    };
    Ok(Options {
        quick,
        plan: Plan {
            warmup: warmup.unwrap_or(default_warmup),
            window: secs.unwrap_or(default_window),
            grace,
        },
        rounds: rounds.unwrap_or(default_rounds),
        modes,
        impls,
        hot_retry,
        own_sessions,
        help,
    })
}

fn seconds(name: &str, value: &str) -> anyhow::Result<Duration> {
    let secs: f64 = value
        .parse()
        .with_context(|| format!("{name}: not a number: {value:?}"))?;
    if !(secs.is_finite() && secs > 0.0 && secs <= 3600.0) {
        bail!("{name}: expected seconds in (0, 3600], got {value}");
    }
    Ok(Duration::from_secs_f64(secs))
}

fn millis_range(name: &str, value: &str) -> anyhow::Result<(Duration, Duration)> {
    let parse = |ms: &str| -> anyhow::Result<Duration> {
        let ms: f64 = ms
            .trim()
            .parse()
            .with_context(|| format!("{name}: not a number of ms: {ms:?}"))?;
        if !(ms.is_finite() && (0.0..=60_000.0).contains(&ms)) {
            bail!("{name}: expected ms in [0, 60000], got {ms}");
        }
        Ok(Duration::from_secs_f64(ms / 1e3))
    };
    let (min, max) = value
        .split_once('-')
        .with_context(|| format!("{name}: expected MIN-MAX in ms, got {value:?}"))?;
    let (min, max) = (parse(min)?, parse(max)?);
    if min > max {
        bail!("{name}: {value:?} has MIN above MAX");
    }
    Ok((min, max))
}

fn count(name: &str, value: &str) -> anyhow::Result<usize> {
    match value.parse::<usize>() {
        Ok(n) if (1..=100).contains(&n) => Ok(n),
        _ => bail!("{name}: expected a count in 1..=100, got {value:?}"),
    }
}

fn names<T: Copy>(flag: &str, list: &str, known: &[(T, &str)]) -> anyhow::Result<Vec<T>> {
    list.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            known
                .iter()
                .find(|(_, known)| *known == name)
                .map(|(value, _)| *value)
                .with_context(|| {
                    let all: Vec<_> = known.iter().map(|(_, n)| *n).collect();
                    format!("{flag}: unknown name {name:?} (known: {})", all.join(","))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn quick_and_filters() -> anyhow::Result<()> {
        let options = parse(args(&["--quick", "--modes", "1x1,n9", "--impls", "ours"]))?;
        assert!(options.quick);
        assert_eq!(options.plan.window, Duration::from_secs(1));
        assert_eq!(options.rounds, 1);
        assert_eq!(options.hot_retry, crate::ours::HOT_RETRY);
        assert_eq!(options.modes, [Mode::One, Mode::Nodes(9)]);
        assert_eq!(options.impls, [Impl::Ours]);
        let options = parse(args(&["--hot-retry", "0.5-2"]))?;
        assert_eq!(
            options.hot_retry,
            (Duration::from_micros(500), Duration::from_millis(2))
        );
        assert_eq!(options.rounds, 3);
        assert!(!options.own_sessions);
        assert!(parse(args(&["--own-sessions"]))?.own_sessions);
        Ok(())
    }

    #[test]
    fn fair_mode_by_name() -> anyhow::Result<()> {
        let options = parse(args(&["--quick", "--modes", "fair", "--impls", "ours"]))?;
        assert_eq!(options.modes, [Mode::Fair]);
        assert_eq!(options.impls, [Impl::Ours]);
        let options = parse(args(&["--modes", "hot, fair,1x1"]))?;
        assert_eq!(options.modes, [Mode::Hot, Mode::Fair, Mode::One]);
        // Every mode by default, the fair, procs and semaphore ones last;
        // their names round-trip.
        let options = parse(args(&[]))?;
        assert_eq!(
            options.modes[options.modes.len() - 4..],
            [Mode::Fair, Mode::Procs, Mode::Semaphore, Mode::Mutex4x4]
        );
        assert_eq!(Mode::Fair.cli_name(), "fair");
        assert!(parse(args(&["--modes", "fairness"])).is_err());
        assert!(parse(args(&["--modes", "Fair"])).is_err());
        Ok(())
    }

    #[test]
    fn procs_mode_by_name_also_in_quick_runs() -> anyhow::Result<()> {
        let options = parse(args(&["--modes", "procs"]))?;
        assert_eq!(options.modes, [Mode::Procs]);
        assert_eq!(Mode::Procs.cli_name(), "procs");
        assert_eq!(Mode::Procs.impls(), [Impl::Ours]);
        assert_eq!(Mode::Procs.clients(), crate::cell::PROCS);
        assert!(Mode::Procs.one_key());
        assert!(parse(args(&["--quick"]))?.modes.contains(&Mode::Procs));
        assert!(parse(args(&["--modes", "proc"])).is_err());
        Ok(())
    }

    #[test]
    fn semaphore_mode_and_its_mutex_twin_by_name() -> anyhow::Result<()> {
        let options = parse(args(&["--quick", "--modes", "semaphore,mutex4x4"]))?;
        assert_eq!(options.modes, [Mode::Semaphore, Mode::Mutex4x4]);
        for mode in [Mode::Semaphore, Mode::Mutex4x4] {
            assert_eq!(mode.impls(), [Impl::Ours]);
            assert_eq!(mode.clients(), 16);
            assert_eq!(mode.nodes(), 5);
        }
        assert_eq!(Mode::Semaphore.cli_name(), "semaphore");
        assert!(parse(args(&["--modes", "sem"])).is_err());
        Ok(())
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(parse(args(&["--secs", "0"])).is_err());
        assert!(parse(args(&["--secs"])).is_err());
        assert!(parse(args(&["--modes", "2x"])).is_err());
        assert!(parse(args(&["--bogus"])).is_err());
        assert!(parse(args(&["--rounds", "0"])).is_err());
        assert!(parse(args(&["--hot-retry", "5-1"])).is_err());
        assert!(parse(args(&["--hot-retry", "5"])).is_err());
    }
}

//! Process accounting from `/proc`: CPU time and context switches. Linux
//! only, and no `libc`: the files are read as text.

use std::time::Duration;

use anyhow::{bail, Context as _};

/// The unit of `utime` / `stime` in `/proc/<pid>/stat`: `USER_HZ`, which
/// Linux fixes at 100 for everything it reports to user space.
const TICK: Duration = Duration::from_millis(10);

/// CPU time (user + system) of process `pid` (`"self"` for this one) and of
/// all its threads, live or exited, as `/proc/<pid>/stat` counts it.
pub(crate) fn cpu_time(pid: &str) -> anyhow::Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // The command name (field 2) may hold spaces: fields count from its ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .with_context(|| format!("parsing {path}"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    let (Some(utime), Some(stime)) = (fields.get(11), fields.get(12)) else {
        bail!("{path} has too few fields");
    };
    let ticks = utime.parse::<u32>()? + stime.parse::<u32>()?;
    Ok(TICK * ticks)
}

/// Context switches (voluntary + involuntary) of the live threads of process
/// `pid` (`"self"` for this one). A voluntary one is a thread blocking: on a
/// socket, a channel, a condition variable; so this counts thread hand-offs
/// and waits.
pub(crate) fn context_switches(pid: &str) -> anyhow::Result<u64> {
    let mut total = 0;
    let tasks = format!("/proc/{pid}/task");
    for task in std::fs::read_dir(&tasks).with_context(|| format!("listing {tasks}"))? {
        let path = task?.path().join("status");
        // A thread may exit between the listing and the read.
        let Ok(status) = std::fs::read_to_string(&path) else {
            continue;
        };
        for line in status.lines() {
            if let Some(value) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += value.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Ok(total)
}

/// `model name` of the first CPU in `/proc/cpuinfo`.
pub(crate) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() -> anyhow::Result<()> {
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(cpu_time("self")? < Duration::from_secs(3600));
        assert!(context_switches("self")? < u64::MAX);
        assert!(!cpu_model().is_empty());
        Ok(())
    }
}

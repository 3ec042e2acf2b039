//! What the Redis examples share: the masters they lock on, from
//! `REDLOCK_SERVERS`.

/// `EX_USAGE` from `sysexits.h`: the command was used incorrectly.
pub(crate) const EX_USAGE: u8 = 64;

/// The masters named by `REDLOCK_SERVERS`, or a message saying how to start some.
pub(crate) fn servers(example: &str) -> Result<Vec<String>, String> {
    let urls: Vec<String> = std::env::var("REDLOCK_SERVERS")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(String::from)
        .collect();
    if urls.is_empty() {
        return Err(format!(
            "REDLOCK_SERVERS is not set: it names the independent Redis masters to lock on,
comma-separated. Start three throwaway masters (no persistence) and run again:

  for port in 7001 7002 7003; do
    redis-server --port $port --bind 127.0.0.1 --save '' --appendonly no --daemonize yes
  done
  REDLOCK_SERVERS=redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 \\
    cargo run -p redlock-redis --example {example}

Stop them after: for port in 7001 7002 7003; do redis-cli -p $port shutdown nosave; done"
        ));
    }
    Ok(urls)
}

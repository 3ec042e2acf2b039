//! `redlock status KEY`: per server, held or not, the time left, and the
//! first bytes of the token.

use redlock_redis::decide::quorum;
use redlock_redis::key_status;

use crate::cli::StatusArgs;
use crate::exit::{Exit, UNAVAILABLE};

pub(crate) fn status(args: &StatusArgs) -> Result<u8, Exit> {
    if args.key.is_empty() {
        return Err(Exit::usage("the key must not be empty"));
    }
    let urls = crate::servers::urls(&args.servers.servers)?;
    let states = key_status(&urls, &args.key, args.servers.timeout)
        .map_err(|e| Exit::usage(e.to_string()))?;
    let mut answered = 0;
    let mut held = 0;
    for (node, state) in &states {
        match state {
            Ok(state) => {
                answered += 1;
                match (state.ttl, &state.token_prefix) {
                    (Some(ttl), Some(token)) => {
                        held += 1;
                        println!(
                            "{node}: held, {} left, token {token}…",
                            humantime::format_duration(round_ms(ttl))
                        );
                    }
                    _ => println!("{node}: free"),
                }
            }
            Err(err) => println!("{node}: unreachable: {err}"),
        }
    }
    let n = states.len();
    let q = quorum(n);
    println!(
        "{}: held on {held} of {n} server(s) (a lock needs {q})",
        args.key
    );
    if answered < q {
        return Err(Exit::new(
            UNAVAILABLE,
            format!("only {answered} of {n} servers answered"),
        ));
    }
    Ok(0)
}

fn round_ms(d: std::time::Duration) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

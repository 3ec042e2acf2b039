//! `redlock status KEY`: per server, held or not, the time left, and the
//! first bytes of the token. With `--limit K`, the same for each permit of
//! the semaphore KEY, one line per permit.

use std::time::Duration;

use redlock_core::backend::Holder;
use redlock_core::Identity;
use redlock_redis::decide::quorum;
use redlock_redis::keys::PERMIT_INFIX;
use redlock_redis::{key_status, keys_status, KeyState};

use crate::cli::StatusArgs;
use crate::exit::{Exit, UNAVAILABLE};

pub(crate) fn status(args: &StatusArgs) -> Result<u8, Exit> {
    if args.key.is_empty() {
        return Err(Exit::usage("the key must not be empty"));
    }
    // The keys kept beside a lock are no lock's name.
    redlock_redis::keys::check_name(&args.key).map_err(|e| Exit::usage(e.to_string()))?;
    let urls = crate::servers::urls(&args.servers.servers)?;
    let (answered, n) = match args.limit {
        None => lock_status(args, &urls)?,
        Some(k) => permits_status(args, &urls, k)?,
    };
    let q = quorum(n);
    if answered < q {
        return Err(Exit::new(
            UNAVAILABLE,
            format!("only {answered} of {n} servers answered"),
        ));
    }
    Ok(0)
}

/// One line per server; returns (servers that answered, servers).
fn lock_status(args: &StatusArgs, urls: &[String]) -> Result<(usize, usize), Exit> {
    let states = key_status(urls, &args.key, args.servers.timeout)
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
                        crate::tell!(
                            "{node}: held, {} left, token {token}…{}",
                            humantime::format_duration(round_ms(ttl)),
                            by(state.holder.as_ref(), state.fence)
                        );
                    }
                    _ => crate::tell!("{node}: free"),
                }
            }
            Err(err) => crate::tell!("{node}: unreachable: {err}"),
        }
    }
    let n = states.len();
    let views: Vec<_> = states
        .iter()
        .map(|(_, state)| state.as_ref().ok().map(|s| s.view().clone()))
        .collect();
    // Names are data: the key is shown escaped.
    let key = args.key.escape_debug();
    match Holder::of_views(&views, n) {
        Some(holder) => crate::tell!(
            "{key}: held on {} of {n} server(s) for {} more, token {}…{}",
            holder.nodes(),
            humantime::format_duration(round_ms(holder.ttl())),
            holder.token_prefix(),
            by(holder.identity(), holder.fence())
        ),
        None => crate::tell!(
            "{key}: held on {held} of {n} server(s) (a lock needs {})",
            quorum(n)
        ),
    }
    Ok((answered, n))
}

/// `, by IDENTITY, fencing counter F` for what is known.
fn by(identity: Option<&Identity>, fence: Option<u64>) -> String {
    let mut shown = String::new();
    if let Some(identity) = identity {
        // Validated when read (no control characters); escaped anyway.
        shown.push_str(&format!(", by {}", identity.as_str().escape_debug()));
    }
    if let Some(fence) = fence {
        shown.push_str(&format!(", fencing counter {fence}"));
    }
    shown
}

/// One line per permit (the key `KEY␟permit:i` of each, ␟ being U+001F,
/// shown escaped; read from every
/// server in one pipeline), then the servers that did not answer and a
/// count; returns (servers that answered, servers).
fn permits_status(args: &StatusArgs, urls: &[String], k: u32) -> Result<(usize, usize), Exit> {
    // The permit keys' form is the library's (docs/design.md, `Semaphore`).
    let keys: Vec<String> = (0..k)
        .map(|slot| format!("{}{PERMIT_INFIX}{slot}", args.key))
        .collect();
    let states =
        keys_status(urls, &keys, args.servers.timeout).map_err(|e| Exit::usage(e.to_string()))?;
    let n = states.len();
    let q = quorum(n);
    let answers: Vec<&Vec<KeyState>> = states.iter().filter_map(|(_, s)| s.as_ref().ok()).collect();
    let mut taken = 0;
    for (slot, key) in keys.iter().enumerate() {
        // Names are data: shown escaped (the separator, control bytes).
        let key = key.escape_debug();
        let held: Vec<&KeyState> = answers
            .iter()
            .filter_map(|states| states.get(slot))
            .filter(|state| state.is_held())
            .collect();
        if held.is_empty() {
            if answers.len() == n {
                crate::tell!("permit {slot} ({key}): free");
            } else {
                crate::tell!(
                    "permit {slot} ({key}): free on the {} of {n} server(s) that answered",
                    answers.len()
                );
            }
            continue;
        }
        let (token, on) = most_common_token(&held);
        if on >= q {
            taken += 1;
        }
        let left = held
            .iter()
            .filter(|state| state.token_prefix.as_deref() == Some(token))
            .filter_map(|state| state.ttl)
            .min()
            .unwrap_or_default();
        let others = if on < held.len() {
            format!(" ({} server(s) hold other tokens)", held.len() - on)
        } else {
            String::new()
        };
        let holder = held
            .iter()
            .find(|state| state.token_prefix.as_deref() == Some(token))
            .and_then(|state| state.holder.as_ref());
        crate::tell!(
            "permit {slot} ({key}): held on {on} of {n} server(s), {} left, token {token}…{}{others}",
            humantime::format_duration(round_ms(left)),
            by(holder, None)
        );
    }
    for (node, state) in &states {
        if let Err(err) = state {
            crate::tell!("{node}: unreachable: {err}");
        }
    }
    crate::tell!(
        "{}: {taken} of {k} permit(s) held on a quorum ({q} of {n} servers)",
        args.key
    );
    Ok((answers.len(), n))
}

/// The token most of `held` show, and on how many servers.
fn most_common_token<'a>(held: &[&'a KeyState]) -> (&'a str, usize) {
    let mut best = ("", 0);
    for state in held {
        let Some(token) = state.token_prefix.as_deref() else {
            continue;
        };
        let count = held
            .iter()
            .filter(|other| other.token_prefix.as_deref() == Some(token))
            .count();
        if count > best.1 {
            best = (token, count);
        }
    }
    best
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

//! The run's trace: a rolling hash, always, and text lines when asked for.

use super::rng::TraceHash;

/// Formats a simulated real time (nanoseconds) as milliseconds.
pub(crate) fn fmt_time(ns: u64) -> String {
    format!("{}.{:06}ms", ns / 1_000_000, ns % 1_000_000)
}

/// The hash of every event processed, plus the text of each when tracing.
#[derive(Debug)]
pub(crate) struct Trace {
    hash: TraceHash,
    lines: Option<Vec<String>>,
}

impl Trace {
    pub(crate) fn new(text: bool) -> Self {
        Trace {
            hash: TraceHash::new(),
            lines: text.then(Vec::new),
        }
    }

    /// Mixes the words of one event into the hash.
    #[inline]
    pub(crate) fn mix(&mut self, words: &[u64]) {
        for &w in words {
            self.hash.word(w);
        }
    }

    /// Adds a line (built only when tracing).
    #[inline]
    pub(crate) fn line(&mut self, now: u64, text: impl FnOnce() -> String) {
        // Off the hot path: without tracing, only the check stays inline.
        if let Some(lines) = &mut self.lines {
            push_line(lines, now, text());
        }
    }

    pub(crate) fn hash(&self) -> u64 {
        self.hash.value()
    }

    pub(crate) fn into_lines(self) -> Vec<String> {
        self.lines.unwrap_or_default()
    }
}

/// Adds the line `text` at `now` (tracing only).
#[cold]
#[inline(never)]
fn push_line(lines: &mut Vec<String>, now: u64, text: String) {
    lines.push(format!("{:>14} {}", fmt_time(now), text));
}

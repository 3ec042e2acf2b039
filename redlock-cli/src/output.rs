//! What `redlock` prints: its messages, with every control character
//! escaped, and generated text (completion scripts, manual pages).
//!
//! A message carries what users and servers gave: a key, a URL, a path, a
//! server's error text. Any of them may hold a terminal's escape sequences
//! or a line break that would forge another message, so every message is
//! printed through [`printable`] ([`say!`](crate::say), [`tell!`](crate::tell)).

use std::borrow::Cow;
use std::io::{ErrorKind, Write as _};
use std::path::Path;

use clap::error::ContextValue;

use crate::exit::{Exit, IO_ERROR};

/// Prints a message line on stderr, its control characters escaped.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::output::printable(&format!($($arg)*)))
    };
}

/// Prints a line on stdout, its control characters escaped.
#[macro_export]
macro_rules! tell {
    ($($arg:tt)*) => {
        println!("{}", $crate::output::printable(&format!($($arg)*)))
    };
}

/// `text` with each control character (line breaks, escapes, bells, C1
/// codes) written as its Rust escape (`\n`, `\u{1b}`), the rest as it is.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    printable_but(text, |_| false)
}

/// [`printable`], but the characters `keep` says are left as they are
/// (the line breaks of a multi-line message).
pub(crate) fn printable_but(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && !keep(c) {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

/// Escapes the control characters of what clap's error `err` quotes (the
/// arguments it rejects, in its message and its tips).
pub(crate) fn escape_quoted(err: &mut clap::Error) {
    let escaped: Vec<_> = err
        .context()
        .filter_map(|(kind, value)| Some((kind, escaped(value)?)))
        .collect();
    for (kind, value) in escaped {
        err.insert(kind, value);
    }
}

/// `value` with its text [`printable`]; `None` for values without text.
fn escaped(value: &ContextValue) -> Option<ContextValue> {
    let text = |text: &str| printable(text).into_owned();
    Some(match value {
        ContextValue::String(t) => ContextValue::String(text(t)),
        ContextValue::Strings(ts) => ContextValue::Strings(ts.iter().map(|t| text(t)).collect()),
        ContextValue::StyledStr(t) => ContextValue::StyledStr(text(&t.to_string()).into()),
        ContextValue::StyledStrs(ts) => {
            ContextValue::StyledStrs(ts.iter().map(|t| text(&t.to_string()).into()).collect())
        }
        _ => return None,
    })
}

/// Writes `bytes` to stdout. A reader that closed the pipe early (`redlock
/// man | head`) is not an error.
pub(crate) fn to_stdout(bytes: &[u8]) -> Result<u8, Exit> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(Exit::new(IO_ERROR, format!("writing to stdout: {e}"))),
    }
}

/// Writes `bytes` to the file `path`, replacing it.
pub(crate) fn to_file(path: &Path, bytes: &[u8]) -> Result<(), Exit> {
    std::fs::write(path, bytes)
        .map_err(|e| Exit::new(IO_ERROR, format!("writing {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_is_left() {
        assert!(matches!(printable("plain: ключ ✓"), Cow::Borrowed(_)));
        assert_eq!(
            printable("k\u{1b}]0;title\u{7}\n\u{9b}31m"),
            "k\\u{1b}]0;title\\u{7}\\n\\u{9b}31m"
        );
        assert_eq!(printable_but("a\nb\u{1b}", |c| c == '\n'), "a\nb\\u{1b}");
    }
}

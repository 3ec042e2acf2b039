//! What the scripts' Lua (5.1, as Redis embeds it) does with strings, for
//! the model to do exactly the same: the pattern `%d+:%S+` that reads a
//! waiting line, `tonumber`, `string.format('%d', x)`, and the fencing
//! counters' decimal checks.

/// C's `isspace` in the C locale, which Lua's `%s` uses.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Where `%d+:%S+` matches at `at`: the ends of the digits and of the match.
fn match_word(s: &[u8], at: usize) -> Option<(usize, usize)> {
    let rest = s.get(at..)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || rest.get(digits) != Some(&b':') {
        return None;
    }
    let word = rest
        .get(digits + 1..)?
        .iter()
        .take_while(|b| !is_space(**b))
        .count();
    (word > 0).then_some((at + digits, at + digits + 1 + word))
}

/// `string.gmatch(v, '(%d+):(%S+)')`: each word's ticket digits and id.
pub(crate) fn words(s: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < s.len() {
        match match_word(s, at) {
            Some((colon, end)) => {
                out.push((&s[at..colon], &s[colon + 1..end]));
                at = end;
            }
            None => at += 1,
        }
    }
    out
}

/// The scripts' `is_line(v)`: a non-empty string that is nothing but
/// `%d+:%S+` words and spaces (`gsub` the words away, then `^ *$`).
pub(crate) fn is_line(v: &[u8]) -> bool {
    if v.is_empty() {
        return false;
    }
    let mut at = 0;
    while at < v.len() {
        match match_word(v, at) {
            Some((_, end)) => at = end,
            None if v[at] == b' ' => at += 1,
            None => return false,
        }
    }
    true
}

/// `tonumber` of a run of ASCII digits: the nearest double.
pub(crate) fn number(digits: &[u8]) -> f64 {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0)
}

/// `tonumber(s)` of a script argument: `None` (Lua's `nil`) unless it is a
/// number Lua reads (decimal digits here: the arguments the backend
/// sends).
pub(crate) fn arg_number(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Lua 5.1's `string.format('%d', x)`: `x` cast to a C `long`, which
/// x86-64 makes `LONG_MIN` out of range.
pub(crate) fn format_d(x: f64) -> String {
    // 2^63: the first double a `long` cannot hold.
    let most = 9_223_372_036_854_775_808.0_f64;
    let n = if (-most..most).contains(&x) {
        x as i64
    } else {
        i64::MIN
    };
    n.to_string()
}

/// A fencing counter's value after the scripts' checks: `None` when it is
/// not all digits (`WRONGTYPE`), else without its leading zeros.
pub(crate) fn counter_digits(v: &[u8]) -> Option<&[u8]> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // `string.gsub(v, '^0+(%d)', '%1')`: strips zeros, keeps the last digit.
    let zeros = v.iter().take_while(|b| **b == b'0').count();
    Some(&v[zeros.min(v.len() - 1)..])
}

/// Whether canonical digits `a` are below `b` as the scripts compare them:
/// shorter, or as long and before in byte order.
pub(crate) fn digits_below(a: &[u8], b: &[u8]) -> bool {
    a.len() < b.len() || (a.len() == b.len() && a < b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_lua_reads_them() {
        assert_eq!(
            words(b"10:a 20:b:c"),
            vec![(&b"10"[..], &b"a"[..]), (b"20", b"b:c")]
        );
        // Greedy words: no space, one word.
        assert_eq!(words(b"1:a2:b"), vec![(&b"1"[..], &b"a2:b"[..])]);
        assert_eq!(words(b"x1:y"), vec![(&b"1"[..], &b"y"[..])]);
        assert!(is_line(b"1:a 2:b "));
        assert!(is_line(b" 1:a"));
        assert!(!is_line(b""));
        assert!(!is_line(b"x1:y"));
        assert!(!is_line(b"1:"));
        assert!(!is_line(b"1:a\t2:b"), "only spaces between words");
        // Spaces alone are a line with nobody in it, as in Lua.
        assert!(is_line(b"  "));
    }

    #[test]
    fn numbers_format_as_lua_5_1() {
        assert_eq!(format_d(number(b"0042")), "42");
        assert_eq!(format_d(1e30), i64::MIN.to_string());
        assert_eq!(arg_number(b"12"), Some(12.0));
        assert_eq!(arg_number(b""), None);
        assert_eq!(counter_digits(b"0007"), Some(&b"7"[..]));
        assert_eq!(counter_digits(b"000"), Some(&b"0"[..]));
        assert_eq!(counter_digits(b"-1"), None);
        assert!(digits_below(b"99", b"100") && !digits_below(b"100", b"99"));
    }
}

//! What the scripts' Lua (5.1, as Redis embeds it) does with strings, for
//! the model to do exactly the same: the pattern `%d+:%S+` that reads a
//! waiting line, `tonumber`, `string.format('%d', x)`, and the fencing
//! counters' decimal checks.

/// C's `isspace` in the C locale, which Lua's `%s` uses: space, and `\t`
/// to `\r`.
fn is_space(b: u8) -> bool {
    b == b' ' || (b'\t'..=b'\r').contains(&b)
}

/// Where `%d+:%S+` matches at `at`: the ends of the digits and of the match.
fn match_word(s: &[u8], at: usize) -> Option<(usize, usize)> {
    let rest = s.get(at..)?;
    let digits = rest
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(rest.len());
    if digits == 0 || rest.get(digits) != Some(&b':') {
        return None;
    }
    let after = &rest[digits + 1..];
    let word = after
        .iter()
        .position(|b| is_space(*b))
        .unwrap_or(after.len());
    (word > 0).then_some((at + digits, at + digits + 1 + word))
}

/// `string.gmatch(v, '(%d+):(%S+)')`: each word's ticket digits and id.
pub(crate) fn words(s: &[u8]) -> Words<'_> {
    Words { s, at: 0 }
}

/// The words of a waiting line, in order: [`words`].
#[derive(Debug, Clone)]
pub(crate) struct Words<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Words<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.s;
        while self.at < s.len() {
            let at = self.at;
            match match_word(s, at) {
                Some((colon, end)) => {
                    self.at = end;
                    return Some((&s[at..colon], &s[colon + 1..end]));
                }
                None => self.at += 1,
            }
        }
        None
    }
}

/// The scripts' `is_line(v)`: a non-empty string that is nothing but
/// `%d+:%S+` words and spaces (`gsub` the words away, then `^ *$`).
pub(crate) fn is_line(v: &[u8]) -> bool {
    line_words(v, |_| {})
}

/// One word of a waiting line, as offsets into it: its ticket digits are
/// `at..colon`, its id `colon + 1..end`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Word {
    pub(crate) at: usize,
    pub(crate) colon: usize,
    pub(crate) end: usize,
}

/// [`is_line`] and, on the way, each of its words in order, as [`words`]
/// finds them (in a line, whatever is not a word is a space that `gmatch`
/// steps over too): one pass instead of two.
pub(crate) fn line_words(v: &[u8], mut each: impl FnMut(Word)) -> bool {
    if v.is_empty() {
        return false;
    }
    let mut at = 0;
    while at < v.len() {
        match match_word(v, at) {
            Some((colon, end)) => {
                each(Word { at, colon, end });
                at = end;
            }
            None if v[at] == b' ' => at += 1,
            None => return false,
        }
    }
    true
}

/// `tonumber` of a run of ASCII digits: the nearest double.
pub(crate) fn number(digits: &[u8]) -> f64 {
    // Up to 19 digits fit a u64, whose conversion rounds to the nearest
    // double as `strtod` does; longer ones are parsed.
    if digits.len() <= 19 && digits.iter().all(u8::is_ascii_digit) {
        let n = digits
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        return n as f64;
    }
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0)
}

/// `tonumber(s)` of a script argument: `None` (Lua's `nil`) unless it is a
/// number Lua reads (decimal digits here: the arguments the backend
/// sends).
#[cfg(test)]
pub(crate) fn arg_number(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Lua 5.1's `string.format('%d', x)`: [`lua_long`] in decimal.
pub(crate) fn format_d(x: f64) -> Decimal {
    Decimal::of(lua_long(x))
}

/// `x` cast to a C `long` as Lua 5.1's `%d` does it, which x86-64 makes
/// `LONG_MIN` out of range.
pub(crate) fn lua_long(x: f64) -> i64 {
    // 2^63: the first double a `long` cannot hold.
    let most = 9_223_372_036_854_775_808.0_f64;
    if (-most..most).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

/// An integer's decimal digits, on the stack: what `tostring` and
/// `string.format('%d')` write, without allocating.
#[derive(Clone, Copy)]
pub(crate) struct Decimal {
    buf: [u8; 20],
    len: usize,
}

impl Decimal {
    /// The decimal of `n`.
    pub(crate) fn of(n: i64) -> Self {
        Decimal::copy(itoa::Buffer::new().format(n))
    }

    /// The decimal of `n`.
    pub(crate) fn of_u64(n: u64) -> Self {
        Decimal::copy(itoa::Buffer::new().format(n))
    }

    fn copy(digits: &str) -> Self {
        // Every i64 and u64 has at most 20 characters.
        let mut buf = [0u8; 20];
        let len = digits.len().min(20);
        buf[..len].copy_from_slice(&digits.as_bytes()[..len]);
        Decimal { buf, len }
    }

    /// Its digits.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Whether it has no sign (a number `%d+` matches whole).
    pub(crate) fn is_digits(&self) -> bool {
        self.bytes().first() != Some(&b'-')
    }
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
        let all = |s| words(s).collect::<Vec<_>>();
        assert_eq!(
            all(b"10:a 20:b:c"),
            vec![(&b"10"[..], &b"a"[..]), (b"20", b"b:c")]
        );
        // Greedy words: no space, one word.
        assert_eq!(all(b"1:a2:b"), vec![(&b"1"[..], &b"a2:b"[..])]);
        assert_eq!(all(b"x1:y"), vec![(&b"1"[..], &b"y"[..])]);
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
    fn one_pass_finds_the_words_gmatch_finds_in_a_line() {
        let samples: [&[u8]; 10] = [
            b"10:a 20:b:c",
            b"1:a2:b",
            b"  1:a  22:bb ",
            b"x1:y",
            b"1:",
            b"1:a\t2:b",
            b"  ",
            b"",
            b"007:x 9:\x0b",
            b"12345678901234567890:id 3:z",
        ];
        for v in samples {
            let mut found = Vec::new();
            let line = line_words(v, |w| {
                found.push((&v[w.at..w.colon], &v[w.colon + 1..w.end]))
            });
            assert_eq!(line, is_line(v), "{v:?}");
            if line {
                assert_eq!(found, words(v).collect::<Vec<_>>(), "{v:?}");
            }
        }
    }

    #[test]
    fn numbers_format_as_lua_5_1() {
        assert_eq!(format_d(number(b"0042")).bytes(), b"42");
        assert_eq!(format_d(1e30).bytes(), i64::MIN.to_string().as_bytes());
        assert_eq!(lua_long(-3.7), -3);
        // Digits read as a u64 round as `strtod` does, also past 2^53.
        for n in [
            0u64,
            7,
            9_007_199_254_740_993,
            12_345_678_901_234_567_891,
            u64::MAX,
        ] {
            let digits = n.to_string();
            let parsed: f64 = digits.parse().unwrap_or(f64::NAN);
            assert_eq!(number(digits.as_bytes()), parsed, "{n}");
            assert_eq!(arg_number(digits.as_bytes()), Some(parsed), "{n}");
            assert_eq!(n as f64, parsed, "{n}");
        }
        assert_eq!(number(b"123456789012345678901234"), 1.2345678901234568e23);
        assert_eq!(Decimal::of_u64(u64::MAX).bytes(), b"18446744073709551615");
        assert_eq!(Decimal::of(i64::MIN).bytes(), b"-9223372036854775808");
        assert_eq!(arg_number(b"12"), Some(12.0));
        assert_eq!(arg_number(b""), None);
        assert_eq!(counter_digits(b"0007"), Some(&b"7"[..]));
        assert_eq!(counter_digits(b"000"), Some(&b"0"[..]));
        assert_eq!(counter_digits(b"-1"), None);
        assert!(digits_below(b"99", b"100") && !digits_below(b"100", b"99"));
    }
}

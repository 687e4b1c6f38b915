//! Characters a terminal would not show as themselves (issue 25, item 7).
//!
//! Stored data (names, commands, errors, a run's output) reaches a
//! terminal through the human surfaces, which write these characters as
//! their Rust escape (`\u{202e}`) instead: a control character (C0, DEL,
//! C1) would move the cursor or start an escape sequence, and a bidi or
//! zero-width character would reorder or hide what is around it, so
//! `safe\u{202e}txt.exe` would read as `safeexe.txt` and columns would no
//! longer line up.

/// True for a character a terminal would not show as itself: a control
/// character (C0, DEL, C1), a bidi control (the embeddings, overrides and
/// isolates, and the implicit marks), a zero-width or invisible format
/// character, a character that prints blank (the Hangul fillers), a line
/// or paragraph separator, or a tag character.
///
/// Variation selectors are kept: they only choose a glyph and cannot
/// reorder or hide text. The zero-width joiner is escaped, since it can
/// hide between letters, so an emoji joined from several shows as its
/// parts with `\u{200d}` between them.
///
/// ```
/// use loops_core::hides_on_terminal;
/// assert!(hides_on_terminal('\u{202e}'));
/// assert!(hides_on_terminal('\u{200b}'));
/// assert!(hides_on_terminal('\u{1b}'));
/// assert!(!hides_on_terminal('é'));
/// ```
pub fn hides_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Soft hyphen and combining grapheme joiner (invisible).
            '\u{00ad}' | '\u{034f}'
            // Arabic letter mark.
            | '\u{061c}'
            // Hangul fillers, which print blank.
            | '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}'
            // Khmer inherent vowels, invisible.
            | '\u{17b4}' | '\u{17b5}'
            // Mongolian free variation selectors and vowel separator.
            | '\u{180b}'..='\u{180f}'
            // Zero-width space, non-joiner, joiner; left-to-right and right-to-left marks.
            | '\u{200b}'..='\u{200f}'
            // Line and paragraph separators.
            | '\u{2028}' | '\u{2029}'
            // Bidi embeddings, overrides and the pop (LRE, RLE, PDF, LRO, RLO).
            | '\u{202a}'..='\u{202e}'
            // Word joiner, the invisible operators, the bidi isolates (LRI, RLI,
            // FSI, PDI) and the deprecated format characters after them.
            | '\u{2060}'..='\u{206f}'
            // Zero-width no-break space (a byte-order mark inside text).
            | '\u{feff}'
            // Interlinear annotation marks.
            | '\u{fff9}'..='\u{fffb}'
            // Musical symbol format controls (invisible beams, ties, phrases).
            | '\u{1d173}'..='\u{1d17a}'
            // Tag characters, invisible and used to smuggle text.
            | '\u{e0000}'..='\u{e007f}'
        )
}

/// `text` with every character [`hides_on_terminal`] is true of, and not
/// in `keep`, written as its Rust escape (`\n`, `\u{1b}`, `\u{202e}`).
/// `None` when there is nothing to escape, which is almost always, so the
/// caller can keep its borrowed text.
///
/// ```
/// use loops_core::escape_for_terminal;
/// assert_eq!(escape_for_terminal("plain", &[]), None);
/// assert_eq!(
///     escape_for_terminal("safe\u{202e}txt.exe\tx", &['\t']).as_deref(),
///     Some("safe\\u{202e}txt.exe\tx")
/// );
/// ```
pub fn escape_for_terminal(text: &str, keep: &[char]) -> Option<String> {
    let escaped = |c: char| hides_on_terminal(c) && !keep.contains(&c);
    if !text.chars().any(escaped) {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            // `escape_default` writes `\u{…}` for every character here but
            // the C0 ones it names (`\t`, `\r`, `\n`).
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::{escape_for_terminal, hides_on_terminal};

    #[test]
    fn every_bidi_and_zero_width_character_the_issue_names_is_escaped() {
        let named = ['\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}']
            .into_iter()
            .chain('\u{200b}'..='\u{200f}')
            .chain('\u{202a}'..='\u{202e}');
        for c in named {
            assert!(hides_on_terminal(c), "{:?}", c);
            assert_eq!(
                escape_for_terminal(&format!("a{c}b"), &[]),
                Some(format!("a\\u{{{:x}}}b", u32::from(c)))
            );
        }
    }

    #[test]
    fn controls_separators_tags_and_invisible_characters_are_escaped() {
        for c in [
            '\u{0}',
            '\u{7}',
            '\u{1b}',
            '\u{7f}',
            '\u{85}',
            '\u{9b}',
            '\u{61c}',
            '\u{180e}',
            '\u{ad}',
            '\u{34f}',
            '\u{115f}',
            '\u{1160}',
            '\u{3164}',
            '\u{ffa0}',
            '\u{17b4}',
            '\u{17b5}',
            '\u{180b}',
            '\u{180f}',
            '\u{1d173}',
            '\u{1d17a}',
            '\u{2028}',
            '\u{2029}',
            '\u{2060}',
            '\u{2064}',
            '\u{206f}',
            '\u{feff}',
            '\u{fff9}',
            '\u{fffb}',
            '\u{e0000}',
            '\u{e0041}',
            '\u{e007f}',
        ] {
            assert!(hides_on_terminal(c), "{:?}", c);
        }
    }

    #[test]
    fn what_a_terminal_shows_as_itself_is_kept() {
        // Letters of every direction, combining marks, emoji and their
        // variation selector, symbols next to the escaped ranges.
        let text = "é ß 日本 שלום مرحبا a\u{301} 👍\u{fe0f} \u{2027}\u{2030}\u{205f}\u{2070}\u{fff8}\u{fffc}\u{e0080}\u{180a}\u{1d17b}\u{ae}";
        for c in text.chars() {
            assert!(!hides_on_terminal(c), "{:?}", c);
        }
        assert_eq!(escape_for_terminal(text, &[]), None);
    }

    #[test]
    fn kept_characters_stay_raw_and_the_rest_is_escaped() {
        assert_eq!(
            escape_for_terminal("a\u{1b}[2Jb\rc\u{7f}\u{9b}d\ne\tf\u{200b}", &['\n']).as_deref(),
            Some("a\\u{1b}[2Jb\\rc\\u{7f}\\u{9b}d\ne\\tf\\u{200b}")
        );
    }
}

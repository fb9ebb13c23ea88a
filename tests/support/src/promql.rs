//! The metric names a PromQL expression reads, for checking that dashboards and alert
//! rules only use metrics the gateway exposes. A scanner, not a parser: it skips strings,
//! label matchers (`{...}`), ranges (`[...]`), label lists (`by (...)`), numbers and
//! Grafana variables, and keeps every other identifier that is neither a keyword nor a
//! function's name. Whether an expression parses is Prometheus' to say (tests/it/monitoring.rs
//! runs each through a real one).

use std::collections::BTreeSet;

/// Aggregation operators, binary operators and modifiers: identifiers that are no metric.
const KEYWORDS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "atan2",
    "offset",
    "inf",
    "nan",
];

/// Modifiers followed by a list of label names in parentheses.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Every metric name `expr` selects.
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i = match c {
            '"' | '\'' | '`' => skip_string(&chars, i),
            '{' => skip_to(&chars, i, '}'),
            '[' => skip_to(&chars, i, ']'),
            '#' => skip_line(&chars, i),
            '$' => skip_word(&chars, i + 1),
            c if c.is_ascii_digit() || c == '.' => skip_word(&chars, i),
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let end = skip_word(&chars, i);
                let word: String = chars[i..end].iter().collect();
                let next = next_non_space(&chars, end);
                if LABEL_LISTS.contains(&word.as_str()) && next == Some('(') {
                    skip_to(&chars, end, ')')
                } else {
                    if next != Some('(') && !KEYWORDS.contains(&word.to_lowercase().as_str()) {
                        names.insert(word);
                    }
                    end
                }
            }
            _ => i + 1,
        };
    }
    names
}

/// The index after the word (identifier or number) starting at `i`.
fn skip_word(chars: &[char], mut i: usize) -> usize {
    while i < chars.len()
        && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | ':' | '.'))
    {
        i += 1;
    }
    i
}

/// The index after the string literal starting at `i` (its quote), escapes included.
fn skip_string(chars: &[char], i: usize) -> usize {
    let quote = chars[i];
    let mut j = i + 1;
    while j < chars.len() && chars[j] != quote {
        j += if chars[j] == '\\' { 2 } else { 1 };
    }
    j + 1
}

/// The index after the first `close` from `i` on, skipping strings on the way.
fn skip_to(chars: &[char], i: usize, close: char) -> usize {
    let mut j = i + 1;
    while j < chars.len() && chars[j] != close {
        j = if matches!(chars[j], '"' | '\'' | '`') {
            skip_string(chars, j)
        } else {
            j + 1
        };
    }
    j + 1
}

fn skip_line(chars: &[char], i: usize) -> usize {
    chars[i..]
        .iter()
        .position(|&c| c == '\n')
        .map_or(chars.len(), |p| i + p + 1)
}

fn next_non_space(chars: &[char], i: usize) -> Option<char> {
    chars[i..].iter().copied().find(|c| !c.is_whitespace())
}

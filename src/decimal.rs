//! Numbers written into text without the formatter (`format!`/`Display` cost several
//! times as much, and these run on every request: media types, client addresses, access
//! lines): the one writer, `itoa`'s.

/// Appends `n` in decimal, as `Display` writes it.
pub fn push_decimal(text: &mut String, n: impl itoa::Integer) {
    text.push_str(itoa::Buffer::new().format(n));
}

/// Appends `n` in decimal with leading zeros to `width` digits (`n` must have at most
/// `width` digits: more are cut from the left).
pub fn push_padded(text: &mut String, n: u32, width: u32) {
    // A 1 before the digits keeps the zeros, and is dropped.
    let marked = 10u64.pow(width) + u64::from(n) % 10u64.pow(width);
    text.push_str(&itoa::Buffer::new().format(marked)[1..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_as_display_writes_them() {
        for n in [0, 7, 10, 200, 5678, u64::from(u16::MAX), u64::MAX] {
            let mut text = String::from("x");
            push_decimal(&mut text, n);
            assert_eq!(text, format!("x{n}"));
        }
    }

    #[test]
    fn padded_decimals_as_the_formatter_pads_them() {
        for n in [0, 7, 123_456, 999_999, 4_020] {
            let mut text = String::new();
            push_padded(&mut text, n, 6);
            assert_eq!(text, format!("{n:06}"));
        }
    }
}

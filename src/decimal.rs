//! Numbers written into text without the formatter: `format!`/`Display` cost several times
//! as much, and these run on every request (media types, client addresses, access lines).

/// Appends `n` in decimal, as `Display` writes it.
pub fn push_decimal(text: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = n;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    text.extend(digits[start..].iter().map(|d| char::from(*d)));
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
}

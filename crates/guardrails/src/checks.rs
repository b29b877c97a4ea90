//! The arithmetic that turns a regex candidate into a finding: checksums (Luhn for cards,
//! mod-97 for IBANs), the SSA's rules for social security numbers, address ranges for IPs, and
//! the entropy of a token. A 16-digit number that fails Luhn's check is not a card.

use std::net::Ipv6Addr;

/// Luhn's check over the digits of `s` (separators ignored), for 13 to 19 digits.
pub fn luhn(s: &str) -> bool {
    let mut sum = 0u32;
    let mut n = 0usize;
    for b in s.bytes().rev() {
        if !b.is_ascii_digit() {
            continue;
        }
        let mut d = u32::from(b - b'0');
        if n % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
        n += 1;
    }
    (13..=19).contains(&n) && sum % 10 == 0
}

/// ISO 13616's check: the country and check digits moved to the end, letters as 10..35, the
/// number mod 97 is 1. Spaces ignored; 15 to 34 characters.
pub fn iban(s: &str) -> bool {
    let chars: Vec<u8> = s.bytes().filter(|b| *b != b' ').collect();
    if !(15..=34).contains(&chars.len())
        || !chars[..2].iter().all(u8::is_ascii_uppercase)
        || !chars[2..4].iter().all(u8::is_ascii_digit)
    {
        return false;
    }
    let mut rem = 0u32;
    for &c in chars[4..].iter().chain(&chars[..4]) {
        let v = match c {
            b'0'..=b'9' => u32::from(c - b'0'),
            b'A'..=b'Z' => u32::from(c - b'A') + 10,
            _ => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

/// A US social security number `AAA-GG-SSSS` as the SSA issues them: area not 000, 666 or
/// 900–999, group not 00, serial not 0000.
pub fn us_ssn(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 11 || b[3] != b'-' || b[6] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|t| t.parse::<u32>().ok());
    match (num(0..3), num(4..6), num(7..11)) {
        (Some(area), Some(group), Some(serial)) => {
            area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
        }
        _ => false,
    }
}

/// A dotted IPv4 address with every part 0–255 and no leading zeros, not one piece of a longer
/// dotted number (a version `1.2.3.4.5`): `after` is the text following the candidate.
pub fn ipv4(s: &str, after: &str) -> bool {
    let mut a = after.bytes();
    if a.next() == Some(b'.') && a.next().is_some_and(|b| b.is_ascii_digit()) {
        return false;
    }
    let mut parts = 0;
    for part in s.split('.') {
        parts += 1;
        if part.is_empty() || part.len() > 3 || (part.len() > 1 && part.starts_with('0')) {
            return false;
        }
        if part.parse::<u16>().map_or(true, |n| n > 255) {
            return false;
        }
    }
    parts == 4
}

/// An IPv6 address as std parses it, with at least two groups of hex written out (so that a
/// lone `::` or a clock time is not one).
pub fn ipv6(s: &str) -> bool {
    s.parse::<Ipv6Addr>().is_ok() && s.split(':').filter(|g| !g.is_empty()).count() >= 2
}

/// Shannon entropy of `s` in bits per byte.
pub fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[usize::from(b)] += 1;
    }
    let len = s.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|&c| {
            let p = f64::from(c) / len;
            -p * p.log2()
        })
        .sum()
}

/// A token that looks random enough to be a credential: letters and digits mixed, and more than
/// 4.3 bits of entropy per character, which hexadecimal (at most 4) — hashes, UUIDs, commit
/// ids — never reaches, nor do words and identifiers.
pub fn high_entropy(s: &str) -> bool {
    let digits = s.bytes().filter(u8::is_ascii_digit).count();
    let upper = s.bytes().filter(u8::is_ascii_uppercase).count();
    let lower = s.bytes().filter(u8::is_ascii_lowercase).count();
    digits >= 2 && upper >= 2 && lower >= 2 && entropy(s) > 4.3
}

/// Digits of a phone number candidate: 10 to 15, as E.164 allows.
pub fn phone(s: &str) -> bool {
    let n = s.bytes().filter(u8::is_ascii_digit).count();
    (10..=15).contains(&n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_accepts_real_test_cards_and_rejects_one_digit_off() {
        assert!(luhn("4111 1111 1111 1111"));
        assert!(luhn("5500-0000-0000-0004"));
        assert!(luhn("378282246310005"));
        assert!(!luhn("4111 1111 1111 1112"));
        assert!(!luhn("1234567890123456"));
        // Too short to be a card even though the sum works.
        assert!(!luhn("18"));
    }

    #[test]
    fn iban_checksum() {
        assert!(iban("DE89 3704 0044 0532 0130 00"));
        assert!(iban("GB82WEST12345698765432"));
        assert!(!iban("DE89 3704 0044 0532 0130 01"));
        assert!(!iban("GB82WEST1234569876543X"));
        assert!(!iban("XX00"));
    }

    #[test]
    fn ssn_format_rules() {
        assert!(us_ssn("123-45-6789"));
        assert!(!us_ssn("000-45-6789"));
        assert!(!us_ssn("666-45-6789"));
        assert!(!us_ssn("912-45-6789"));
        assert!(!us_ssn("123-00-6789"));
        assert!(!us_ssn("123-45-0000"));
        assert!(!us_ssn("123456789"));
    }

    #[test]
    fn ip_addresses() {
        assert!(ipv4("192.168.1.20", " is up"));
        assert!(!ipv4("192.168.1.256", ""));
        assert!(!ipv4("01.2.3.4", ""));
        assert!(!ipv4("1.2.3.4", ".5 release"));
        assert!(ipv6("2001:db8::8a2e:370:7334"));
        assert!(ipv6("fe80::1"));
        assert!(!ipv6("12:30:45"));
        assert!(!ipv6("::"));
    }

    #[test]
    fn entropy_separates_keys_from_hex_and_words() {
        assert!(high_entropy("Zx8vQ2mLp9RtY4kWc7NbH3jFs6DgA1eU"));
        // A commit id and a UUID: hexadecimal, at most 4 bits a character.
        assert!(!high_entropy("201b4eb5c1f0a2d3e4f5a6b7c8d9e0f1a2b3c4d5"));
        assert!(!high_entropy("123e4567-e89b-12d3-a456-426614174000"));
        assert!(!high_entropy("this_is_a_very_long_identifier_name_in_code"));
    }

    #[test]
    fn phone_digit_counts() {
        assert!(phone("(415) 555-2671"));
        assert!(phone("+44 20 7946 0958"));
        assert!(!phone("555-2671"));
    }
}

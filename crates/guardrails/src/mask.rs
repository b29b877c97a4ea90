//! Masking: each sensitive value replaced by a placeholder naming its kind (`<EMAIL_ADDRESS_1>`),
//! the same value always by the same placeholder within a request, and the map kept so that
//! the answer can be given back with the caller's own values (`output_parse_pii`). The map
//! lives as long as the request and is never logged.

use crate::detect::{Detector, Finding};

/// The placeholders of one request and the values they stand for.
#[derive(Debug, Default)]
pub struct Masks {
    /// (placeholder, value), in the order they were made.
    entries: Vec<(String, String)>,
    /// How many placeholders each label has had (its next number is one more).
    numbers: Vec<(String, u32)>,
}

impl Masks {
    /// Whether anything was masked.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The placeholder for `value` of kind `label`: the one it already has, or the next.
    pub fn placeholder(&mut self, label: &str, value: &str) -> &str {
        if let Some(i) = self.entries.iter().position(|(_, v)| v == value) {
            return &self.entries[i].0;
        }
        let n = match self.numbers.iter_mut().find(|(l, _)| l == label) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                self.numbers.push((label.to_owned(), 1));
                1
            }
        };
        let mut number = itoa::Buffer::new();
        let number = number.format(n);
        let mut placeholder = String::with_capacity(label.len() + number.len() + 3);
        for part in ["<", label, "_", number, ">"] {
            placeholder.push_str(part);
        }
        self.entries.push((placeholder, value.to_owned()));
        let last = self.entries.len() - 1;
        &self.entries[last].0
    }

    /// `text` with each finding replaced by its placeholder. Findings are ordered and do not
    /// overlap ([`Detector::scan`]).
    pub fn mask(&mut self, detector: &Detector, text: &str, findings: &[Finding]) -> String {
        let mut out = String::with_capacity(text.len() + 16 * findings.len());
        let mut at = 0;
        for f in findings {
            out.push_str(&text[at..f.start]);
            let label = &detector.targets()[f.target].label;
            out.push_str(self.placeholder(label, &text[f.start..f.end]));
            at = f.end;
        }
        out.push_str(&text[at..]);
        out
    }

    /// `text` with each span (byte range and label, found by a service such as Presidio)
    /// replaced by its placeholder, numbered with this request's own so the answer's can be
    /// given back. Spans must be ordered, apart and on character boundaries; one that is
    /// not is left as it is (never a panic on a service's word).
    pub fn mask_spans(&mut self, text: &str, spans: &[(usize, usize, &str)]) -> String {
        let mut out = String::with_capacity(text.len() + 16 * spans.len());
        let mut at = 0;
        for &(start, end, label) in spans {
            let (Some(before), Some(value)) = (text.get(at..start), text.get(start..end)) else {
                continue;
            };
            out.push_str(before);
            out.push_str(self.placeholder(label, value));
            at = end;
        }
        out.push_str(text.get(at..).unwrap_or_default());
        out
    }

    /// `text` with every placeholder of this request given back its value, or `None` when it
    /// holds none. A placeholder the model changed (`<EMAIL_ADDRESS_1 >`) stays as it is.
    pub fn restore(&self, text: &str) -> Option<String> {
        let mut out = String::new();
        let mut at = 0;
        for (start, end, value) in self.placeholders_in(text) {
            out.push_str(&text[at..start]);
            out.push_str(value);
            at = end;
        }
        if at == 0 {
            return None;
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    /// Each placeholder of this request in `text`: its byte range and the value it stands for,
    /// in order (a streamed answer gives them back where they fall, across chunks).
    pub fn placeholders_in<'a>(
        &'a self,
        text: &'a str,
    ) -> impl Iterator<Item = (usize, usize, &'a str)> + 'a {
        let mut from = if self.entries.is_empty() {
            text.len()
        } else {
            0
        };
        std::iter::from_fn(move || {
            while let Some(open) = text[from..].find('<').map(|i| i + from) {
                let close = text[open..].find('>').map(|i| i + open)?;
                let candidate = &text[open..=close];
                match self.entries.iter().find(|(p, _)| p == candidate) {
                    Some((_, value)) => {
                        from = close + 1;
                        return Some((open, close + 1, value.as_str()));
                    }
                    None => from = open + 1,
                }
            }
            None
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{Action, Spec};
    use crate::entity::Entity;

    fn detector() -> Detector {
        Detector::new(&Spec {
            entities: vec![
                (Entity::EmailAddress, Action::Mask),
                (Entity::CreditCard, Action::Mask),
            ],
            ..Spec::default()
        })
        .unwrap()
    }

    fn mask(m: &mut Masks, d: &Detector, text: &str) -> String {
        let mut f = Vec::new();
        d.scan(text, &mut f);
        m.mask(d, text, &f)
    }

    #[test]
    fn same_value_same_placeholder_numbers_per_kind() {
        let d = detector();
        let mut m = Masks::default();
        let a = mask(
            &mut m,
            &d,
            "a@x.io and b@x.io paid with 4111 1111 1111 1111, ask a@x.io",
        );
        assert_eq!(
            a,
            "<EMAIL_ADDRESS_1> and <EMAIL_ADDRESS_2> paid with <CREDIT_CARD_1>, ask <EMAIL_ADDRESS_1>"
        );
        // A second text of the same request continues the numbering.
        assert_eq!(mask(&mut m, &d, "cc c@x.io"), "cc <EMAIL_ADDRESS_3>");
    }

    #[test]
    fn spans_share_the_numbering_and_come_back() {
        let d = detector();
        let mut m = Masks::default();
        mask(&mut m, &d, "mail a@x.io");
        let text = "Zoë Ruiz met Ann, then a@x.io";
        let at = |w: &str| {
            let i = text.find(w).unwrap();
            (i, i + w.len())
        };
        let ((z0, z1), (a0, a1), (e0, e1)) = (at("Zoë Ruiz"), at("Ann"), at("a@x.io"));
        let spans = [
            (z0, z1, "PERSON"),
            (a0, a1, "PERSON"),
            (e0, e1, "EMAIL_ADDRESS"),
        ];
        let masked = m.mask_spans(text, &spans);
        assert_eq!(masked, "<PERSON_1> met <PERSON_2>, then <EMAIL_ADDRESS_1>");
        assert_eq!(m.restore(&masked).as_deref(), Some(text));
        // A span off a character boundary or out of order is skipped, not a panic.
        assert_eq!(m.mask_spans("Zoë", &[(0, 3, "X")]), "Zoë");
        assert_eq!(m.mask_spans("abc", &[(2, 3, "X"), (0, 1, "Y")]), "ab<X_1>");
    }

    #[test]
    fn restore_gives_values_back_and_leaves_the_rest() {
        let d = detector();
        let mut m = Masks::default();
        mask(&mut m, &d, "mail a@x.io");
        assert_eq!(
            m.restore("Sent to <EMAIL_ADDRESS_1> (1 < 2) <EMAIL_ADDRESS_9>.")
                .as_deref(),
            Some("Sent to a@x.io (1 < 2) <EMAIL_ADDRESS_9>.")
        );
        assert_eq!(m.restore("nothing here"), None);
        assert_eq!(m.restore("a <b> c"), None);
        assert_eq!(Masks::default().restore("<EMAIL_ADDRESS_1>"), None);
    }
}
